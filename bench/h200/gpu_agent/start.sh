#!/usr/bin/env bash
exec python3 "$AUTORL_AGENT_DIR/sft.py"
