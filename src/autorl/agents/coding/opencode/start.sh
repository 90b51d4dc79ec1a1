#!/usr/bin/env bash
# opencode non-interactive: `opencode run --format json`, every permission allowed (the run's sandbox
# is the boundary), JSON events in $WORKSPACE/transcript.jsonl.
set -uo pipefail
. "$AUTORL_AGENT_DIR/../common.sh"
bin="${OPENCODE_BIN:-opencode}"
autorl_require "$bin" "npm install -g opencode-ai"
if [ -z "${OPENCODE_CONFIG_CONTENT:-}" ]; then
  export OPENCODE_CONFIG_CONTENT='{"permission": "allow"}'
fi
args=(run --format json)
[ -n "${OPENCODE_MODEL:-}" ] && args+=(--model "$OPENCODE_MODEL")
autorl_exec "$bin" "${args[@]}" "$(autorl_prompt)"
