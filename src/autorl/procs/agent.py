"""Running an agent: own session and process group, a fixed deadline, SIGTERM then SIGKILL to the group."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autorl.procs.group import kill_group

__all__ = ["AgentOutcome", "run_agent"]


@dataclass(frozen=True)
class AgentOutcome:
    """How the agent's process ended: its exit code (None if it never started), whether the deadline stopped
    it, how long it ran, and the reason in words."""

    exit_code: int | None
    timed_out: bool
    duration_s: float
    reason: str


def run_agent(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log_path: Path,
    deadline: float,
    grace_s: float = 10.0,
) -> AgentOutcome:
    """Run until the process exits or the deadline passes; leave no process of its group behind."""
    started = time.time()
    with log_path.open("ab") as log:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=dict(env),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            return AgentOutcome(None, False, 0.0, f"agent could not start: {exc}")
        pgid = proc.pid
        timed_out = False
        try:
            proc.wait(timeout=max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # whether it exited or not, nothing it started may outlive the run
            kill_group(pgid, grace_s, reap=proc.poll)
            proc.wait()
    code = proc.returncode
    if timed_out:
        reason = "timeout"
    elif code == 0:
        reason = "exited"
    elif code < 0:
        reason = f"killed by {signal.Signals(-code).name}"
    else:
        reason = f"exited with code {code}"
    return AgentOutcome(code, timed_out, time.time() - started, reason)
