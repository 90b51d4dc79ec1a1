"""A run's process metrics: how the agent got to its result, with the reference harness's names (its
``reports/metrics.json``), as pure functions of the grader's submission records.

Nothing here reads a file the agent wrote: the inputs are the grader's own records of each submission (when
it came, whether it was scored, its dev score, its content digest) and the run's clock (when the agent started,
its deadline, how long its process ran), which the orchestrator measured. Times are seconds from the agent's
start. Each metric's meaning is documented in ``docs/metrics.md``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict, cast

__all__ = [
    "CONFIG_MODEL_VARIABLES",
    "EFFICIENCY_COLUMNS",
    "METRIC_NAMES",
    "SCALAR_METRICS",
    "BestOfK",
    "MetricsRecord",
    "ProcessMetrics",
    "configured_model",
    "driver_model",
    "efficiency",
    "metric_means",
    "process_metrics",
    "test_best_of_k",
]

#: the variables of an agent's environment (its configuration's and the operator's) that name its model
CONFIG_MODEL_VARIABLES = ("CHAT_MODEL", "OPENAI_MODEL", "LLM_MODEL", "MODEL_NAME")


@dataclass(frozen=True)
class ProcessMetrics:
    """The ten process metrics of one run (None where the run gives no value: no submission, no clock)."""

    #: scored submissions / all submission attempts (the grader's accepted and refused ones)
    valid_submission_rate: float | None = None
    #: the 0-based position, among all attempts in the order they came, of the first scored submission
    first_valid_idx: int | None = None
    #: seconds from the agent's start to the first scored submission
    first_valid_delay: float | None = None
    #: ``[seconds from the agent's start, dev score]`` of each scored submission, in submission order
    score_trajectory: list[list[float]] = field(default_factory=list)
    #: seconds from the agent's start to the first submission whose dev score beat the dev baseline
    time_to_first_improvement: float | None = None
    #: seconds from the agent's start to the submission the grader selected (the best on dev)
    time_to_best: float | None = None
    #: the share of steps between consecutive scored submissions where the dev score did not fall
    monotonic_ratio: float | None = None
    #: submissions whose content is byte for byte the base model's
    copy_model_count: int = 0
    #: the agent's running time / its time budget (at most 1)
    time_used_ratio: float | None = None
    #: seconds left before the deadline when the last submission came
    last_submit_gap: float | None = None

    def to_dict(self) -> MetricsRecord:
        # MetricsRecord names these fields with these types (tests/test_record_types.py holds them equal)
        return cast(MetricsRecord, asdict(self))


class MetricsRecord(TypedDict):
    """:class:`ProcessMetrics` as a dict: the row's metric columns."""

    valid_submission_rate: float | None
    first_valid_idx: int | None
    first_valid_delay: float | None
    score_trajectory: list[list[float]]
    time_to_first_improvement: float | None
    time_to_best: float | None
    monotonic_ratio: float | None
    copy_model_count: int
    time_used_ratio: float | None
    last_submit_gap: float | None


class BestOfK(TypedDict):
    """The peers' figure (:func:`test_best_of_k`): the row's ``test_best_of_k*`` and ``test_selection_gap``."""

    test_best_of_k: float | None
    test_best_of_k_k: int | None
    test_best_of_k_submission: int | None
    test_selection_gap: float | None


#: the metrics' names, in the order of :class:`ProcessMetrics` (and of the results' columns)
METRIC_NAMES: tuple[str, ...] = tuple(ProcessMetrics.__dataclass_fields__)
#: the metrics that are one number (all but the trajectory)
SCALAR_METRICS: tuple[str, ...] = tuple(n for n in METRIC_NAMES if n != "score_trajectory")


#: the efficiency figures of a row (:func:`efficiency`)
EFFICIENCY_COLUMNS = ("agent_gpu_seconds", "grader_gpu_seconds", "improvement_per_gpu_hour", "improvement_per_usd")


def metric_means(rows: Iterable[Mapping[str, Any]], names: Sequence[str] = SCALAR_METRICS) -> dict[str, float | None]:
    """Each of ``names``' mean over the rows that have it (runs of one study cell: seeds); None where none has."""
    rows = list(rows)
    out: dict[str, float | None] = {}
    for name in names:
        values = [v for r in rows if (v := _number(r.get(name))) is not None]
        out[name] = round(sum(values) / len(values), 4) if values else None
    return out


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _since(t: Any, start: float | None) -> float | None:
    at = _number(t)
    return round(at - start, 3) if at is not None and start is not None else None


def process_metrics(
    submissions: Sequence[Mapping[str, Any]],
    *,
    best: Mapping[str, Any] | None,
    baseline_score: float | None,
    agent_started: float | None,
    deadline: float | None,
    agent_duration_s: float | None,
    base_hash: str | None = None,
    refusals: Sequence[Mapping[str, Any]] = (),
) -> ProcessMetrics:
    """The process metrics from the grader's public submission records.

    Args:
        submissions: the grader's records (``submission_id``, ``status``, ``score``, ``created_at``,
            ``content_hash``), in any order; they are taken in submission order.
        best: the grader's selected submission (``{submission_id, score}``) or None.
        baseline_score: the dev baseline's score.
        agent_started: when the agent started (epoch seconds); None leaves the times unknown.
        deadline: the agent's deadline (epoch seconds).
        agent_duration_s: how long the agent's process ran, as the orchestrator measured it.
        base_hash: the content digest of the base model's files (the grader's digest of a submission that is
            an unchanged copy of it is the same), or None when unknown.
        refusals: the grader's refused submissions (``created_at``): attempts, never valid.
    """
    subs = sorted(submissions, key=lambda s: int(s["submission_id"]))
    # every attempt in the order it came: accepted submissions and refused ones (a checkpoint the grader could
    # not take in); a time it cannot read puts a refusal last
    attempts = sorted(
        [(_number(s.get("created_at")) or 0.0, 0, i, s) for i, s in enumerate(subs)]
        + [(_number(r.get("created_at")) or float("inf"), 1, i, None) for i, r in enumerate(refusals)],
        key=lambda a: a[:3],
    )
    scored = [
        (i, s)
        for i, (*_, s) in enumerate(attempts)
        if s is not None and s.get("status") == "done" and _number(s.get("score")) is not None
    ]
    start = _number(agent_started)
    first = scored[0] if scored else None
    trajectory = [[t, float(s["score"])] for _, s in scored if (t := _since(s.get("created_at"), start)) is not None]
    steps = [float(b["score"]) >= float(a["score"]) for (_, a), (_, b) in itertools.pairwise(scored)]
    improved = next((s for _, s in scored if baseline_score is not None and float(s["score"]) > baseline_score), None)
    top = next((s for s in subs if best and s["submission_id"] == best.get("submission_id")), None)
    end = _number(deadline)
    budget = end - start if end is not None and start is not None and end > start else None
    used = _number(agent_duration_s)
    last = _number(subs[-1].get("created_at")) if subs else None
    return ProcessMetrics(
        valid_submission_rate=round(len(scored) / len(attempts), 4) if attempts else None,
        first_valid_idx=first[0] if first else None,
        first_valid_delay=_since(first[1].get("created_at"), start) if first else None,
        score_trajectory=trajectory,
        time_to_first_improvement=_since(improved.get("created_at"), start) if improved else None,
        time_to_best=_since(top.get("created_at"), start) if top else None,
        monotonic_ratio=round(sum(steps) / len(steps), 4) if steps else None,
        copy_model_count=sum(1 for s in subs if base_hash and s.get("content_hash") == base_hash),
        time_used_ratio=round(min(1.0, used / budget), 4) if used is not None and budget else None,
        last_submit_gap=round(end - last, 3) if end is not None and last is not None else None,
    )


def driver_model(gateway_summary: Mapping[str, Any] | None, configured: str | None = None) -> str | None:
    """The model(s) the agent called, most tokens first (``"a, b"``), from the gateway's own per-model counts
    (its ``summary.json``'s ``by_model``); ``configured`` (the model its configuration names) when it called
    none through the gateway; None when neither is known."""
    by_model = (gateway_summary or {}).get("by_model")
    used: list[tuple[float, float, str]] = []
    if isinstance(by_model, Mapping):
        for name, counts in by_model.items():
            if not isinstance(counts, Mapping) or not name:
                continue
            tokens = sum(_number(counts.get(k)) or 0.0 for k in ("prompt_tokens", "completion_tokens"))
            calls = _number(counts.get("calls")) or 0.0
            if tokens or calls:
                used.append((-tokens, -calls, str(name)))
    if used:
        return ", ".join(name for _, _, name in sorted(used))
    return configured or None


def configured_model(env: Mapping[str, str]) -> str | None:
    """The model an agent's environment names (:data:`CONFIG_MODEL_VARIABLES`, first set one), or None."""
    return next((env[k][:200] for k in CONFIG_MODEL_VARIABLES if env.get(k)), None)


def test_best_of_k(tests: Sequence[Mapping[str, Any]] | None, headline: Mapping[str, Any] | None) -> BestOfK:
    """The peers' figure: the best test score among the k distinct scored submissions each scored once on the
    test split (``tests``: the grader's test records), its submission, k, and the selection gap (that score
    minus the headline's test score). Optimistic: the choice among k is made on the test split itself; the
    headline (the dev-selected checkpoint) does not change. All None when the run has no such evaluations."""
    scored = [t for t in tests or () if t.get("status") == "done" and _number(t.get("score")) is not None]
    if not scored:
        return {
            "test_best_of_k": None,
            "test_best_of_k_k": None,
            "test_best_of_k_submission": None,
            "test_selection_gap": None,
        }
    top = max(scored, key=lambda t: (float(t["score"]), -int(t["submission_id"])))
    head = _number((headline or {}).get("score")) if (headline or {}).get("status") == "done" else None
    return {
        "test_best_of_k": float(top["score"]),
        "test_best_of_k_k": len(scored),
        "test_best_of_k_submission": int(top["submission_id"]),
        "test_selection_gap": round(float(top["score"]) - head, 4) if head is not None else None,
    }


def efficiency(
    *,
    gpu_counts: Mapping[str, Any] | None,
    agent_s: float | None,
    run_s: float | None,
    improvement: float | None,
    cost_usd: float | None,
) -> dict[str, float | None]:
    """What the gain cost: GPU-seconds of the agent (its GPUs x its running time) and of the grader (its GPUs x
    the run's whole time: it holds them from the baseline to the last test evaluation), the improvement per
    GPU-hour of both, and per US dollar of the driver model's calls (the gateway's count). None where a figure
    is unknown or its divisor is 0."""
    counts = gpu_counts or {}
    agent_gpus, grader_gpus = _number(counts.get("agent")), _number(counts.get("grader"))
    agent = round(agent_gpus * agent_s, 1) if agent_gpus is not None and agent_s is not None else None
    grader = round(grader_gpus * run_s, 1) if grader_gpus is not None and run_s is not None else None
    hours = ((agent or 0.0) + (grader or 0.0)) / 3600 if agent is not None or grader is not None else None
    gain, cost = _number(improvement), _number(cost_usd)
    return {
        "agent_gpu_seconds": agent,
        "grader_gpu_seconds": grader,
        "improvement_per_gpu_hour": round(gain / hours, 4) if gain is not None and hours else None,
        "improvement_per_usd": round(gain / cost, 4) if gain is not None and cost else None,
    }
