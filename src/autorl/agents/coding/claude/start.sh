#!/usr/bin/env bash
# Claude Code in headless mode: one prompt, tools approved (the run's sandbox is the boundary),
# the stream-json transcript in $WORKSPACE/transcript.jsonl.
set -uo pipefail
. "$AUTORL_AGENT_DIR/../common.sh"
bin="${CLAUDE_BIN:-claude}"
autorl_require "$bin" "npm install -g @anthropic-ai/claude-code"
args=(-p "$(autorl_prompt)" --output-format stream-json --verbose --dangerously-skip-permissions)
[ -n "${CLAUDE_MODEL:-}" ] && args+=(--model "$CLAUDE_MODEL")
[ -n "${CLAUDE_MAX_TURNS:-}" ] && args+=(--max-turns "$CLAUDE_MAX_TURNS")
# the CLI refuses to skip permissions as root unless told it is inside a sandbox
[ "$(id -u)" = 0 ] && export IS_SANDBOX=1
autorl_exec "$bin" "${args[@]}"
