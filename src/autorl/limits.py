"""A run's limits, in one place: its time (the agent's timeout), its submissions (the grader's quota) and its LLM
budget in tokens and in US dollars (the gateway's). Each is checked when it is given (a one-line
:class:`~autorl.errors.UsageError`) and, once reached, raised as one family: :class:`~autorl.errors.LimitReached`
with the limit's kind as data (:class:`~autorl.errors.BudgetSpent` for the LLM budget)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from autorl.errors import UsageError

__all__ = ["KINDS", "OUTPUT_BYTES", "SUBMISSIONS", "TIME", "TOKENS", "USD", "Limits", "budget_kind"]

#: the kinds of limit a :class:`~autorl.errors.LimitReached` names
TIME, SUBMISSIONS, TOKENS, USD, OUTPUT_BYTES = "time", "submissions", "tokens", "usd", "output_bytes"
KINDS = (TIME, SUBMISSIONS, TOKENS, USD, OUTPUT_BYTES)


@dataclass(frozen=True)
class Limits:
    """A run's budgets; None: no limit of that kind (for ``submissions``: the grader's own default).

    Attributes:
        time_s: the agent's time budget in seconds (``--timeout``), fixed when the agent starts.
        submissions: the most submissions the grader takes from the agent.
        tokens: the agent's model calls stop (the gateway refuses them) past this many prompt + completion tokens.
        usd: the same, past this cost in US dollars.
    """

    time_s: float | None = None
    submissions: int | None = None
    tokens: int | None = None
    usd: float | None = None

    def __post_init__(self) -> None:
        if self.time_s is not None and self.time_s <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        if self.submissions is not None and self.submissions < 1:
            raise UsageError(f"the submission limit must be at least 1, not {self.submissions}")
        if self.usd is not None and not 0 < self.usd < math.inf:
            raise UsageError("--llm-budget-usd must be a positive number of US dollars")
        if self.tokens is not None and self.tokens <= 0:
            raise UsageError("--llm-budget-tokens must be a positive number of tokens")

    @property
    def llm_limited(self) -> bool:
        """Whether the agent's model calls have a budget."""
        return self.tokens is not None or self.usd is not None

    def deadline(self, start: float) -> float:
        """The agent's deadline (epoch seconds) when its clock starts at ``start``."""
        if self.time_s is None:
            raise ValueError("a run without a time limit has no deadline")
        return start + self.time_s


def budget_kind(message: str) -> str:
    """Which LLM budget a gateway's refusal names (:data:`TOKENS` or :data:`USD`), from its message."""
    return TOKENS if "token budget" in message else USD
