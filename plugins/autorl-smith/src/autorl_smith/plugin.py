"""Hook implementations of autorl-smith (only hookimpls live here)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl import PluginWarning, hookimpl

if TYPE_CHECKING:
    import typer


@hookimpl
def register_benchmarks(register: Callable[[type[Any]], None]) -> None:
    from autorl_smith.benchmark import SmithBenchmark, version_of
    from autorl_smith.folder import discover
    from autorl_smith.validate import static_problems

    for folder in discover():
        for problem in static_problems(folder):
            warnings.warn(f"rl-smith folder {folder.path}: {problem}", PluginWarning, stacklevel=2)
        register(
            type(
                f"Smith_{folder.name}",
                (SmithBenchmark,),
                {
                    "name": folder.task,
                    "version": version_of(folder),
                    "folder": folder,
                    "source": folder.path,
                    "__doc__": f"rl-smith benchmark {folder.name} ({folder.eval_mode}) from {folder.path}",
                },
            )
        )


@hookimpl
def task_from_folder(path: Path) -> str | None:
    """An rl-smith folder given as ``--task ./folder``: discovered from then on as a folder under
    ``SMITH_BENCH_DIR`` is (the same benchmark class, the same masks for the agent), its task ``smith-<name>``."""
    from autorl import UsageError
    from autorl_smith.folder import FolderError, take_folder

    try:
        folder = take_folder(path)
    except (FolderError, OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"rl-smith folder {path}: {exc}") from None
    return folder.task if folder is not None else None


@hookimpl
def register_commands(cli: typer.Typer) -> None:
    from autorl_smith.cli import smith_app

    cli.add_typer(smith_app, name="smith")


@hookimpl
def doctor_checks(report: Callable[..., None]) -> None:
    from autorl_smith.folder import discover
    from autorl_smith.validate import validate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # discovery's warnings are reported as plugin warnings already
        folders = discover()
    for folder in folders:
        problems = validate(folder.path)
        report(
            f"rl-smith {folder.task}",
            not problems,
            "; ".join(problems) or f"{folder.path} is sound",
            f"autorl smith validate {folder.path}" if problems else "",
        )
