"""The process helpers shared by wrappers: a wrapper ends as its command ended (the lease's guard, the sandbox's
relay)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wrappers() -> list[list[str]]:
    return [[sys.executable, "-m", "autorl.lease", "--parent", str(os.getpid())],
            [sys.executable, "-m", "autorl.sandbox.relay", "--port", str(_free_port()), "--socket", "/nonexistent"]]


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
    nothing = subprocess.run([*wrapper, "--"], capture_output=True, text=True, timeout=120)
    assert nothing.returncode == 2 and "required after --" in nothing.stderr
