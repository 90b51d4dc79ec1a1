"""A study's disk: every run's share of it checked before the study starts, and again before each run starts.

A run takes at most its agent's quota (the workspace and /tmp, refused past it: :mod:`autorl.grader.quota`) and
the grader's copies (the kept checkpoints and the one being taken in: three times the base model's weights) with
a margin for records and logs. Before the study starts, the quota of each run is sized so that the runs that go
at once fit the free space (never above the quota a run would have alone); a disk too small for even one
checkpoint's worth per run is refused with the arithmetic. Before each run starts, its worker checks that its
share is free now: a disk that filled meanwhile is the machine's failure, said in words (the study retries the
run later), never ``OSError: [Errno 28]`` in the middle of a run.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from autorl.errors import UsageError

__all__ = ["MARGIN", "free_bytes", "grader_share", "plan_quota", "room_for_run"]

GIB = 2**30
#: records, logs, the grader's store and the tokens of a run besides its checkpoints
MARGIN = 256 * 2**20
#: the share of the free space the planned runs may take: what a run checks is free when it starts must still
#: be, after the records and logs of the runs before it
PLANNED_SHARE = 0.9


def grader_share(weights: int) -> int:
    """What the grader's copies of one run take at most: the dev-best, the test-best and the one being taken in."""
    return 3 * weights + MARGIN


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def free_bytes(paths: Iterable[Path]) -> tuple[int, Path]:
    """The least free space among the disks of ``paths`` (each, or its nearest existing parent), and where."""
    least: tuple[int, Path] | None = None
    for path in paths:
        probe = path
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        free = shutil.disk_usage(probe).free
        if least is None or free < least[0]:
            least = (free, path)
    if least is None:
        raise ValueError("no path to measure")
    return least


def plan_quota(
    free: int, where: Path, runs_at_once: int, weights: int, default_quota: int, asked: int | None = None
) -> int:
    """The agent's quota for each of ``runs_at_once`` runs sharing ``free`` bytes: ``asked`` when given (and it
    fits), else the run's own default lowered to its share. Refused, with the arithmetic, when a share cannot
    hold the grader's copies and two checkpoints of the agent's."""
    share = int(free * PLANNED_SHARE) // max(1, runs_at_once)
    room = share - grader_share(weights)
    least = 2 * weights + 64 * 2**20
    quota = asked if asked is not None else min(default_quota, room)
    if quota < least or quota > room:
        raise UsageError(
            f"the study does not fit its disk: {where} has {_gib(free)} free, {_gib(share)} for each of "
            f"{runs_at_once} runs at once; each needs {_gib(grader_share(weights))} for the grader's copies of its "
            f"checkpoints and {_gib(least if asked is None else quota)} for its agent's files: free space, run "
            "fewer at once (--max-parallel), put the study on a larger disk (--dir, AUTORL_SWEEP_SCRATCH)"
            + (", or lower output_quota_gb" if asked is not None else "")
        )
    return quota


def room_for_run(paths: Iterable[Path], need: int) -> str | None:
    """Why a run cannot start now for want of disk (``need`` bytes free on each of ``paths``), or ``None``."""
    free, where = free_bytes(paths)
    if free >= need:
        return None
    return (
        f"not enough disk to start the run: {where} has {_gib(free)} free and a run needs up to {_gib(need)} "
        "(its agent's quota and the grader's copies); the study tries it again when runs before it are done"
    )
