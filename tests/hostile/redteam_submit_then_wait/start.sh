#!/usr/bin/env bash
set -u
. "$AUTORL_AGENT_DIR/../common.sh"
make_ckpt v1 12 18
submit v1 > "$WORKSPACE/code/submitted.json"
touch "$WORKSPACE/code/submitted"
[ -n "${WAIT_S:-}" ] && sleep "$WAIT_S"
exit 0
