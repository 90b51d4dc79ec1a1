"""A run's processes end with the process that started them (its orchestrator), and leave a sign of its life.

Three pieces, one per kind of child and one for the readers:

* the **lease pipe** (:class:`Lease`, :func:`watch_lease`): the orchestrator holds the write end of a pipe and
  hands the read end to a child (the grader server, the LLM gateway); when the orchestrator dies, however it
  dies, the kernel closes the write end and the child reads EOF at once. No clock, no polling.
* the **guard** (``python -m autorl.procs.lease --parent PID -- COMMAND...``): for a child that gets no pipe (an agent
  run without a sandbox), a session leader that runs the command and kills its whole process group when its
  parent goes (``PR_SET_PDEATHSIG``, with a check of ``getppid`` to close the race and a poll as a backstop).
* the **heartbeat** (:class:`Heartbeat`): a file in the grader's store naming the orchestrator (host, pid, the
  pid's start time) that it touches every few seconds; :mod:`autorl.runs.liveness` reads it, so that ``autorl
  results``, the dashboard, ``autorl doctor`` and a sweep see a run as live or lost.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autorl.jsonio import write_json_atomic
from autorl.procs import wrapper
from autorl.procs.group import kill_group

__all__ = [
    "HEARTBEAT_FILE",
    "LOST_AT_KEY",
    "PARENT_ENV",
    "Heartbeat",
    "Lease",
    "die_with_parent",
    "end_with_parent",
    "guarded",
    "process_start_time",
    "watch_lease",
]

#: the heartbeat's file, in the run's grader store (out of the agent's reach)
HEARTBEAT_FILE = "orchestrator.json"
#: the variable in which a parent names itself to a child that calls :func:`end_with_parent`
PARENT_ENV = "AUTORL_PARENT_PID"
#: the grader store's meta key where a grader that lost its orchestrator writes when (Unix seconds)
LOST_AT_KEY = "orchestrator_lost_at"
_PR_SET_PDEATHSIG = 1


# -- the lease pipe ---------------------------------------------------------------------------------------
class Lease:
    """The orchestrator's end of one child's lease: a pipe whose read end the child inherits."""

    def __init__(self) -> None:
        self.child_fd, self._write = os.pipe()  # both close on exec; the child gets its end through pass_fds
        self._open = {self.child_fd, self._write}

    def _close(self, fd: int) -> None:
        # each end closed once: a number closed twice may by then be another file's
        if fd in self._open:
            self._open.discard(fd)
            with contextlib.suppress(OSError):
                os.close(fd)

    def handed_over(self) -> None:
        """The child holds its end now: close ours (only the write end may keep the lease alive)."""
        self._close(self.child_fd)

    def release(self) -> None:
        """End the lease: the child reads EOF, as it would when the orchestrator dies."""
        self._close(self.child_fd)
        self._close(self._write)


def watch_lease(fd: int, on_lost: Callable[[], None]) -> threading.Thread:
    """In the child: call ``on_lost`` (in a daemon thread) once the lease's write end is closed everywhere."""

    def wait() -> None:
        while True:
            try:
                data = os.read(fd, 64)
            except InterruptedError:
                continue
            except OSError:
                break
            if not data:
                break
        on_lost()

    thread = threading.Thread(target=wait, name="autorl-lease", daemon=True)
    thread.start()
    return thread


# -- parent-death signal and the guard --------------------------------------------------------------------
def die_with_parent(sig: int = signal.SIGKILL, expected_parent: int | None = None) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent (thread) dies; then, when the parent is
    already not ``expected_parent`` (it died before this call), send it now. False where prctl is missing."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ok = bool(libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        ok = False
    if expected_parent is not None and os.getppid() != expected_parent:
        os.kill(os.getpid(), sig)
    return ok


def end_with_parent(poll_s: float = 1.0, *, parent: int | None = None, group: bool = True) -> threading.Thread:
    """In a child that may be busy when its parent dies (an evaluation worker mid-job): a daemon thread that,
    once the parent is gone (``getppid`` is no longer ``parent``), kills this process's group (``group``: the
    child leads its own session, its engine's processes with it) or this process. ``parent`` defaults to
    :data:`PARENT_ENV` when set (a parent that died while the child was still starting is caught too), else
    the parent now. Polling, not ``PR_SET_PDEATHSIG``, because that fires when the parent *thread* that started
    the child ends, which a pooled thread does any time."""
    if parent is None:
        named = os.environ.get(PARENT_ENV, "")
        parent = int(named) if named.isdigit() else os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        if group:
            kill_group(os.getpgrp())
        os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="autorl-parent-watch", daemon=True)
    thread.start()
    return thread


def guarded(argv: list[str]) -> list[str]:
    """``argv`` run under the guard: it and everything in its process group end when this process dies."""
    return [sys.executable, "-m", "autorl.procs.lease", "--parent", str(os.getpid()), "--", *argv]


def _guard(parent: int, command: list[str]) -> int:
    """Run ``command`` in this process group; kill the group when ``parent`` is gone; exit as it exited."""

    def end_group(*_: Any) -> None:
        kill_group(os.getpgrp())
        os._exit(137)

    signal.signal(signal.SIGUSR2, end_group)
    die_with_parent(signal.SIGUSR2, parent)
    proc = wrapper.start(command)
    if proc is None:
        return 127
    # a SIGTERM to the group is the run's stop: the command gets it and may take its grace period; the
    # guard stays to report how it ended
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        try:
            code = proc.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if os.getppid() != parent:  # the backstop, should the signal not come
                end_group()
    return wrapper.end_as(code)


# -- heartbeat --------------------------------------------------------------------------------------------
def process_start_time(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot, from ``/proc``): with the pid, it names one process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


class Heartbeat:
    """The orchestrator's sign of life for one run: ``HEARTBEAT_FILE`` in the store, touched every ``interval`` s."""

    def __init__(self, store_dir: Path, interval: float = 5.0) -> None:
        self.path = Path(store_dir) / HEARTBEAT_FILE
        self.interval = interval
        pid = os.getpid()
        write_json_atomic(
            self.path,
            {
                "host": socket.gethostname(),
                "pid": pid,
                "pid_start": process_start_time(pid),
                "started": time.time(),
                "interval_s": interval,
            },
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="autorl-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def stop(self) -> None:
        """Stop beating (the file stays: the run's record says how it ended)."""
        self._stop.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autorl.procs.lease",
        description="run a command that ends, with its process group, when PARENT dies",
    )
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    return _guard(args.parent, wrapper.command_after(parser, args.command))


if __name__ == "__main__":
    sys.exit(main())
