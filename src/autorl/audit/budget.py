"""The audit's wall-clock budget, shared by every step that reads what the agent wrote."""

from __future__ import annotations

import time

#: default wall-clock budget of one audit
AUDIT_BUDGET_S = 900.0


class Budget:
    """The audit's wall-clock budget: checks stop taking new files once it is spent, and say so."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.seconds = seconds
        self.spent = False
        self.unscanned: list[str] = []  # files that could not be read or parsed

    def left(self) -> bool:
        """Whether time is left (once spent, it stays spent)."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.spent = True
        return not self.spent
