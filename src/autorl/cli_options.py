"""Option values the command line shares between its command groups (``autorl run``, ``eval``, ``export``)."""

from __future__ import annotations

import json
from typing import Any

from autorl.errors import UsageError


def benchmark_options(pairs: list[str]) -> dict[str, Any]:
    """``--benchmark-option KEY=VALUE``: JSON values (numbers, true/false, lists) or plain strings."""
    options: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--benchmark-option takes KEY=VALUE, got {pair!r}")
        try:
            options[name] = json.loads(value)
        except ValueError:
            options[name] = value
    return options
