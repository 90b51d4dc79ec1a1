"""A process group ended, and a port to serve on: the one way each is done."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable

__all__ = ["free_port", "group_alive", "kill_group", "signal_group"]


def signal_group(pgid: int, sig: int) -> bool:
    """``sig`` to a process group; False when the group is gone (or not ours)."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def group_alive(pgid: int) -> bool:
    return signal_group(pgid, 0)


def kill_group(pgid: int, grace_s: float = 0.0, *, reap: Callable[[], object] | None = None) -> None:
    """End a process group that may be gone already: SIGTERM, then SIGKILL to whatever of it is left after
    ``grace_s`` s (SIGKILL at once without a grace). ``reap`` (the leader's ``Popen.poll``) collects the leader
    when it exits, so that its zombie does not count as left."""
    if grace_s <= 0:
        signal_group(pgid, signal.SIGKILL)
        return
    if not signal_group(pgid, signal.SIGTERM):
        return
    end = time.monotonic() + grace_s
    while time.monotonic() < end:
        if reap is not None:
            reap()
        if not group_alive(pgid):
            return
        time.sleep(0.05)
    signal_group(pgid, signal.SIGKILL)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
