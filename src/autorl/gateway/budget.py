"""The run's model use and its budget, a ceiling: a call reserves its worst case before it is forwarded.

A call's worst case is its prompt (the counted estimate, scaled up by the largest ratio of billed to counted
prompt tokens this run has seen for the model) plus, for each candidate it asks for, its output limit. A
call that sets no limit gets one written into its request (``default_max_output`` or what remains); a call
whose limit does not fit has it lowered to what remains, or is refused when less than ``min_output`` tokens
would remain. The reservation is settled to the upstream's usage after the call, or released when nothing
was billed. Calls in flight together thus never take more than the budget, up to the prompt estimate's error.

A refusal because the budget cannot pay for a call closes the run for the upstreams: nothing more is
forwarded. A refusal only because calls in flight hold the remainder (``BudgetBusy``) does not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from autorl.errors import BudgetSpent, UsageError, budget_kind
from autorl.gateway.prices import DEFAULT_PRICES, price_of
from autorl.gateway.usage import COUNTED, RESERVED, UPSTREAM, Usage

#: the largest factor by which the counted prompt estimate is scaled up after an upstream billed more
MAX_PROMPT_RATIO = 8.0


class BudgetBusy(Exception):
    """What remains of the budget is reserved by calls in flight: the call may be retried when they end."""


def check_budget(usd: float | None, tokens: int | None) -> None:
    """A run's LLM budget as given (``--llm-budget-usd``, ``--llm-budget-tokens``): each positive, or a one-line
    :class:`~autorl.errors.UsageError`."""
    if usd is not None and not 0 < usd < math.inf:
        raise UsageError("--llm-budget-usd must be a positive number of US dollars")
    if tokens is not None and tokens <= 0:
        raise UsageError("--llm-budget-tokens must be a positive number of tokens")


@dataclass
class Reservation:
    """What one call holds of the budget until it is settled."""

    model: str
    #: the counted estimate, and the prompt tokens held (the estimate scaled up)
    prompt_estimate: int
    prompt: int
    #: the output tokens held: the limit per candidate times the candidates
    output: int
    usd: float
    #: the output limit per candidate to forward (None: the call's own; no budget to enforce)
    max_output: int | None
    settled: bool = False

    @property
    def tokens(self) -> int:
        return self.prompt + self.output

    def worst_case(self) -> Usage:
        """What the call is charged when its answer cannot be read."""
        return Usage(self.prompt, self.output, 0, RESERVED)

    def bounded(self, usage: Usage | None) -> Usage | None:
        """A counted figure never above what the call held: the upstream stops at the limit it was sent."""
        if usage is None or usage.source != COUNTED or self.max_output is None:
            return usage
        return replace(usage, completion_tokens=min(usage.completion_tokens, self.output))


@dataclass
class Meter:
    """The run's totals per model, its budget (tokens and/or USD) and the reservations of calls in flight."""

    prices: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: DEFAULT_PRICES)
    budget_tokens: int | None = None
    budget_usd: float | None = None
    default_max_output: int = 16384
    min_output: int = 64
    by_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: int = 0
    failed: int = 0
    refused: int = 0
    reserved_tokens: int = 0
    reserved_usd: float = 0.0
    in_flight: int = 0
    #: why the run was closed for the budget (None while it is open)
    exhausted: str | None = None
    prompt_ratio: dict[str, float] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return sum(m["prompt_tokens"] + m["completion_tokens"] for m in self.by_model.values())

    @property
    def cost_usd(self) -> float:
        return float(sum(m["cost_usd"] for m in self.by_model.values()))

    @property
    def limited(self) -> bool:
        return self.budget_tokens is not None or self.budget_usd is not None

    def prompt_tokens(self, model: str, estimate: int) -> int:
        """The counted prompt estimate scaled by what the upstream billed for this model before."""
        return math.ceil(estimate * self.prompt_ratio.get(model, 1.0))

    def _room(
        self, prompt: int, n: int, entry: Mapping[str, float] | None, reserved_tokens: int, reserved_usd: float
    ) -> float:
        """The most output tokens per candidate the budget leaves after the spent, the reserved and the prompt."""
        room = math.inf
        if self.budget_tokens is not None:
            room = (self.budget_tokens - self.tokens - reserved_tokens - prompt) // n
        if self.budget_usd is not None and entry is not None:
            left = self.budget_usd - self.cost_usd - reserved_usd - prompt * entry["input"] / 1e6
            per_token = n * entry["output"] / 1e6
            room = min(room, math.floor(left / per_token) if per_token > 0 else (math.inf if left >= 0 else -1))
        return room

    def reserve(self, model: str, prompt_estimate: int, asked: int | None, n: int = 1) -> Reservation:
        """Hold the worst case of a call asking for ``asked`` output tokens (None: it sets no limit) for each of
        ``n`` candidates. Raises :class:`~autorl.errors.BudgetSpent`, ``BudgetBusy``, or ``LookupError`` for a USD budget and a
        model without a price."""
        if self.exhausted:
            raise BudgetSpent(self.exhausted, budget_kind(self.exhausted))
        prompt = self.prompt_tokens(model, prompt_estimate)
        if not self.limited:
            res = Reservation(model, prompt_estimate, prompt, n * (asked or 0), 0.0, None)
            self.in_flight += 1
            return res
        entry = price_of(model, self.prices)
        if self.budget_usd is not None and entry is None:
            raise LookupError(
                f"no price for model {model!r}, and the run has a USD budget: the operator adds it "
                "to the price table (--llm-prices)"
            )
        want = asked if asked is not None else self.default_max_output
        floor = min(want, self.min_output)
        give = min(want, self._room(prompt, n, entry, self.reserved_tokens, self.reserved_usd))
        if give < max(floor, 1):
            if min(want, self._room(prompt, n, entry, 0, 0.0)) >= max(floor, 1):
                raise BudgetBusy(
                    f"what remains of the run's LLM budget is reserved by {self.in_flight} call(s) in "
                    "flight; retry when they end"
                )
            self.exhausted = self._spent_message(prompt + n * floor)
            raise BudgetSpent(self.exhausted, budget_kind(self.exhausted))
        out = int(give)
        usd = Usage(prompt, n * out).cost(model, self.prices) or 0.0
        res = Reservation(model, prompt_estimate, prompt, n * out, usd, out)
        self.reserved_tokens += res.tokens
        self.reserved_usd += res.usd
        self.in_flight += 1
        return res

    def _spent_message(self, need: int) -> str:
        if self.budget_tokens is not None and self.tokens + need > self.budget_tokens:
            return (
                f"the run's LLM token budget is spent ({self.tokens} of {self.budget_tokens} tokens used, a call "
                f"needs at least {need}): no further model calls are allowed in this run"
            )
        return (
            f"the run's LLM budget is spent (USD {self.cost_usd:.4f} of {self.budget_usd or 0:.4f} used): no "
            "further model calls are allowed in this run"
        )

    def settle(self, res: Reservation, usage: Usage | None, *, failed: bool = False) -> float | None:
        """End a call's reservation: charge ``usage`` (None: nothing was billed). Once per reservation; returns
        the call's cost (None when nothing was charged or the model has no price)."""
        if res.settled:
            return None
        res.settled = True
        self.in_flight -= 1
        if self.limited:
            self.reserved_tokens -= res.tokens
            self.reserved_usd = max(0.0, self.reserved_usd - res.usd)
        if usage is None:
            self.failed += failed
            return None
        if usage.source == UPSTREAM and res.prompt_estimate > 0:
            ratio = min(MAX_PROMPT_RATIO, usage.prompt_tokens / res.prompt_estimate)
            self.prompt_ratio[res.model] = max(self.prompt_ratio.get(res.model, 1.0), ratio)
        return self.add(res.model, usage, failed=failed)

    def add(self, model: str, usage: Usage, *, failed: bool = False) -> float | None:
        cost = usage.cost(model, self.prices)
        entry = self.by_model.setdefault(
            model,
            {
                "calls": 0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "cached_tokens": 0,
                "cost_usd": 0.0,
                "counted_calls": 0,
                "unpriced": False,
            },
        )
        entry["calls"] += 1
        entry["prompt_tokens"] += usage.prompt_tokens
        entry["completion_tokens"] += usage.completion_tokens
        entry["cached_tokens"] += usage.cached_tokens
        entry["cost_usd"] += cost or 0.0
        entry["counted_calls"] += usage.source != UPSTREAM
        entry["unpriced"] = entry["unpriced"] or cost is None
        self.calls += 1
        self.failed += failed
        return cost

    def summary(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "failed": self.failed,
            "refused": self.refused,
            "prompt_tokens": sum(m["prompt_tokens"] for m in self.by_model.values()),
            "completion_tokens": sum(m["completion_tokens"] for m in self.by_model.values()),
            "cached_tokens": sum(m["cached_tokens"] for m in self.by_model.values()),
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "budget_tokens": self.budget_tokens,
            "budget_usd": self.budget_usd,
            "reserved_tokens": self.reserved_tokens,
            "in_flight": self.in_flight,
            "budget_exhausted": self.exhausted is not None,
            "by_model": {k: dict(v) for k, v in self.by_model.items()},
        }


__all__ = ["MAX_PROMPT_RATIO", "BudgetBusy", "BudgetSpent", "Meter", "Reservation", "check_budget"]
