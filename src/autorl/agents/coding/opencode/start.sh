#!/usr/bin/env bash
# opencode non-interactive: `opencode run --format json`, every permission allowed (the run's sandbox
# is the boundary), JSON events in $WORKSPACE/transcript.jsonl.
set -uo pipefail
. "$AUTORL_AGENT_DIR/../common.sh"
bin="${OPENCODE_BIN:-opencode}"
autorl_require "$bin" "npm install -g opencode-ai"
if [ -z "${OPENCODE_CONFIG_CONTENT:-}" ]; then
  # every provider through the run's LLM gateway (the base URLs autorl run sets)
  export OPENCODE_CONFIG_CONTENT="{\"permission\": \"allow\", \"provider\": {
    \"openai\": {\"options\": {\"baseURL\": \"${OPENAI_BASE_URL:-}\", \"apiKey\": \"${OPENAI_API_KEY:-}\"}},
    \"anthropic\": {\"options\": {\"baseURL\": \"${ANTHROPIC_BASE_URL:-}/v1\", \"apiKey\": \"${ANTHROPIC_API_KEY:-}\"}},
    \"google\": {\"options\": {\"baseURL\": \"${GOOGLE_GEMINI_BASE_URL:-}/v1beta\", \"apiKey\": \"${GEMINI_API_KEY:-}\"}}}}"
fi
args=(run --format json)
[ -n "${OPENCODE_MODEL:-}" ] && args+=(--model "$OPENCODE_MODEL")
autorl_exec "$bin" "${args[@]}" "$(autorl_prompt)"
