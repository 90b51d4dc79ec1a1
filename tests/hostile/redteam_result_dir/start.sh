#!/usr/bin/env bash
set -u
. "$AUTORL_AGENT_DIR/../common.sh"
make_ckpt v1 3 24
submit v1
# the run's result.json goes to the workspace root: a non-empty directory there makes every rename onto it fail
mkdir -p "$WORKSPACE/result.json/keep"
echo '[]' > "$WORKSPACE/code/attempts.json"
