"""The agent's bound on what it writes (``--output-quota``): its workspace and ``/tmp`` measured at each submission,
and a submission made while they hold more refused (507) with the sizes, so that the agent learns it must delete
old checkpoints."""

from __future__ import annotations

import contextlib
import os
import stat
from typing import Any

from autorl.errors import OUTPUT_BYTES, LimitReached

__all__ = ["MAX_ENTRIES", "OPEN_DIR", "QuotaExceeded", "check_quota", "tree_bytes"]

#: how a folder the agent could have written is opened: never through a link
OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: entries a size walk reads at most (a tree of millions of tiny files counts as over any quota)
MAX_ENTRIES = 200_000


class QuotaExceeded(LimitReached):
    """The agent's files are over the run's quota (kind ``output_bytes``): submissions are refused (HTTP 507) until
    it deletes some."""

    http_status = 507

    def __init__(self, message: str) -> None:
        super().__init__(message, OUTPUT_BYTES)


def tree_bytes(root_fd: int) -> int:
    """The bytes on disk below the directory open at ``root_fd``, no link followed; past :data:`MAX_ENTRIES`
    entries or 64 levels the walk stops and the size is taken as unbounded. Depth first, one open directory per
    level: a folder of many sibling folders (an agent's hundred checkpoints) is measured, never taken as
    unbounded, and never needs more descriptors than levels."""
    total = seen = 0
    top = os.dup(root_fd)
    stack: list[tuple[int, Any]] = []
    try:
        stack.append((top, os.scandir(top)))
    except OSError:
        os.close(top)
        return 0
    try:
        while stack:
            fd, entries = stack[-1]
            try:
                entry = next(entries, None)
            except OSError:  # the folder went away while it was read: what was read of it counts
                entry = None
            if entry is None:
                stack.pop()
                entries.close()
                os.close(fd)
                continue
            seen += 1
            if seen > MAX_ENTRIES:
                return 2**62
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                total += st.st_blocks * 512
                continue
            if len(stack) >= 64:
                return 2**62
            try:
                child = os.open(entry.name, OPEN_DIR, dir_fd=fd)
            except OSError:
                continue
            try:
                stack.append((child, os.scandir(child)))
            except OSError:
                os.close(child)
    finally:
        for fd, entries in stack:
            entries.close()
            os.close(fd)
    return total


def check_quota(quota: int | None, workspace_fd: int, agent_tmp: str | None) -> None:
    """Refuse a submission while the agent's workspace (open at ``workspace_fd``) and its ``/tmp`` (the host
    folder ``agent_tmp``, opened without following a link) hold more than ``quota`` bytes."""
    if not quota:
        return
    places = [("the workspace", os.dup(workspace_fd))]
    if agent_tmp:
        with contextlib.suppress(OSError):
            places.append(("/tmp", os.open(agent_tmp, OPEN_DIR)))
    try:
        sizes = [(name, tree_bytes(fd)) for name, fd in places]
    finally:
        for _, fd in places:
            os.close(fd)
    used = sum(size for _, size in sizes)
    if used > quota:
        detail = ", ".join(f"{name} {size / 2**30:.1f} GiB" for name, size in sizes)
        raise QuotaExceeded(
            f"your files take {used / 2**30:.1f} GiB ({detail}), over this run's quota of "
            f"{quota / 2**30:.1f} GiB: delete checkpoints you no longer need, then submit again "
            "(the grader keeps its own copy of every checkpoint it took)"
        )
