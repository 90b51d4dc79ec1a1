#!/usr/bin/env bash
# Gemini CLI headless: one prompt, all tool calls approved (--yolo), stream-json transcript.
set -uo pipefail
. "$AUTORL_AGENT_DIR/../common.sh"
bin="${GEMINI_BIN:-gemini}"
autorl_require "$bin" "npm install -g @google/gemini-cli"
args=(--yolo --output-format stream-json -p "$(autorl_prompt)")
[ -n "${GEMINI_MODEL:-}" ] && args+=(--model "$GEMINI_MODEL")
autorl_exec "$bin" "${args[@]}"
