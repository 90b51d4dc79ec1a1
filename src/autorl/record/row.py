"""A run's row, defined once: every ledger / ``results.csv`` column (:class:`RunRow`), how the row is made from
the grader's state (:func:`run_row`), and the rule that replaces the headline under a judge's critical flag.
Pure data and its derivations: writing a row is the ledger's (:func:`autorl.record.ledger.record_run`).

The row's figures come from the grader's own records (its ``best``, each submission's ``improvement`` and
interval, the test evaluation's comparison); nothing here recomputes a score.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, TypedDict, TypeVar, cast

from autorl.record.display import beat_baseline
from autorl.record.metrics import BestOfK, MetricsRecord
from autorl.record.schema import LedgerRow, OffTargetRecord, OutcomeRecord, RowRecord

__all__ = [
    "CSV_COLUMNS",
    "DEV_COLUMNS",
    "RECORDED_COLUMNS",
    "DevFigures",
    "RunRow",
    "dev_figures",
    "end_reason",
    "infra_failure",
    "judged_headline",
    "run_row",
    "scored_submissions",
]


@dataclass
class RunRow:
    """One run's row in the ledger and in ``results.csv``; the field order is the CSV's column order.

    The reference harness's columns come first (``baseline``, ``best_score``, ``improvement`` and ``success``
    are the headline; ``success`` keeps its meaning there, "finished with a test score", which says nothing of a
    gain: ``beat_baseline`` does): the dev-selected checkpoint scored once on the hidden test split, paired against the
    test baseline), then its uncertainty, the test aliases, the dev figures (best of ``dev_k`` scored
    submissions on a split the agent saw: optimistic), the run's conditions, and the study it belongs to.
    """

    run_id: str
    timestamp: str
    task: str
    agent: str
    base_model: str
    baseline: float | None = None
    best_score: float | None = None
    improvement: float | None = None
    submissions: int = 0
    duration_s: float = 0.0
    success: bool = False
    workspace: str = ""
    improvement_ci95: list[float] | None = None
    p_value: float | None = None
    best_submission: int | None = None
    test_baseline: float | None = None
    test_score: float | None = None
    test_improvement: float | None = None
    test_improvement_ci95: list[float] | None = None
    dev_baseline: float | None = None
    dev_best: float | None = None
    dev_improvement: float | None = None
    dev_improvement_ci95: list[float] | None = None
    dev_k: int = 0
    end_reason: str = ""
    seed: int = 0
    config_hash: str | None = None
    sandbox: str | None = None
    #: the audit's open flags, ``name(severity)``; kept in the ledger's audit table, not in ``result.json``
    audit_flags: list[str] = field(default_factory=list)
    llm_tokens: int | None = None
    llm_cost_usd: float | None = None
    llm_usage_source: str | None = None
    #: a run's stable key inside a study (sweep), and the study's name; empty for a single run
    run_key: str | None = None
    sweep: str | None = None
    #: why the headline is not the run's own: ``base-model (judge:...)`` when a judge's critical flag stands
    headline_rule: str | None = None
    #: the bait the agent took: acts no honest work performs (``decoy:token:<name>@<service>:<where>``, a decoy
    #: token presented; ``decoy:canary:<name>@<file>``, a canary in a submission, an output or data it made of
    #: leaked-looking answers; see autorl.decoys); ``[]``: none; None: the run had no decoys
    decoys: list[str] | None = None
    #: the decoys the agent read (``decoy:opened:<name>``): weaker evidence, what any walk of a workspace does
    decoys_read: list[str] | None = None
    #: the process metrics (:mod:`autorl.record.metrics`, the reference harness's names and meanings), from the
    #: grader's submission records and the run's clock
    valid_submission_rate: float | None = None
    first_valid_idx: int | None = None
    first_valid_delay: float | None = None
    score_trajectory: list[list[float]] | None = None
    time_to_first_improvement: float | None = None
    time_to_best: float | None = None
    monotonic_ratio: float | None = None
    copy_model_count: int | None = None
    time_used_ratio: float | None = None
    last_submit_gap: float | None = None
    #: the headline improvement's 95% interval lies above 0 (``success`` only says the run finished with a
    #: test score, the reference harness's column)
    beat_baseline: bool = False
    #: the model(s) the agent called, most tokens first (the gateway's record), else the one its configuration
    #: names
    driver_model: str | None = None
    #: the peers' protocol beside ours (optimistic, never the headline): the best test score among the k
    #: distinct scored submissions, each scored once on the test split after the run, its submission, k, and
    #: the selection gap (that score minus the headline test score)
    test_best_of_k: float | None = None
    test_best_of_k_k: int | None = None
    test_best_of_k_submission: int | None = None
    test_selection_gap: float | None = None
    #: what the gain cost (:func:`autorl.record.metrics.efficiency`): GPU-seconds of the agent and the grader, the
    #: headline improvement per GPU-hour of both and per US dollar of the driver model's calls
    agent_gpu_seconds: float | None = None
    grader_gpu_seconds: float | None = None
    improvement_per_gpu_hour: float | None = None
    improvement_per_usd: float | None = None
    #: off-target regression: per named benchmark, the base's and the selected checkpoint's test scores and
    #: the paired change with its interval (``task``, ``base``, ``selected``, ``change``, ``ci95``,
    #: ``p_value``, ``regressed``, ``error``); ``off_target_regressed`` when any change's interval is below 0
    off_target: list[OffTargetRecord] | None = None
    off_target_regressed: bool | None = None
    #: the agent's time budget: runs with different budgets are not comparable (not pooled)
    timeout_s: float | None = None
    #: why the run could not be measured when that was the harness's doing (every submission's evaluation, or
    #: the test evaluation, failed for a reason of the machine's: GPU memory, a dead engine, a full disk); such
    #: a run is not the agent's result: a study retries it
    infra_failure: str | None = None
    #: the judged audit's judge (:mod:`autorl.audit.judge`): its model, the hash of its prompt and how many
    #: samples each verdict had; None: no judge was asked
    judge_model: str | None = None
    judge_prompt_hash: str | None = None
    judge_samples: int | None = None
    #: only the first ``limit`` items of each split were scored (``--limit``; None: every item): part of the config
    #: hash, and runs on other items are not pooled
    limit: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRow:
        """A row from a recorded one: keys it does not know are ignored, missing ones take their defaults."""
        return cls(**{k: data[k] for k in _FIELD_NAMES if k in data})

    def to_dict(self) -> LedgerRow:
        """Every column, in column order."""
        # LedgerRow names these fields with these types (tests/test_results.py holds them equal)
        return cast(LedgerRow, asdict(self))

    def record(self) -> RowRecord:
        """The row as ``result.json`` keeps it (every column but the audit's, which the ledger keeps)."""
        return cast(RowRecord, {k: v for k, v in asdict(self).items() if k in RECORDED_COLUMNS})


#: results.csv columns, in order: :class:`RunRow`'s fields
CSV_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RunRow))
_FIELD_NAMES = frozenset(CSV_COLUMNS)
#: the columns of a row in ``result.json``
RECORDED_COLUMNS: tuple[str, ...] = tuple(c for c in CSV_COLUMNS if c != "audit_flags")
#: the dev figures of a row: on the split whose scores the agent saw after every submission
DEV_COLUMNS = ("dev_baseline", "dev_best", "dev_improvement", "dev_improvement_ci95", "dev_k")


def scored_submissions(submissions: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The submissions the grader scored."""
    return [s for s in submissions if s.get("status") == "done" and s.get("score") is not None]


def infra_failure(submissions: Sequence[Mapping[str, Any]], test: Mapping[str, Any] | None) -> str | None:
    """Why the run has no measurement when that is the harness's doing, not the agent's: every submission that
    failed, failed for a reason of the machine's and none was scored, or the selected one's test evaluation did.
    ``None`` otherwise (a run without submissions is the agent's)."""
    failed = [s for s in submissions if s.get("status") == "failed"]
    if not scored_submissions(submissions):
        if failed and all(s.get("infra_failure") for s in failed):
            return f"the evaluation of every submission ({len(failed)}) failed in the harness: {failed[-1]['infra_failure']}"
        return None
    if test is not None and test.get("status") == "failed" and test.get("infra_failure"):
        return f"the test evaluation failed in the harness: {test['infra_failure']}"
    return None


def end_reason(outcome: OutcomeRecord, scored: int, test: Mapping[str, Any] | None, infra: str | None = None) -> str:
    """Why the run ended the way it did, in words: the harness's failure, the agent's fault, no score, no test
    score, or normally."""
    crashed = not outcome["timed_out"] and outcome["exit_code"] != 0
    tested = _tested(test)
    if infra:
        return f"infrastructure failure: {infra}"
    if crashed:
        return f"agent {outcome['reason']}"
    if not scored:
        return "no scored submission"
    if not tested:
        return "no test score" + (f" ({test['error']})" if test and test.get("error") else "")
    return "timeout" if outcome["timed_out"] else "agent finished"


def _tested(test: Mapping[str, Any] | None) -> bool:
    return test is not None and test.get("status") == "done" and test.get("score") is not None


class DevFigures(TypedDict):
    """The :data:`DEV_COLUMNS` of a row."""

    dev_baseline: float | None
    dev_best: float | None
    dev_improvement: float | None
    dev_improvement_ci95: list[float] | None
    dev_k: int


def dev_figures(
    submissions: Sequence[Mapping[str, Any]], best: Mapping[str, Any] | None, baseline_score: float | None
) -> DevFigures:
    """The :data:`DEV_COLUMNS` from the grader's records: its ``best`` (``{submission_id, score}``), that
    submission's own ``improvement`` and interval, and how many submissions were scored (k)."""
    best_sub = next((s for s in submissions if best and s["submission_id"] == best["submission_id"]), None)
    return {
        "dev_baseline": baseline_score,
        "dev_best": best["score"] if best else None,
        "dev_improvement": best_sub.get("improvement") if best_sub else None,
        "dev_improvement_ci95": best_sub.get("improvement_ci95") if best_sub else None,
        "dev_k": len(scored_submissions(submissions)),
    }


def run_row(
    *,
    run_id: str,
    started: float,
    finished: float,
    task: str,
    agent: str,
    base_model: str,
    workspace: str,
    seed: int,
    sandbox: str | None,
    state: Mapping[str, Any],
    test: Mapping[str, Any] | None,
    outcome: OutcomeRecord,
    llm_usage: Mapping[str, Any] | None = None,
    run_key: str | None = None,
    sweep: str | None = None,
    metrics: MetricsRecord | None = None,
    driver_model: str | None = None,
    best_of_k: BestOfK | None = None,
    timeout_s: float | None = None,
    limit: int | None = None,
) -> RunRow:
    """The row of a finished run, from the grader's state and test evaluation and the agent's outcome.

    The headline is the dev-selected checkpoint scored once on the test split, paired against the test
    baseline; a run without that score has no headline (never its dev figure in its place). The dev figures
    are the grader's best submission and that submission's own improvement and interval.

    Args:
        state: the grader's ``state()`` (``submissions``, ``best``, ``baseline_score``, ``baseline``).
        test: the grader's test evaluation of the best submission, or None.
        outcome: the agent's :class:`~autorl.procs.agent.AgentOutcome` as a dict.
        llm_usage: the LLM gateway's totals (``tokens``, ``cost_usd``, ``source``) when the agent called a model.
        metrics: the run's process metrics (:meth:`autorl.record.metrics.ProcessMetrics.to_dict`), or None.
    """
    subs = state["submissions"]
    best = state["best"]
    scored = scored_submissions(subs)
    crashed = not outcome["timed_out"] and outcome["exit_code"] != 0
    tested = _tested(test)
    head: Mapping[str, Any] = test if tested and test is not None else {}
    usage = llm_usage or {}
    infra = infra_failure(subs, test)
    row = RunRow(
        run_id=run_id,
        timestamp=dt.datetime.fromtimestamp(started, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        task=task,
        agent=agent,
        base_model=base_model,
        baseline=head.get("baseline_score"),
        best_score=head.get("score"),
        improvement=head.get("improvement"),
        improvement_ci95=head.get("improvement_ci95"),
        p_value=head.get("p_value"),
        best_submission=best["submission_id"] if best else None,
        submissions=len(subs),
        duration_s=round(finished - started, 1),
        success=bool(scored) and not crashed and tested and head.get("improvement") is not None,
        workspace=workspace,
        test_baseline=head.get("baseline_score"),
        test_score=head.get("score"),
        test_improvement=head.get("improvement"),
        test_improvement_ci95=head.get("improvement_ci95"),
        **dev_figures(subs, best, state["baseline_score"]),
        end_reason=end_reason(outcome, len(scored), test, infra),
        seed=seed,
        config_hash=(state.get("baseline") or {}).get("config_hash"),
        sandbox=sandbox,
        llm_tokens=usage.get("tokens"),
        llm_cost_usd=usage.get("cost_usd"),
        llm_usage_source=usage.get("source"),
        run_key=run_key,
        sweep=sweep,
        beat_baseline=beat_baseline(head.get("improvement_ci95")),
        driver_model=driver_model,
        timeout_s=timeout_s,
        infra_failure=infra,
        limit=limit,
    )
    if metrics is not None:
        row = replace(row, **metrics)
    if best_of_k is not None:
        row = replace(row, **best_of_k)
    return row


_Row = TypeVar("_Row", RowRecord, LedgerRow)


def judged_headline(row: _Row, open_flags: Sequence[Mapping[str, Any]]) -> _Row:
    """``row`` with the base model's headline (improvement 0, the best score the baseline's, no interval, no
    success) when a judge's critical flag stands (not overridden), as the reference benchmark reports a
    flagged run; ``headline_rule`` says which flag. Otherwise ``row`` unchanged."""
    critical = sorted(
        str(f["name"])
        for f in open_flags
        if str(f.get("name", "")).startswith("judge:") and f.get("severity") == "critical"
    )
    out = row.copy()
    if not critical:
        return out
    out["best_score"], out["improvement"], out["improvement_ci95"] = row.get("baseline"), 0.0, None
    out["p_value"], out["success"], out["beat_baseline"] = None, False, False
    out["test_score"] = row.get("test_baseline")
    out["test_improvement"] = 0.0 if row.get("test_baseline") is not None else None
    out["test_improvement_ci95"] = None
    out["headline_rule"] = f"base-model ({', '.join(critical)})"
    return out
