"""A service in its own process: the run's grader and its LLM gateway each serve an ASGI app on 127.0.0.1 in a
process (and session) of their own, started from a saved configuration, that ends with its orchestrator.

Both ends live here: :class:`ServiceProcess`, the orchestrator's handle (start with a lease, wait until the
service answers, stop with SIGTERM then SIGKILL to its process group; its log opened without following a
link), and :func:`service_args` + :func:`serve`, the service's own ``main`` (``python -m MODULE CONFIG.json
--port P [--lease-fd FD]``: uvicorn on loopback until interrupted or until the lease breaks).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from autorl.procs.group import kill_group
from autorl.procs.lease import Lease, watch_lease

__all__ = ["ServiceProcess", "exit_soon", "open_log", "serve", "service_args"]


def open_log(path: Path) -> BinaryIO:
    """``path`` opened to append, private to its owner, never through a link planted there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    return os.fdopen(fd, "ab")


class ServiceProcess:
    """The orchestrator's handle on one service process: ``python -m MODULE CONFIG --port P --lease-fd FD``.

    The service holds the read end of a fresh :class:`~autorl.procs.lease.Lease` each time it is started, so it ends
    when this process does, however that ends. ``what`` names it in errors ("the grader").
    """

    def __init__(self, module: str, config_path: Path, port: int, log_path: Path, *, what: str) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.what = what
        self._argv = [sys.executable, "-m", module, str(config_path), "--port", str(port)]
        self.log_path = log_path
        self._log = open_log(log_path)
        self._lease = Lease()
        self.proc = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        """Start the service (again) under the current lease; this process keeps only the lease's write end."""
        lease = self._lease
        try:
            return subprocess.Popen(
                [*self._argv, "--lease-fd", str(lease.child_fd)],
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=(lease.child_fd,),
            )
        finally:
            lease.handed_over()

    def respawn(self) -> subprocess.Popen[bytes]:
        """Start the service again under a new lease, after its process ended (the old lease is released)."""
        self._lease.release()
        self._lease = Lease()
        self.proc = self._spawn()
        return self.proc

    def wait_answer(
        self,
        answers: Callable[[], bool],
        timeout: float,
        proc: subprocess.Popen[bytes] | None = None,
        *,
        error: Callable[[str], Exception],
    ) -> None:
        """Wait until ``answers()`` is true, polling; ``error(message)`` is raised when the process exits first
        or ``timeout`` s pass."""
        proc = self.proc if proc is None else proc
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if proc.poll() is not None:
                raise error(f"{self.what} exited with code {proc.returncode}; see {self.log_path}")
            if answers():
                return
            time.sleep(0.1)
        raise error(f"{self.what} did not answer within {timeout:.0f} s; see {self.log_path}")

    def kill(self) -> None:
        """SIGKILL to the service's process group, as a crash would; the lease is released."""
        kill_group(self.proc.pid)
        self.proc.wait()
        self._lease.release()

    def end(self, grace: float) -> None:
        """SIGTERM to the service's process group, SIGKILL after ``grace`` s; then the lease and the log are
        closed."""
        if self.proc.poll() is None:
            kill_group(self.proc.pid, grace, reap=self.proc.poll)
            self.proc.wait()
        self._lease.release()
        self._log.close()


def service_args(prog: str, what: str, argv: list[str] | None) -> argparse.Namespace:
    """A service's command line: ``CONFIG --port P [--lease-fd FD]``."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("config", type=Path)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--lease-fd",
        type=int,
        default=None,
        help=f"the read end of the orchestrator's lease: {what} ends when it breaks",
    )
    return parser.parse_args(argv)


def exit_soon(after_s: float) -> None:
    """uvicorn's graceful shutdown now (a SIGTERM to this process), and an exit regardless ``after_s`` s later."""
    timer = threading.Timer(after_s, os._exit, (3,))
    timer.daemon = True
    timer.start()
    os.kill(os.getpid(), signal.SIGTERM)


def serve(
    app: Any,
    port: int,
    *,
    lease_fd: int | None,
    exit_after_s: float,
    on_lost: Callable[[], None] | None = None,
    **uvicorn_options: Any,
) -> None:
    """Serve ``app`` with uvicorn on 127.0.0.1 until interrupted or, given ``lease_fd``, until the lease breaks:
    then ``on_lost()`` and :func:`exit_soon` (``exit_after_s``)."""
    import uvicorn

    if lease_fd is not None:

        def lost() -> None:
            try:
                if on_lost is not None:
                    on_lost()
            finally:
                exit_soon(exit_after_s)

        watch_lease(lease_fd, lost)
    uvicorn.run(app, host="127.0.0.1", port=port, **uvicorn_options)
