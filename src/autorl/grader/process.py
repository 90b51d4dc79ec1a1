"""The orchestrator's handle on a grader subprocess: start it (``python -m autorl.grader.server``), wait until it
answers, keep it up (a grader that dies is started again on the same store and port, so the agent's URL stays
valid), stop or kill it; plus where that process logs.

A :class:`autorl.procs.service.ServiceProcess` (the grader holds a lease: it ends when this process does), with the
run's heartbeat (:class:`autorl.procs.lease.Heartbeat`, in the store: readers tell a live run from a lost one).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict, TypeVar

from autorl.errors import GraderError
from autorl.grader.client import GraderClient
from autorl.grader.config import GraderConfig
from autorl.procs.group import kill_group
from autorl.procs.lease import Heartbeat
from autorl.procs.service import ServiceProcess

T = TypeVar("T")
#: how many times a run's grader is started again after dying before the run gives up on it
MAX_RESTARTS = 3


class Restart(TypedDict):
    """One restart of the grader during a run, as the run's record keeps it (``meta.grader.restarts``)."""

    #: when it was found dead (Unix time)
    at: float
    exit_code: int


def grader_log_path(store_dir: Path) -> Path:
    """Where a run's grader process logs: in grader storage, out of the agent's reach (the dashboard reads it)."""
    return Path(store_dir) / "grader.log"


class GraderProcess(ServiceProcess):
    """A grader in its own process (and session) on 127.0.0.1, with an admin client.

    Once it has answered (:meth:`wait_ready`), a watcher thread starts it again, on the same store and port,
    whenever it dies while the run needs it (up to :data:`MAX_RESTARTS` times); ``restarts`` lists when and why,
    and ``error`` says why the grader is gone for good.
    """

    def __init__(self, config: GraderConfig, config_path: Path, port: int, log_path: Path) -> None:
        config.save(config_path)
        self.heartbeat = Heartbeat(Path(config.store_dir))
        self._lock = threading.Lock()
        self._stopping = False
        self._watcher: threading.Thread | None = None
        self.restarts: list[Restart] = []
        self.error: str | None = None
        super().__init__("autorl.grader.server", config_path, port, log_path, what="the grader")
        self.admin = GraderClient(self.url, config.admin_token, timeout=None)

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Wait until the grader answers; from then on it is kept up."""
        self.wait_answer(self._answers, timeout, error=GraderError)
        with self._lock:
            if self._watcher is None and not self._stopping:
                self._watcher = threading.Thread(target=self._keep_up, name="autorl-grader-watch", daemon=True)
                self._watcher.start()

    def _answers(self) -> bool:
        try:
            self.admin.health()
        except GraderError:
            return False
        return True

    def _keep_up(self) -> None:
        while True:
            code = self.proc.wait()
            with self._lock:
                if self._stopping:
                    return
                if len(self.restarts) >= MAX_RESTARTS:
                    self.error = f"the grader died {len(self.restarts) + 1} times (last exit code {code})"
                    return
                self.restarts.append(Restart(at=time.time(), exit_code=code))
                kill_group(self.proc.pid)  # what the dead grader left in its group (its evaluation worker) goes too
                proc = self.respawn()
            try:
                self.wait_answer(self._answers, 90.0, proc, error=GraderError)
            except GraderError as exc:
                with self._lock:
                    if not self._stopping:
                        self.error = f"the grader could not be started again: {exc}"
                kill_group(proc.pid)
                return

    def answering_again(self, timeout: float = 120.0) -> bool:
        """After a request that could not reach the grader: True once it answers again (it was started again),
        False when it is gone for good or does not answer within ``timeout`` s."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.alive:
            if self._answers():
                return True
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
        super().kill()
        self.heartbeat.stop()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
        self.admin.close()
        self.end(grace=20)
        self.heartbeat.stop()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
