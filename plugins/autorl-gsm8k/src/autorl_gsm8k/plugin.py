"""Hook implementations of autorl-gsm8k (only hookimpls live here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autorl import hookimpl


@hookimpl
def register_benchmarks(register: Callable[[type[Any]], None]) -> None:
    from autorl_gsm8k.benchmark import GSM8K

    register(GSM8K)
