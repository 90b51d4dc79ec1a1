"""Built-in sweep executors: ``local`` (this machine's GPUs), ``slurm`` (one job per attempt) and ``ray``
(a task per attempt on a Ray cluster); each imports what it needs only when used."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autorl.hookspecs import hookimpl


@hookimpl
def register_executors(register: Callable[[type[Any]], None]) -> None:
    from autorl.sweep.local import LocalExecutor
    from autorl.sweep.ray_executor import RayExecutor
    from autorl.sweep.slurm import SlurmExecutor

    register(LocalExecutor)
    register(SlurmExecutor)
    register(RayExecutor)
