"""Hook implementations: the ``echo`` benchmark and the ``scripted`` backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autorl import hookimpl


@hookimpl
def register_benchmarks(register: Callable[[type[Any]], None]) -> None:
    from autorl_example_plugin.stub import EchoBenchmark

    register(EchoBenchmark)


@hookimpl
def register_backends(register: Callable[[type[Any]], None]) -> None:
    from autorl_example_plugin.stub import ScriptedBackend

    register(ScriptedBackend)
