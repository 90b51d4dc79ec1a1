#!/usr/bin/env bash
exec "$AUTORL_PYTHON" "$AUTORL_AGENT_DIR/redteam.py"
