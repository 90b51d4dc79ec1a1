"""Options given as ``KEY=VALUE`` pairs (``--benchmark-option``, ``--agent-env``, ``sweep run --option``)."""

from __future__ import annotations

import json
from typing import Any

from autorl.errors import UsageError

__all__ = ["parse_pairs"]


def parse_pairs(pairs: list[str], flag: str, *, json_values: bool = True, key: str = "KEY") -> dict[str, Any]:
    """``KEY=VALUE`` pairs as a dict: JSON values (numbers, true/false, lists) where they parse and
    ``json_values`` is set, else the plain strings; a pair without ``=`` or a name is a one-line error."""
    options: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"{flag} takes {key}=VALUE, got {pair!r}")
        if json_values:
            try:
                options[name] = json.loads(value)
                continue
            except ValueError:
                pass
        options[name] = value
    return options
