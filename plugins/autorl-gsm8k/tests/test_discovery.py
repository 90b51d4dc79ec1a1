"""The plugin is discovered through its entry point when installed alone with the core."""

from __future__ import annotations

import json
import subprocess
import sys


def test_plugin_is_discovered() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from autorl.cli import main; main(['plugins'])"],
        capture_output=True, text=True, check=True,
    ).stdout
    plugins = {p["name"]: p for p in json.loads(out)}
    assert "gsm8k" in plugins
    assert plugins["gsm8k"]["distribution"] == "autorl-gsm8k"
