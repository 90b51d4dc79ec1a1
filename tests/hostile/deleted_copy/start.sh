#!/usr/bin/env bash
set -u
. "$AUTORL_AGENT_DIR/../common.sh"
make_ckpt v1 3 24
submit v1
printf 'say 12\n' > code/gone.txt
sleep 4
rm code/gone.txt
sleep 1
