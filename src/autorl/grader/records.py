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
from typing import Any

from autorl.evaluation.stats import paired_compare
from autorl.grader.store import DONE, Store

#: evaluator bookkeeping kept out of the ``extra`` figures a record shows
_PRIVATE_EXTRA = ("ci_method", "single_split")


def summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """An evaluation record less its per-item scores (what the store keeps with a submission)."""
    return {k: v for k, v in record.items() if k != "item_scores"}


def paired_scores(baseline: Mapping[str, Any], record: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
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


def compare(baseline: Mapping[str, Any] | None, record: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The paired comparison of two full evaluation records (with item scores); ``None`` when either is missing
    or they share no item."""
    if not baseline or not record or "item_scores" not in baseline or "item_scores" not in record:
        return None
    try:
        return paired_compare(*paired_scores(baseline, record)).to_dict()
    except ValueError:
        return None


def best(submissions: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The best finished submission on dev (the earliest among equal scores), as ``{submission_id, score}``."""
    done = [s for s in submissions if s["status"] == DONE and s["score"] is not None]
    if not done:
        return None
    top = max(done, key=lambda s: (s["score"], -s["id"]))
    return {"submission_id": top["id"], "score": top["score"]}


#: how a submission was evaluated, in every record of it: the engine (``fresh``, ``reused`` or ``reloaded``), the
#: seconds to load and to generate, and the seconds to wake the engine before and put it to sleep after (None
#: where it did not sleep)
HOW_EVALUATED = ("engine", "load_s", "generate_s", "wake_s", "sleep_s")


def how_evaluated(record: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`HOW_EVALUATED` figures of an evaluation record (None where it has none)."""
    extra = record.get("extra") or {}
    return {k: record.get(k, extra.get(k) if isinstance(extra, Mapping) else None) for k in HOW_EVALUATED}


def _extra(record: Mapping[str, Any]) -> dict[str, Any]:
    # the evaluator's aggregate figures (success rate, length-controlled win rate, judge cost, ...)
    return {k: v for k, v in (record.get("extra") or {}).items() if k not in _PRIVATE_EXTRA}


def public(sub: Mapping[str, Any], *, baseline: Mapping[str, Any] | None, best: Mapping[str, Any] | None,
           total: int) -> dict[str, Any]:
    """The record the agent sees of one submission row, given the dev baseline row, the run's best and the
    number of submissions."""
    rec = sub.get("record") or {}
    comp = sub.get("comparison") or {}
    scored = sub["status"] == DONE and baseline is not None and sub["score"] is not None
    return {
        "submission_id": sub["id"],
        "status": sub["status"],
        "model_path": sub["model_path"],
        "kind": sub["kind"],
        "split": "dev",
        "score": sub["score"],
        "n": rec.get("n"),
        "stderr": rec.get("stderr"),
        "ci95": rec.get("ci95"),
        "baseline_score": baseline["score"] if baseline else None,
        "improvement": sub["score"] - baseline["score"] if scored and baseline is not None else None,
        "improvement_ci95": comp.get("ci95") if scored else None,
        "p_value": comp.get("p_value") if scored else None,
        "best": dict(best) if best else None,
        "total_submissions": total,
        "error": sub["error"],
        # the harness's reason when the evaluation failed for it (GPU memory, a dead engine), not the checkpoint's
        "infra_failure": sub.get("infra_failure"),
        # when its copies were deleted by the run's keep policy (autorl.grader.keep), and what of them
        "pruned": sub.get("pruned"),
        "duplicate_of": sub["duplicate_of"],
        "content_hash": sub["content_hash"],
        "config_hash": rec.get("config_hash"),
        "extra": _extra(rec),
        **how_evaluated(rec),
        "created_at": sub["created_at"],
        "finished_at": sub["finished_at"],
    }


def public_all(submissions: Sequence[Mapping[str, Any]], baseline: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Every submission's :func:`public` record (the run's best computed once)."""
    top = best(submissions)
    return [public(s, baseline=baseline, best=top, total=len(submissions)) for s in submissions]


def public_test(row: Mapping[str, Any]) -> dict[str, Any]:
    """One test-split score as the orchestrator sees it (its baseline and comparison were fixed when scored)."""
    rec = row.get("record") or {}
    comp = row.get("comparison") or {}
    return {
        "submission_id": row["submission_id"],
        "split": "test",
        "status": row["status"],
        "score": row["score"],
        "n": rec.get("n"),
        "ci95": rec.get("ci95"),
        "baseline_score": rec.get("baseline_score"),
        "improvement": comp.get("difference"),
        "improvement_ci95": comp.get("ci95"),
        "p_value": comp.get("p_value"),
        "error": row["error"],
        "infra_failure": row.get("infra_failure"),
        "config_hash": rec.get("config_hash"),
        "extra": _extra(rec),
        **how_evaluated(rec),
    }


def baseline_public(baseline: Mapping[str, Any]) -> dict[str, Any]:
    """The dev baseline as ``/admin/baseline`` answers it: score, source and the record's figures."""
    rec = baseline.get("record") or {}
    return {"score": baseline["score"], "source": baseline["source"], **summary(rec)}


def state(*, task: str, baseline: Mapping[str, Any] | None, baseline_error: str | None,
          submissions: Sequence[Mapping[str, Any]], tests: Sequence[Mapping[str, Any]], counts: Mapping[str, int],
          refusals: Sequence[Mapping[str, Any]], closed: bool) -> dict[str, Any]:
    """Everything the orchestrator collects at the end of a run, from the store's rows."""
    return {
        "task": task,
        "baseline": summary(baseline["record"]) if baseline and baseline.get("record") else
        (dict(baseline) if baseline else None),
        "baseline_score": baseline["score"] if baseline else None,
        "baseline_error": baseline_error,
        "submissions": public_all(submissions, baseline),
        "best": best(submissions),
        "test": [public_test(t) for t in tests],
        "counts": dict(counts),
        "refusals": [dict(r) for r in refusals],
        "closed": closed,
    }


def state_from_store(db: Path, task: str) -> dict[str, Any]:
    """The grader's :func:`state` read from its store file alone (opened read-only: nothing is evaluated or
    written), for a run whose grader is gone."""
    store = Store.read_only(db)
    try:
        return state(task=task, baseline=store.baseline("dev"), baseline_error=None, submissions=store.all(),
                     tests=store.test_scores(), counts=store.counts(), refusals=store.refusals(),
                     closed=bool(store.get_meta("closed", False)))
    finally:
        store.close()
