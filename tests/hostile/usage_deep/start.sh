#!/usr/bin/env bash
set -u
. "$AUTORL_AGENT_DIR/../common.sh"
make_ckpt v1 3 24
submit v1
"$AUTORL_PYTHON" -c 'open("llm_usage.json", "w").write("[" * 100000)'
