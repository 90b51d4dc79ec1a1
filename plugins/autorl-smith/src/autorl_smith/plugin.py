"""Hook implementations of autorl-smith (only hookimpls live here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autorl import hookimpl


@hookimpl
def register_benchmarks(register: Callable[[type[Any]], None]) -> None:
    from autorl_smith.benchmark import SmithBenchmark, version_of
    from autorl_smith.folder import discover

    for folder in discover():
        register(type(f"Smith_{folder.name}", (SmithBenchmark,), {
            "name": folder.task,
            "version": version_of(folder),
            "folder": folder,
            "source": folder.path,
            "__doc__": f"rl-smith benchmark {folder.name} ({folder.eval_mode}) from {folder.path}",
        }))
