"""Hook implementations of autorl-alpacaeval (only hookimpls live here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autorl import hookimpl


@hookimpl
def register_benchmarks(register: Callable[[type[Any]], None]) -> None:
    from autorl_alpacaeval.benchmark import AlpacaEvalBenchmark

    register(AlpacaEvalBenchmark)
