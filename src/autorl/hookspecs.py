"""The hooks a plugin can implement. Hooks evolve by adding arguments only.

A plugin is a module (an entry point in the ``autorl`` group, or a built-in) whose functions carry
``@autorl.hookimpl``. Each ``register_*`` hook receives a ``register`` callable; call it once per class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("autorl")
hookimpl = pluggy.HookimplMarker("autorl")


@hookspec
def register_benchmarks(register: Callable[[type[Any]], None]) -> None:
    """Register benchmark classes.

    Called once per process, the first time any benchmark is looked up (``autorl list benchmarks``,
    ``autorl run``, the grader's worker). ``register`` takes a :class:`autorl.Benchmark` subclass whose
    ``name`` is unique across all installed plugins; a second registration of a name is an error
    naming both distributions.

    Example::

        @autorl.hookimpl
        def register_benchmarks(register):
            register(MyBenchmark)
    """


@hookspec
def register_agents(register: Callable[[type[Any]], None]) -> None:
    """Register agent classes.

    Called once per process, the first time an agent is looked up. ``register`` takes an
    :class:`autorl.Agent` subclass with a unique ``name``.

    Example::

        @autorl.hookimpl
        def register_agents(register):
            register(MyAgent)
    """


@hookspec
def register_backends(register: Callable[[type[Any]], None]) -> None:
    """Register inference backend classes.

    Called once per process, the first time a backend is looked up. ``register`` takes an
    :class:`autorl.Backend` subclass with a unique ``name`` (``hf``, ``vllm``, ``openai`` are built in).

    Example::

        @autorl.hookimpl
        def register_backends(register):
            register(MyBackend)
    """


@hookspec
def register_commands(cli: Any) -> None:
    """Add commands to the ``autorl`` command line.

    Called when the CLI starts, before arguments are parsed. ``cli`` is the root ``typer.Typer``; keep
    heavy imports inside the command functions so ``autorl --help`` stays fast.

    Example::

        @autorl.hookimpl
        def register_commands(cli):
            @cli.command()
            def hello(name: str) -> None:
                print(f"hello {name}")
    """
