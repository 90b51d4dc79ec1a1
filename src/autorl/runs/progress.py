"""Progress people can watch during a run: its lines (:data:`Say`, to stderr by default), and in the agent's
phase each submission's dev score with its interval, as it lands, and the time left. Read from the grader's
admin state (never from files the agent writes).

The runner starts the printer beside the agent and stops it after::

    printer = SubmissionPrinter(grader.admin.state, deadline, say).start()
    try: outcome = run_agent(...)
    finally: printer.stop()
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from autorl.procs.ticker import Ticker

if TYPE_CHECKING:
    from autorl.grader.schema import GraderState, SubmissionRecord

#: where a run, a recovery or a study says what it is doing: one line at a time
Say = Callable[[str], None]
#: seconds between two reads of the grader's state
INTERVAL_S = 2.0


def to_stderr(message: str) -> None:
    """The default :data:`Say`: the line on stderr, at once."""
    print(message, file=sys.stderr, flush=True)


def _num(v: Any, fmt: str = "{:.2f}") -> str:
    return fmt.format(v) if isinstance(v, int | float) and not isinstance(v, bool) else "-"


def describe(sub: SubmissionRecord, deadline: float, now: float | None = None) -> str:
    """One line for a finished submission: its dev score, interval, improvement and the time left."""
    left = max(0.0, deadline - (time.time() if now is None else now))
    sid = sub.get("submission_id")
    if sub.get("status") != "done":
        why = str(sub.get("error") or sub.get("status"))[:200]
        return f"submission {sid}: {why}; {left:.0f} s left"
    ci = sub.get("ci95")
    ci_text = f" (95% CI {_num(ci[0])}-{_num(ci[1])})" if isinstance(ci, list | tuple) and len(ci) == 2 else ""
    imp = sub.get("improvement")
    imp_ci = sub.get("improvement_ci95")
    imp_text = f", improvement {_num(imp, '{:+.2f}')}" if imp is not None else ""
    if isinstance(imp_ci, list | tuple) and len(imp_ci) == 2:
        imp_text += f" [{_num(imp_ci[0])}, {_num(imp_ci[1])}]"
    return f"submission {sid}: dev {_num(sub.get('score'))}{ci_text}{imp_text}; {left:.0f} s left"


class SubmissionPrinter(Ticker):
    """Polls ``state()`` (the grader's admin state) and says one line per submission once it is scored or failed."""

    def __init__(
        self, state: Callable[[], GraderState], deadline: float, say: Say, interval: float = INTERVAL_S
    ) -> None:
        super().__init__("autorl-progress", interval)
        self.state, self.deadline, self.say = state, deadline, say
        self.reported: set[Any] = set()

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        with contextlib.suppress(Exception):  # a grader already gone leaves nothing to add
            self.poll_once()

    def tick(self) -> list[str]:
        return self.poll_once()

    def poll_once(self) -> list[str]:
        lines = []
        for sub in self.state().get("submissions", []):
            sid = sub.get("submission_id")
            if sid in self.reported or sub.get("status") in ("queued", "running", "pending"):
                continue
            self.reported.add(sid)
            line = describe(sub, self.deadline)
            self.say(line)
            lines.append(line)
        return lines
