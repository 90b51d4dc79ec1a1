"""Prices of model calls: the built-in list prices per model, the operator's table over them, and the entry
that applies to a model name."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from autorl.errors import UsageError

#: USD per million tokens (input, output, cached input): list prices when this table was written. The
#: operator overrides or extends it with a YAML/JSON file (``--llm-prices``, ``AUTORL_LLM_PRICES``) of
#: ``model: {input: ..., output: ..., cached_input: ...}``. A model matches its longest prefix in the table.
DEFAULT_PRICES: dict[str, dict[str, float]] = {
    "gpt-4o": {"input": 2.5, "output": 10.0, "cached_input": 1.25},
    "gpt-4o-mini": {"input": 0.15, "output": 0.6, "cached_input": 0.075},
    "gpt-4.1": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
    "gpt-4.1-mini": {"input": 0.4, "output": 1.6, "cached_input": 0.1},
    "gpt-5": {"input": 1.25, "output": 10.0, "cached_input": 0.125},
    "gpt-5-mini": {"input": 0.25, "output": 2.0, "cached_input": 0.025},
    "o3": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
    "o4-mini": {"input": 1.1, "output": 4.4, "cached_input": 0.275},
    "claude-opus-4": {"input": 15.0, "output": 75.0, "cached_input": 1.5},
    "claude-sonnet-4": {"input": 3.0, "output": 15.0, "cached_input": 0.3},
    "claude-haiku-4": {"input": 1.0, "output": 5.0, "cached_input": 0.1},
    "claude-3-5-haiku": {"input": 0.8, "output": 4.0, "cached_input": 0.08},
    "gemini-2.5-pro": {"input": 1.25, "output": 10.0, "cached_input": 0.31},
    "gemini-2.5-flash": {"input": 0.3, "output": 2.5, "cached_input": 0.075},
}


def load_prices(path: str | Path | None) -> dict[str, dict[str, float]]:
    """The default table, overridden by the operator's file; a bad file is a one-line UsageError."""
    prices = {k: dict(v) for k, v in DEFAULT_PRICES.items()}
    if not path:
        return prices
    import yaml

    try:
        data = yaml.safe_load(Path(path).expanduser().read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"price table {path}: cannot read it: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise UsageError(f"price table {path}: must map model names to {{input, output, cached_input}}")
    for model, entry in data.items():
        try:
            if not isinstance(entry, dict) or set(entry) - {"input", "output", "cached_input"}:
                raise ValueError
            values = {k: float(v) for k, v in entry.items()}
            if any(not 0 <= v < math.inf for v in values.values()):
                raise ValueError
        except (TypeError, ValueError):
            raise UsageError(
                f"price table {path}: {model}: give input, output (and cached_input) as "
                "non-negative USD per million tokens"
            ) from None
        values.setdefault("cached_input", values.get("input", 0.0))
        prices[str(model)] = {
            "input": values.get("input", 0.0),
            "output": values.get("output", 0.0),
            "cached_input": values["cached_input"],
        }
    return prices


def price_of(model: str, prices: Mapping[str, Mapping[str, float]]) -> Mapping[str, float] | None:
    """The entry for ``model`` (exact, else its longest prefix; a provider prefix ``org/`` is ignored)."""
    for name in dict.fromkeys([model, model.rsplit("/", 1)[-1]]):
        if name in prices:
            return prices[name]
        best = max((k for k in prices if name.startswith(k)), key=len, default=None)
        if best is not None:
            return prices[best]
    return None
