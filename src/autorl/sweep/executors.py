"""Executors: where a study's runs are placed. ``local``, ``slurm`` and ``ray`` are built in (registered by the
built-in plugin :mod:`autorl.default_plugins.executors`); plugins add more through the ``register_executors``
hook.

An executor places attempts and says when one is gone; it never decides what an attempt's outcome is (the
attempt's own ``outcome.json`` does, or the coordinator when a job vanished without one) and never retries.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from autorl.errors import UnknownNameError


@dataclass(frozen=True)
class Launch:
    """One attempt to place: its folder (holding ``payload.json``) and what it needs."""

    attempt_dir: Path
    gpus: int
    timeout_s: float
    label: str


class Executor(ABC):
    """Base class of every executor.

    Args:
        options: the executor's own settings (``--slots``/``--gpus`` for ``local``, partition/account/... for
            ``slurm``, ``address`` for ``ray``), from the command line or the spec's ``[local]``/``[slurm]``/
            ``[ray]`` table.
        max_parallel: the most attempts placed at once (None: as many as the executor holds).
        sweep_dir: the study's directory (an executor may keep its own files below it).
    """

    name: ClassVar[str]

    def __init__(
        self, options: Mapping[str, Any], *, max_parallel: int | None = None, sweep_dir: Path | None = None
    ) -> None:
        self.options = dict(options)
        self.max_parallel = max_parallel
        self.sweep_dir = sweep_dir

    def check(self, gpus_per_run: int, label: str) -> None:
        """Raise :class:`~autorl.errors.UsageError` when a run of ``gpus_per_run`` GPUs can never be placed, or
        when the engine cannot be reached (a one-line error naming the cell and what the executor has)."""

    def check_cells(self, cells: Sequence[Mapping[str, Any]]) -> None:
        """Raise :class:`~autorl.errors.UsageError` before the study starts when its cells cannot fit what the
        executor gives each run (the local executor: a GPU shared by ``runs_per_gpu`` runs too small for their
        graders' engines and agents, with the arithmetic). ``cells`` are the cells' options."""

    def capacity(self) -> int | None:
        """How many attempts may run at once (None: no limit of the executor's own)."""
        return None

    @abstractmethod
    def start(self, launches: list[Launch]) -> list[dict[str, Any] | None]:
        """Place ``launches``; for each, the job's record (kept in ``job.json``, JSON values, with what
        :meth:`poll` needs to find the job again), or None when it cannot be placed now (retried later)."""

    @abstractmethod
    def poll(self, job: dict[str, Any]) -> str | None:
        """None while the job may still write its outcome; else why it is gone (``"finished"`` when it ended
        normally). A job recorded by an earlier coordinator is reattached, or reported gone with the reason."""

    def cancel(self, job: dict[str, Any]) -> None:
        """Stop a job (the coordinator stopping early)."""

    def close(self) -> None:
        """Release what the executor holds (connections, local clusters)."""


def get_executors(pm: Any = None) -> dict[str, tuple[type[Executor], str]]:
    """Every executor: name -> (class, the distribution that registers it), collected as every plugin class is
    (:func:`autorl.plugins.registry.collect`)."""
    from autorl.plugins.loader import get_plugin_manager
    from autorl.plugins.registry import collect

    found = collect(pm or get_plugin_manager(), "executor", Executor, "autorl.sweep.Executor")
    return {name: (r.cls, r.distribution) for name, r in found.items()}


def get_executor(name: str, pm: Any = None) -> type[Executor]:
    """The executor class registered as ``name`` (did-you-mean on a typo)."""
    known = get_executors(pm)
    if name not in known:
        raise UnknownNameError("executor", name, known)
    return known[name][0]
