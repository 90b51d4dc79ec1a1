#!/usr/bin/env bash
# OpenHands headless (always-approve), LLM_MODEL / LLM_API_KEY / LLM_BASE_URL applied with
# --override-with-envs, JSONL events in $WORKSPACE/transcript.jsonl.
set -uo pipefail
. "$AUTORL_AGENT_DIR/../common.sh"
bin="${OPENHANDS_BIN:-openhands}"
autorl_require "$bin" "uv tool install openhands --python 3.12, or set OPENHANDS_BIN"
autorl_exec "$bin" --headless --json --override-with-envs -t "$(autorl_prompt)"
