# Shared by the coding-CLI agents (sourced by each start.sh).
#
# autorl_prompt      the task prompt, built from the workspace's description.md and instructions.md
# autorl_require     stop at once, with one line naming what to install, when a command is missing
# autorl_exec        run the CLI: its output goes to the agent log and to $WORKSPACE/transcript.jsonl,
#                    and the script exits with the CLI's own exit status

autorl_prompt() {
  cat <<PROMPT
You are an autonomous ML engineer. Your working directory is $WORKSPACE; everything you need is described
below. Work without asking questions: nobody will answer. Keep going until the time budget is nearly spent,
submitting improved checkpoints as you go; a run with no submission scores nothing.

PROMPT
  cat "$WORKSPACE/description.md"
  printf '\n'
  cat "$WORKSPACE/instructions.md"
}

autorl_require() {  # autorl_require COMMAND "how to install it"
  if ! command -v "$1" >/dev/null 2>&1; then
    printf 'autorl: %s not found on PATH: %s\n' "$1" "$2" >&2
    exit 127
  fi
}

autorl_exec() {  # autorl_exec ARGV...
  local transcript="$WORKSPACE/transcript.jsonl"
  printf 'autorl: starting %s in %s\n' "$1" "$WORKSPACE" >&2
  "$@" </dev/null | tee -a "$transcript"
  local status=("${PIPESTATUS[@]}")
  printf 'autorl: %s exited with status %s\n' "$1" "${status[0]}" >&2
  exit "${status[0]}"
}
