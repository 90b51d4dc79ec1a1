#!/usr/bin/env bash
set -u
. "$AUTORL_AGENT_DIR/../common.sh"
make_ckpt v1 3 24
submit v1
"$AUTORL_PYTHON" "$AUTORL_AGENT_DIR/write.py"
sleep 3
rm code/gone.sh
sleep 2
