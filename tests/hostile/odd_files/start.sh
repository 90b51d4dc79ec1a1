#!/usr/bin/env bash
set -u
. "$AUTORL_AGENT_DIR/../common.sh"
make_ckpt v1 3 24
submit v1
rm -f agent.log && mkfifo agent.log
mkfifo code/pipe.jsonl
ln -s /dev/zero llm_usage.json
ln -s /dev/zero trajectory.jsonl
ln -s /dev/zero code/zero.txt
truncate -s 10G code/huge.bin
rm -f instructions.md && mkfifo instructions.md
