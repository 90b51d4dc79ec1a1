"""The options several commands share, each defined once, and options given as ``KEY=VALUE`` pairs
(``--benchmark-option``, ``--agent-env``, ``sweep run --option``)."""

from __future__ import annotations

import json
from typing import Any

import typer

from autorl.errors import UsageError

__all__ = [
    "BACKEND",
    "BENCHMARK_OPTIONS",
    "CHECKPOINT",
    "JSON_OUTPUT",
    "JSON_RECORD",
    "LIMIT",
    "SPLIT",
    "TASK",
    "parse_pairs",
]

# One object per option, given as the default of each command's parameter: the same flag, meaning and help
# wherever it appears (typer reads these objects and never changes them).
TASK = typer.Option(..., "--task", help="Benchmark name.")
CHECKPOINT = typer.Option(..., "--model", help="Checkpoint: local dir, hub id or autorl:tiny.")
SPLIT = typer.Option("dev", "--split", help="dev or test.")
LIMIT = typer.Option(None, "--limit", help="Only the first N items.")
BACKEND = typer.Option(None, "--backend", help="Inference backend (default: vllm if usable, else hf).")
BENCHMARK_OPTIONS = typer.Option(
    [], "--benchmark-option", help="KEY=VALUE for the benchmark (repeatable; JSON values)."
)
#: ``--json`` of a command that prints one record
JSON_RECORD = typer.Option(False, "--json", help="Print one JSON record.")
#: ``--json`` of a command that lists or reports
JSON_OUTPUT = typer.Option(False, "--json", help="Machine-readable output.")


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
