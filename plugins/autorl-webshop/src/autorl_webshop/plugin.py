"""Hook implementations of autorl-webshop (only hookimpls live here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autorl import hookimpl


@hookimpl
def register_benchmarks(register: Callable[[type[Any]], None]) -> None:
    from autorl_webshop.benchmark import WebShopBenchmark

    register(WebShopBenchmark)
