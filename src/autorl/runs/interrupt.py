"""Interrupts of a run: SIGINT (Ctrl-C, to the process or its group), SIGTERM and SIGHUP become an orderly finish.

The first signal raises :class:`Interrupted` in the orchestrator's main thread; the run then stops its agent,
collects what the grader scored, scores the selected submission on the test split and records the run as
interrupted. A second signal during that finish ends the orchestrator at once: the run's live row stays, so
``autorl recover`` finds and records it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autorl.record.schema import OutcomeRecord

__all__ = ["SIGNALS", "Guard", "Interrupted", "exit_code", "interrupted_outcome", "interruptible"]

#: the signals a run finishes on
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """A run's orchestrator received one of :data:`SIGNALS`."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.name}")


def exit_code(signal_name: str) -> int:
    """The shell's exit status for a process ended by ``signal_name`` (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + int(signal.Signals[signal_name])


def interrupted_outcome(signal_name: str, agent_started: float | None) -> OutcomeRecord:
    """The agent's outcome (as :class:`~autorl.procs.agent.AgentOutcome`'s dict) when the run was interrupted."""
    duration = max(0.0, time.time() - agent_started) if agent_started else 0.0
    return {"exit_code": None, "timed_out": False, "duration_s": duration, "reason": f"interrupted by {signal_name}"}


class Guard:
    """The signal handler of :func:`interruptible`: raises once, until the run is finishing."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._finishing = False

    def finishing(self) -> None:
        """From now on a signal ends this process at once (the finish is not interrupted halfway by a raise)."""
        self._finishing = True

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.received or self._finishing:
            os._exit(128 + signum)  # the finish itself was interrupted: leave the run to `autorl recover`
        self.received.append(signum)
        raise Interrupted(signum)


@contextmanager
def interruptible() -> Iterator[Guard]:
    """While inside: the first of :data:`SIGNALS` raises :class:`Interrupted`; any later one, or any once
    :meth:`Guard.finishing` was called, ends this process at once with the signal's exit status (the run left
    in flight is for ``autorl recover``). Outside the main thread, where no handler can be installed, signals
    keep their handlers."""
    guard = Guard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return
    previous = {sig: signal.signal(sig, guard) for sig in SIGNALS}
    try:
        yield guard
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
