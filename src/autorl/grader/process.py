"""The orchestrator's handle on a grader subprocess: start it (``python -m autorl.grader.server``), wait until it
answers, stop or kill it; plus where that process logs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from autorl.errors import GraderError
from autorl.grader.client import GraderClient
from autorl.grader.config import GraderConfig


def grader_log_path(store_dir: Path) -> Path:
    """Where a run's grader process logs: in grader storage, out of the agent's reach (the dashboard reads it)."""
    return Path(store_dir) / "grader.log"


class GraderProcess:
    """A grader in its own process (and session) on 127.0.0.1, with an admin client."""

    def __init__(self, config: GraderConfig, config_path: Path, port: int, log_path: Path) -> None:
        config.save(config_path)
        self.url = f"http://127.0.0.1:{port}"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self._log = os.fdopen(fd, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autorl.grader.server", str(config_path), "--port", str(port)],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        self.admin = GraderClient(self.url, config.admin_token, timeout=None)

    def wait_ready(self, timeout: float = 90.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise GraderError(f"the grader exited with code {self.proc.returncode}; see {self._log.name}")
            try:
                self.admin.health()
                return
            except GraderError:
                time.sleep(0.2)
        raise GraderError(f"the grader did not answer within {timeout:.0f} s; see {self._log.name}")

    def kill(self) -> None:
        """SIGKILL to the grader and its workers, as a crash would."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        self.admin.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
