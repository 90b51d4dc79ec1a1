"""The records the grader shows, as pure functions of what its store holds (nothing here writes a store; only
:func:`state_from_store` reads one).

The agent sees :func:`public` records (dev split only, never item-level results) with the run's :func:`best`;
the orchestrator collects :func:`state`, whose test-split figures are :func:`public_test` records. The paired
comparison with the baseline (:func:`compare`) is computed by the grader when a score is written, never when a
record is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.evaluation.schema import summary as schema_summary
from autorl.evaluation.stats import paired_compare
from autorl.grader.store import DONE, Store

if TYPE_CHECKING:
    from autorl.grader.schema import (
        BaselineRecord,
        BaselineRow,
        Best,
        Comparison,
        EvalRecord,
        GraderState,
        HowEvaluated,
        RefusalRow,
        SubmissionRecord,
        SubmissionRow,
        TestRecord,
        TestRow,
    )

#: evaluator bookkeeping kept out of the ``extra`` figures a record shows
_PRIVATE_EXTRA = ("ci_method", "single_split")


def summary(record: EvalRecord) -> EvalRecord:
    """An evaluation record less its per-item scores (what the store keeps with a submission)."""
    return schema_summary(record)


def paired_scores(baseline: EvalRecord, record: EvalRecord) -> tuple[dict[str, float], dict[str, float]]:
    """The two records' per-item scores, less the items either record excluded (``extra.excluded_items``: an
    evaluator that could not score an item, e.g. a judge that failed after its retries, leaves it out of its
    score and lists it there), so that the comparison stands on the same items as the scores."""
    dropped: set[str] = set()
    for rec in (baseline, record):
        excluded = (rec.get("extra") or {}).get("excluded_items") or {}
        if isinstance(excluded, dict):
            dropped |= {str(k) for k in excluded}
    base = {k: v for k, v in baseline["item_scores"].items() if k not in dropped}
    cand = {k: v for k, v in record["item_scores"].items() if k not in dropped}
    return base, cand


def compare(baseline: EvalRecord | None, record: EvalRecord | None) -> Comparison | None:
    """The paired comparison of two full evaluation records (with item scores); ``None`` when either is missing
    or they share no item."""
    if not baseline or not record or "item_scores" not in baseline or "item_scores" not in record:
        return None
    try:
        return paired_compare(*paired_scores(baseline, record)).to_dict()
    except ValueError:
        return None


def best(submissions: Sequence[SubmissionRow]) -> Best | None:
    """The best finished submission on dev (the earliest among equal scores), as ``{submission_id, score}``."""
    done = [(score, s["id"]) for s in submissions if s["status"] == DONE and (score := s["score"]) is not None]
    if not done:
        return None
    score, sid = max(done, key=lambda d: (d[0], -d[1]))
    return {"submission_id": sid, "score": score}


#: how a submission was evaluated, in every record of it: the engine (``fresh``, ``reused`` or ``reloaded``), the
#: seconds to load and to generate, and the seconds to wake the engine before and put it to sleep after (None
#: where it did not sleep)
HOW_EVALUATED = ("engine", "load_s", "generate_s", "wake_s", "sleep_s")


def how_evaluated(record: EvalRecord | None) -> HowEvaluated:
    """The :data:`HOW_EVALUATED` figures of an evaluation record (None where it has none): the record's own, else
    its ``extra``'s (where the engine figures of a warm engine are)."""
    if not record:
        return {"engine": None, "load_s": None, "generate_s": None, "wake_s": None, "sleep_s": None}
    extra = record.get("extra") or {}
    if not isinstance(extra, Mapping):
        extra = {}
    return {
        "engine": record.get("engine", extra.get("engine")),
        "load_s": record.get("load_s", extra.get("load_s")),
        "generate_s": record.get("generate_s", extra.get("generate_s")),
        "wake_s": extra.get("wake_s"),
        "sleep_s": extra.get("sleep_s"),
    }


def _extra(record: EvalRecord | None) -> dict[str, Any]:
    # the evaluator's aggregate figures (success rate, length-controlled win rate, judge cost, ...)
    return {k: v for k, v in ((record.get("extra") if record else None) or {}).items() if k not in _PRIVATE_EXTRA}


def public(sub: SubmissionRow, *, baseline: BaselineRow | None, best: Best | None, total: int) -> SubmissionRecord:
    """The record the agent sees of one submission row, given the dev baseline row, the run's best and the
    number of submissions."""
    rec = sub.get("record") or None
    comp = sub.get("comparison") or None
    score = sub["score"]
    improvement = None
    if sub["status"] == DONE and baseline is not None and score is not None:
        improvement = score - baseline["score"]
    scored = improvement is not None
    return {
        "submission_id": sub["id"],
        "status": sub["status"],
        "model_path": sub["model_path"],
        "kind": sub["kind"],
        "split": "dev",
        "score": score,
        "n": rec.get("n") if rec else None,
        "stderr": rec.get("stderr") if rec else None,
        "ci95": rec.get("ci95") if rec else None,
        "baseline_score": baseline["score"] if baseline else None,
        "improvement": improvement,
        "improvement_ci95": comp.get("ci95") if scored and comp else None,
        "p_value": comp.get("p_value") if scored and comp else None,
        "best": best.copy() if best else None,
        "total_submissions": total,
        "error": sub["error"],
        # the harness's reason when the evaluation failed for it (GPU memory, a dead engine), not the checkpoint's
        "infra_failure": sub.get("infra_failure"),
        # when its copies were deleted by the run's keep policy (autorl.grader.keep), and what of them
        "pruned": sub.get("pruned"),
        "duplicate_of": sub["duplicate_of"],
        "content_hash": sub["content_hash"],
        "config_hash": rec.get("config_hash") if rec else None,
        "extra": _extra(rec),
        **how_evaluated(rec),
        "created_at": sub["created_at"],
        "finished_at": sub["finished_at"],
    }


def public_all(submissions: Sequence[SubmissionRow], baseline: BaselineRow | None) -> list[SubmissionRecord]:
    """Every submission's :func:`public` record (the run's best computed once)."""
    top = best(submissions)
    return [public(s, baseline=baseline, best=top, total=len(submissions)) for s in submissions]


def public_test(row: TestRow) -> TestRecord:
    """One test-split score as the orchestrator sees it (its baseline and comparison were fixed when scored)."""
    rec = row.get("record") or None
    comp = row.get("comparison") or None
    return {
        "submission_id": row["submission_id"],
        "split": "test",
        "status": row["status"],
        "score": row["score"],
        "n": rec.get("n") if rec else None,
        "ci95": rec.get("ci95") if rec else None,
        "baseline_score": rec.get("baseline_score") if rec else None,
        "improvement": comp.get("difference") if comp else None,
        "improvement_ci95": comp.get("ci95") if comp else None,
        "p_value": comp.get("p_value") if comp else None,
        "error": row["error"],
        "infra_failure": row.get("infra_failure"),
        "config_hash": rec.get("config_hash") if rec else None,
        "extra": _extra(rec),
        **how_evaluated(rec),
    }


def baseline_public(baseline: BaselineRow) -> BaselineRecord:
    """The dev baseline as ``/admin/baseline`` answers it: score, source and the record's figures."""
    rec = baseline.get("record")
    if not rec:
        return {"score": baseline["score"], "source": baseline["source"]}
    return {"score": baseline["score"], "source": baseline["source"], **summary(rec)}


def state(
    *,
    task: str,
    baseline: BaselineRow | None,
    baseline_error: str | None,
    submissions: Sequence[SubmissionRow],
    tests: Sequence[TestRow],
    counts: Mapping[str, int],
    refusals: Sequence[RefusalRow],
    closed: bool,
) -> GraderState:
    """Everything the orchestrator collects at the end of a run, from the store's rows."""
    shown: EvalRecord | BaselineRow | None = None
    if baseline is not None:
        rec = baseline.get("record")
        shown = summary(rec) if rec else baseline.copy()
    return {
        "task": task,
        "baseline": shown,
        "baseline_score": baseline["score"] if baseline else None,
        "baseline_error": baseline_error,
        "submissions": public_all(submissions, baseline),
        "best": best(submissions),
        "test": [public_test(t) for t in tests],
        "counts": dict(counts),
        "refusals": [r.copy() for r in refusals],
        "closed": closed,
    }


def state_from_store(db: Path, task: str) -> GraderState:
    """The grader's :func:`state` read from its store file alone (opened read-only: nothing is evaluated or
    written), for a run whose grader is gone."""
    store = Store.read_only(db)
    try:
        return state(
            task=task,
            baseline=store.baseline("dev"),
            baseline_error=None,
            submissions=store.all(),
            tests=store.test_scores(),
            counts=store.counts(),
            refusals=store.refusals(),
            closed=bool(store.get_meta("closed", False)),
        )
    finally:
        store.close()
