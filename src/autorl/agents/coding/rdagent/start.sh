#!/usr/bin/env bash
# RD-Agent's RL post-training loop; it submits to $GRADING_SERVER_URL itself each iteration.
set -uo pipefail
. "$AUTORL_AGENT_DIR/../common.sh"
python="${RDAGENT_PYTHON:-python3}"
autorl_require "$python" "set RDAGENT_PYTHON to the interpreter of RD-Agent's environment"
export RL_FILE_PATH="$(dirname "$(dirname "$MODEL_PATH")")"
args=(-m rdagent.app.rl.loop --base-model "$BASE_MODEL" --benchmark "$TASK")
[ -n "${RDAGENT_LOOP_N:-}" ] && args+=(--loop-n "$RDAGENT_LOOP_N")
[ -n "${RDAGENT_STEP_N:-}" ] && args+=(--step-n "$RDAGENT_STEP_N")
autorl_exec "$python" "${args[@]}"
