"""The process helpers every service and wrapper shares: a wrapper ends as its command ended (the lease's guard,
the sandbox's relay), and a service process says why it did not come up and never logs through a link."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autorl.errors import GraderError
from autorl.procs.group import free_port
from autorl.procs.service import ServiceProcess, open_log
from autorl.sandbox.relay import RELAY_MAIN


def _wrappers() -> list[list[str]]:
    return [
        [sys.executable, "-m", "autorl.procs.lease", "--parent", str(os.getpid())],
        [sys.executable, "-c", RELAY_MAIN, "--port", str(free_port()), "--socket", "/nonexistent"],
    ]


@pytest.mark.parametrize("wrapper", _wrappers(), ids=["guard", "relay"])
def test_a_wrapper_ends_as_its_command_ended(wrapper: list[str]) -> None:
    def run(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*wrapper, "--", *command], capture_output=True, text=True, timeout=120)

    assert run("sh", "-c", "exit 7").returncode == 7
    assert run("sh", "-c", "kill -KILL $$").returncode == -signal.SIGKILL
    # killed by the signal a run's stop sends, which the wrapper itself outlives: it dies of it all the same
    assert run("sh", "-c", "kill -TERM $$").returncode == -signal.SIGTERM
    missing = run("/nonexistent/agent")
    assert missing.returncode == 127 and "cannot start /nonexistent/agent" in missing.stderr
    # what the wrapped command prints is all there is on stderr: no runpy warning opens every agent's log
    assert run("sh", "-c", "echo only-this >&2").stderr == "only-this\n"
    nothing = subprocess.run([*wrapper, "--"], capture_output=True, text=True, timeout=120)
    assert nothing.returncode == 2 and "required after --" in nothing.stderr


def test_a_service_that_exits_at_once_says_so_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "svc.log"
    svc = ServiceProcess("autorl.no_such_service", tmp_path / "config.json", free_port(), log, what="the service")
    try:
        with pytest.raises(GraderError, match=r"the service exited with code 1; see .*svc\.log"):
            svc.wait_answer(lambda: False, 60, error=GraderError)
    finally:
        svc.end(grace=5)
    assert "No module named autorl.no_such_service" in log.read_text()
    assert (log.stat().st_mode & 0o777) == 0o600


def test_a_service_log_is_never_opened_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("untouched")
    (tmp_path / "svc.log").symlink_to(target)
    with pytest.raises(OSError):
        open_log(tmp_path / "svc.log")
    assert target.read_text() == "untouched"
