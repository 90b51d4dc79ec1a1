#!/usr/bin/env bash
# The example agent: GRPO with trl on the training data, submitting checkpoints as it goes.
set -euo pipefail
mkdir -p "$WORKSPACE/code"
cp "$AUTORL_AGENT_DIR/train_grpo.py" "$WORKSPACE/code/train_grpo.py"
exec "${AUTORL_PYTHON:-python3}" "$WORKSPACE/code/train_grpo.py"
