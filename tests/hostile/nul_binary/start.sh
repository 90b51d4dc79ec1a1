#!/usr/bin/env bash
set -u
. "$AUTORL_AGENT_DIR/../common.sh"
make_ckpt v1 3 24
submit v1
printf '\000\001\002say 9\000\377' > code/blob.bin
