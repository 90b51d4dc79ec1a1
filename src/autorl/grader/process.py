"""The orchestrator's handle on a grader subprocess: start it (``python -m autorl.grader.server``), wait until it
answers, keep it up (a grader that dies is started again on the same store and port, so the agent's URL stays
valid), stop or kill it; plus where that process logs.

The handle holds the grader's lease (:class:`autorl.lease.Lease`: the grader ends when this process does) and the
run's heartbeat (:class:`autorl.lease.Heartbeat`, in the store: readers tell a live run from a lost one).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from autorl.errors import GraderError
from autorl.grader.client import GraderClient
from autorl.grader.config import GraderConfig
from autorl.lease import Heartbeat, Lease

T = TypeVar("T")
#: how many times a run's grader is started again after dying before the run gives up on it
MAX_RESTARTS = 3


def grader_log_path(store_dir: Path) -> Path:
    """Where a run's grader process logs: in grader storage, out of the agent's reach (the dashboard reads it)."""
    return Path(store_dir) / "grader.log"


class GraderProcess:
    """A grader in its own process (and session) on 127.0.0.1, with an admin client.

    Once it has answered (:meth:`wait_ready`), a watcher thread starts it again, on the same store and port,
    whenever it dies while the run needs it (up to :data:`MAX_RESTARTS` times); ``restarts`` lists when and why,
    and ``error`` says why the grader is gone for good.
    """

    def __init__(self, config: GraderConfig, config_path: Path, port: int, log_path: Path) -> None:
        config.save(config_path)
        self.url = f"http://127.0.0.1:{port}"
        self._argv = [sys.executable, "-m", "autorl.grader.server", str(config_path), "--port", str(port)]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self._log = os.fdopen(fd, "ab")
        self.heartbeat = Heartbeat(Path(config.store_dir))
        self._lock = threading.Lock()
        self._stopping = False
        self._watcher: threading.Thread | None = None
        self.restarts: list[dict[str, object]] = []
        self.error: str | None = None
        self._lease = Lease()
        self.proc = self._spawn()
        self.admin = GraderClient(self.url, config.admin_token, timeout=None)

    def _spawn(self) -> subprocess.Popen[bytes]:
        lease = self._lease
        try:
            proc = subprocess.Popen(
                [*self._argv, "--lease-fd", str(lease.child_fd)], stdout=self._log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, pass_fds=(lease.child_fd,),
            )
        finally:
            lease.handed_over()
        return proc

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Wait until the grader answers; from then on it is kept up."""
        self._wait_answer(self.proc, timeout)
        with self._lock:
            if self._watcher is None and not self._stopping:
                self._watcher = threading.Thread(target=self._keep_up, name="autorl-grader-watch", daemon=True)
                self._watcher.start()

    def _wait_answer(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if proc.poll() is not None:
                raise GraderError(f"the grader exited with code {proc.returncode}; see {self._log.name}")
            try:
                self.admin.health()
                return
            except GraderError:
                time.sleep(0.2)
        raise GraderError(f"the grader did not answer within {timeout:.0f} s; see {self._log.name}")

    def _keep_up(self) -> None:
        while True:
            code = self.proc.wait()
            with self._lock:
                if self._stopping:
                    return
                if len(self.restarts) >= MAX_RESTARTS:
                    self.error = f"the grader died {len(self.restarts) + 1} times (last exit code {code})"
                    return
                self.restarts.append({"at": time.time(), "exit_code": code})
                self._reap_group(self.proc.pid)
                self._lease.release()
                self._lease = Lease()
                self.proc = self._spawn()
                proc = self.proc
            try:
                self._wait_answer(proc, 90.0)
            except GraderError as exc:
                with self._lock:
                    if not self._stopping:
                        self.error = f"the grader could not be started again: {exc}"
                self._reap_group(proc.pid)
                return

    @staticmethod
    def _reap_group(pgid: int) -> None:
        """Whatever the dead grader left in its process group (its evaluation worker) goes with it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)

    def answering_again(self, timeout: float = 120.0) -> bool:
        """After a request that could not reach the grader: True once it answers again (it was started again),
        False when it is gone for good or does not answer within ``timeout`` s."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.alive:
            try:
                self.admin.health()
                return True
            except GraderError:
                time.sleep(0.2)
        return False

    def surviving(self, call: Callable[[], T]) -> T:
        """``call`` (a request through :attr:`admin`), made again when the grader died under it and was started
        again; a refusal (an HTTP status) or a grader gone for good raises as it came."""
        for _ in range(MAX_RESTARTS):
            try:
                return call()
            except GraderError as exc:
                if exc.status is not None or not self.answering_again():
                    raise
        return call()

    @property
    def alive(self) -> bool:
        """Whether the grader is up or being started again (False once it is gone for good)."""
        return self.error is None and not self._stopping

    def kill(self) -> None:
        """SIGKILL to the grader, as a crash would (it is not started again; its worker follows it)."""
        with self._lock:
            self._stopping = True
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._lease.release()
        self.heartbeat.stop()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
        self.admin.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._lease.release()
        self.heartbeat.stop()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        self._log.close()
