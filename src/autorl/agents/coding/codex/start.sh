#!/usr/bin/env bash
# Codex non-interactive: `codex exec --json`, approvals off (the run's sandbox is the boundary),
# JSONL events in $WORKSPACE/transcript.jsonl.
set -uo pipefail
. "$AUTORL_AGENT_DIR/../common.sh"
bin="${CODEX_BIN:-codex}"
autorl_require "$bin" "npm install -g @openai/codex"
mkdir -p "${CODEX_HOME:-$WORKSPACE/.codex}"
args=(exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox --cd "$WORKSPACE")
[ -n "${CODEX_MODEL:-}" ] && args+=(--model "$CODEX_MODEL")
autorl_exec "$bin" "${args[@]}" "$(autorl_prompt)"
