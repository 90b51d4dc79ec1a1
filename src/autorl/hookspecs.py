"""The hooks a plugin can implement. Hooks evolve by adding arguments only.

A plugin is a module (an entry point in the ``autorl`` group, or a built-in) whose functions carry
``@autorl.hookimpl``. Each ``register_*`` hook receives a ``register`` callable (typed below as a
:class:`typing.Protocol`); call it once per class. ``register`` takes classes only: keep a plugin's heavy
imports inside its classes' methods, or import the class inside the hook.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    import typer

    from autorl.agent import Agent
    from autorl.benchmark import Benchmark
    from autorl.inference.base import Backend

hookspec = pluggy.HookspecMarker("autorl")
hookimpl = pluggy.HookimplMarker("autorl")


class RegisterBenchmark(Protocol):
    """The ``register`` of :func:`register_benchmarks`: takes one :class:`autorl.Benchmark` subclass."""

    def __call__(self, cls: type[Benchmark], /) -> None: ...


class RegisterAgent(Protocol):
    """The ``register`` of :func:`register_agents`: takes one :class:`autorl.Agent` subclass."""

    def __call__(self, cls: type[Agent], /) -> None: ...


class RegisterBackend(Protocol):
    """The ``register`` of :func:`register_backends`: takes one :class:`autorl.Backend` subclass."""

    def __call__(self, cls: type[Backend], /) -> None: ...


@hookspec
def register_benchmarks(register: RegisterBenchmark) -> None:
    """Register benchmark classes.

    Called once per process, the first time any benchmark is looked up (``autorl list benchmarks``,
    ``autorl run``, the grader's worker). ``register`` (:class:`RegisterBenchmark`) takes a
    :class:`autorl.Benchmark` subclass whose ``name`` is unique across all installed plugins; a second
    registration of a name is an error naming both distributions, and anything that is not a
    ``Benchmark`` subclass is a ``TypeError`` (:class:`autorl.errors.PluginTypeError`) naming the plugin.

    Example::

        @autorl.hookimpl
        def register_benchmarks(register):
            register(MyBenchmark)
    """


@hookspec
def register_agents(register: RegisterAgent) -> None:
    """Register agent classes.

    Called once per process, the first time an agent is looked up. ``register`` (:class:`RegisterAgent`)
    takes an :class:`autorl.Agent` subclass with a unique ``name``; anything else is a ``TypeError``
    naming the plugin.

    Example::

        @autorl.hookimpl
        def register_agents(register):
            register(MyAgent)
    """


@hookspec
def register_backends(register: RegisterBackend) -> None:
    """Register inference backend classes.

    Called once per process, the first time a backend is looked up. ``register``
    (:class:`RegisterBackend`) takes an :class:`autorl.Backend` subclass with a unique ``name`` (``hf``,
    ``vllm``, ``openai`` are built in); anything else is a ``TypeError`` naming the plugin.

    Example::

        @autorl.hookimpl
        def register_backends(register):
            register(MyBackend)
    """


@hookspec
def register_commands(cli: typer.Typer) -> None:
    """Add commands to the ``autorl`` command line.

    Called when the CLI starts, before arguments are parsed. ``cli`` is the root ``typer.Typer`` (not a
    ``register`` callable: add commands or sub-apps to it); keep
    heavy imports inside the command functions so ``autorl --help`` stays fast.

    Example::

        @autorl.hookimpl
        def register_commands(cli):
            @cli.command()
            def hello(name: str) -> None:
                print(f"hello {name}")
    """


@hookspec
def register_executors(register: Callable[[type[Any]], None]) -> None:
    """Register sweep executors: where ``autorl sweep run --executor NAME`` places a study's runs.

    Called each time ``autorl sweep`` looks executors up. ``register`` takes an
    :class:`autorl.sweep.Executor` subclass with a unique ``name`` (``local``, ``slurm`` and ``ray`` are built
    in); its ``start`` places attempts, its ``poll`` says when one is gone. autorl keeps the retry and resume
    rules: an executor never retries.

    Example::

        @autorl.hookimpl
        def register_executors(register):
            register(MyClusterExecutor)
    """


@hookspec
def doctor_checks(report: Callable[..., None]) -> None:
    """Add a plugin's own lines to ``autorl doctor``.

    Called each time ``autorl doctor`` runs, after the core's checks. Call
    ``report(name, ok, detail, fix="")`` once per check: ``name`` a short label, ``ok`` whether it passed,
    ``detail`` what was found, ``fix`` what to do when it did not pass. An exception raised by the hook is
    reported as a failed check naming the plugin, never a crash.

    Example::

        @autorl.hookimpl
        def doctor_checks(report):
            report("my-bench data", DATA.is_file(), str(DATA), "run my-bench-download")
    """


@hookspec(firstresult=True)
def task_from_folder(path: Path) -> str | None:
    """Claim a local folder given as a task (``autorl run --task ./folder``): a folder this plugin turns into a
    benchmark, without installing anything.

    Called at the run's start (and ``autorl eval``'s) with the folder's absolute ``path``, for folders that are
    not a plugin's source folder (those the core loads itself). Return the name the folder's benchmark is
    registered as, after making it registered in this process and in every process the run starts (they
    inherit this process's environment: set a variable your ``register_benchmarks`` reads); return None when
    the folder is not one of yours. A folder that is yours but broken raises :class:`autorl.UsageError` with a
    one-line reason. The first plugin to return a name wins.

    Example::

        @autorl.hookimpl
        def task_from_folder(path):
            if not (path / "my-bench.yaml").is_file():
                return None
            os.environ["MY_BENCH_FOLDERS"] = str(path)  # read by register_benchmarks, here and in the grader
            return "my-bench-" + path.name
    """
