#!/usr/bin/env bash
set -u
. "$AUTORL_AGENT_DIR/../common.sh"
make_ckpt v1 3 24
submit v1
echo '{"prompt_tokens": 7, "completion_tokens": 5, "cost_usd": 0.25, "note": {"nested": [1, 2]}}' > llm_usage.json
