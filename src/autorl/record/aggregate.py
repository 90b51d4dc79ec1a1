"""Pooling finished runs into one figure per agent: what the dashboard's compare page and a sweep report show.

One function, :func:`aggregate_runs`, so that the two never disagree about what a mean over runs is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

__all__ = [
    "FAILURE_RULE",
    "GROUP_KEYS",
    "NUMERIC_KEYS",
    "AgentComparison",
    "GroupRecord",
    "RunGroup",
    "aggregate_runs",
    "differences",
    "group_value",
]

#: the identity of a group: runs are pooled only when all of these agree (a study's cells differ in them too; the
#: driver model: the one(s) the agent called; the limit: how many items of each split were scored, also in the
#: config hash of runs recorded since); a row recorded before a setting was kept has none for it, a group of its own
GROUP_KEYS = ("task", "agent", "base_model", "config_hash", "driver_model", "timeout_s", "limit", "sandbox")
#: the keys whose values are numbers: compared as numbers (a budget of 60 is one of 60.0, and of "60" read back
#: from a CSV)
NUMERIC_KEYS = frozenset({"timeout_s", "limit"})

#: how runs without a test score enter the mean, in words (the compare page shows it)
FAILURE_RULE = (
    "a run without a held-out test score (it crashed, submitted nothing scorable, or never reached the "
    "test evaluation) counts as improvement 0, the base model kept; the failure rate is shown beside "
    "the mean"
)


@dataclass(frozen=True)
class RunGroup:
    """Finished runs that share task, agent, base model and config hash, and their test improvement.

    Attributes:
        values: the per-run test improvement in percentage points, in input order, 0.0 for a failed run.
        failures: how many of ``runs`` had no test score (counted as 0.0 in ``values``).
        mean: mean of ``values``.
        ci95: 95% t-interval of the mean over runs (n - 1 degrees of freedom); None for a single run.
    """

    task: str
    agent: str
    base_model: str
    config_hash: str
    runs: int
    failures: int
    mean: float
    ci95: tuple[float, float] | None
    values: list[float] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    driver_model: str = ""
    timeout_s: float | None = None
    sandbox: str | None = None
    limit: int | None = None

    @property
    def scored(self) -> int:
        return self.runs - self.failures

    @property
    def failure_rate(self) -> float:
        return self.failures / self.runs if self.runs else 0.0

    def as_dict(self) -> GroupRecord:
        return {
            "task": self.task,
            "agent": self.agent,
            "base_model": self.base_model,
            "config_hash": self.config_hash,
            "runs": self.runs,
            "failures": self.failures,
            "mean": self.mean,
            "ci95": list(self.ci95) if self.ci95 else None,
            "values": list(self.values),
            "run_ids": list(self.run_ids),
            "driver_model": self.driver_model,
            "timeout_s": self.timeout_s,
            "sandbox": self.sandbox,
            "limit": self.limit,
            "scored": self.scored,
            "failure_rate": self.failure_rate,
        }


class GroupRecord(TypedDict):
    """:class:`RunGroup` as the compare page's data holds it, with its scored count and failure rate."""

    task: str
    agent: str
    base_model: str
    config_hash: str
    runs: int
    failures: int
    mean: float
    ci95: list[float] | None
    values: list[float]
    run_ids: list[str]
    driver_model: str
    timeout_s: float | None
    sandbox: str | None
    limit: int | None
    scored: int
    failure_rate: float


class AgentComparison(TypedDict):
    """The agents on one task (the compare page's data): each group's mean held-out test improvement, how
    failed runs enter the mean, and per agent the settings in which its groups differ."""

    task: str
    metric: str
    failure_rule: str
    groups: list[GroupRecord]
    differs: dict[str, list[str]]


def _test_improvement(row: Mapping[str, Any]) -> float | None:
    value = row.get("improvement")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def group_value(row: Mapping[str, Any], key: str) -> str:
    """How ``row``'s ``key`` (one of :data:`GROUP_KEYS`) takes part in a group's identity: numbers (of
    :data:`NUMERIC_KEYS`) compared as numbers, whatever their type or spelling; anything else as its text;
    nothing as ``""``."""
    value = row.get(key)
    if value is None:
        return ""
    if key in NUMERIC_KEYS:
        number = _as_float(value)
        if number is not None:
            return repr(number)
    return str(value)


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def aggregate_runs(rows: Iterable[Mapping[str, Any]], *, task: str | None = None) -> list[RunGroup]:
    """Finished runs grouped by (task, agent, base model, config hash), each with its mean test improvement.

    The metric is always the held-out test improvement (the ledger's ``improvement``: the dev-selected
    checkpoint scored once on the test split minus the test baseline); a run's dev figures never enter.
    Runs with different base models or config hashes are never pooled: each combination is its own group.

    Failures count: a finished run without a test improvement is an improvement of 0.0 (the operator keeps
    the base model), so an agent that often fails is not flattered by averaging only its successes; the
    number of such runs is reported beside the mean as ``failures`` / ``failure_rate``.

    The interval is the 95% Student t-interval of the mean over runs, ``mean ± t(0.975, n-1) · sd / √n``
    (sd with n - 1); a single run has none; identical values give a zero-width one.

    Runs still in progress (``live``) are left out. Groups are sorted by task, agent, base model, config hash.

    Args:
        rows: ledger rows (``Ledger.rows()`` or the dashboard's rows).
        task: only this task's runs, when given.
    """
    from scipy import stats

    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("live") or (task is not None and r.get("task") != task):
            continue
        key = tuple(group_value(r, k) for k in GROUP_KEYS)
        groups.setdefault(key, []).append(r)
    out = []
    for (g_task, agent, model, cfg, driver, *_), runs in sorted(groups.items()):
        measured = [_test_improvement(r) for r in runs]
        values = [v if v is not None else 0.0 for v in measured]
        n = len(values)
        mean = sum(values) / n
        ci: tuple[float, float] | None = None
        if n >= 2:
            sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
            half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
            ci = (mean - half, mean + half)
        out.append(
            RunGroup(
                task=g_task,
                agent=agent,
                base_model=model,
                config_hash=cfg,
                runs=n,
                failures=sum(1 for v in measured if v is None),
                mean=mean,
                ci95=ci,
                values=values,
                run_ids=[str(r.get("run_id")) for r in runs],
                driver_model=driver,
                timeout_s=_as_float(runs[0].get("timeout_s")),
                limit=_limit(runs[0]),
                sandbox=None if runs[0].get("sandbox") is None else str(runs[0].get("sandbox")),
            )
        )
    return out


def _limit(row: Mapping[str, Any]) -> int | None:
    value = _as_float(row.get("limit"))
    return int(value) if value is not None and value.is_integer() else None


def differences(groups: Iterable[RunGroup]) -> dict[str, list[str]]:
    """For each agent with more than one group, the settings (of :data:`GROUP_KEYS`) in which its groups differ:
    why its runs were not pooled."""
    by_agent: dict[str, list[RunGroup]] = {}
    for g in groups:
        by_agent.setdefault(f"{g.task} · {g.agent}", []).append(g)
    return {
        agent: [k for k in GROUP_KEYS if len({group_value(asdict(g), k) for g in gs}) > 1]
        for agent, gs in by_agent.items()
        if len(gs) > 1
    }
