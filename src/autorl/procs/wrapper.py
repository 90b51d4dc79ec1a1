"""A process that wraps a command and ends as the command ended: the lease's guard (``python -m autorl.procs.lease``),
the sandbox's grader relay (``python -m autorl.sandbox.relay``) and its network helper
(``python -m autorl.sandbox.netns``) each run one command and report its end as their own, so that the run
records how the agent ended (its exit code, or the signal that killed it) whatever wraps it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

__all__ = ["command_after", "end_as", "start"]


def command_after(parser: argparse.ArgumentParser, rest: list[str], what: str = "a command to run") -> list[str]:
    """The command given after ``--`` (``rest``: an ``argparse.REMAINDER`` argument); a usage error when none."""
    command = rest[1:] if rest[:1] == ["--"] else rest
    if not command:
        parser.error(f"{what} is required after --")
    return command


def start(command: list[str]) -> subprocess.Popen[bytes] | None:
    """``command`` started as a child; None, with the reason on stderr, when it cannot start (then exit 127, as
    a shell does for a command it cannot run)."""
    try:
        return subprocess.Popen(command)
    except OSError as exc:
        print(f"autorl: cannot start {command[0]}: {exc}", file=sys.stderr)
        return None


def end_as(code: int) -> int:
    """The exit status to return for a command that ended with ``code`` (a ``Popen.returncode``); a command
    killed by a signal is ended again here, by the same signal, so that this process dies the way it died
    (one whose default is not to end a process gives the shell's ``128 + N``)."""
    if code >= 0:
        return code
    sig = -code
    if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught: their action is the default
        signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    return 128 + sig
