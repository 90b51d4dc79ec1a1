"""Built-in benchmarks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autorl.hookspecs import hookimpl


@hookimpl
def register_benchmarks(register: Callable[[type[Any]], None]) -> None:
    from autorl.builtin.arith import Arith
    from autorl.builtin.basics import Basics

    register(Arith)
    register(Basics)
