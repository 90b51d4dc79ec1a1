"""A run's timeline as plain data: each submission over the agent's time (:class:`Point`), the dev baseline's
band, the selected checkpoint's test score and the time budget (:class:`Timeline`), built from a run's record
(:func:`timeline_of_result`) or, by the dashboard, from a live store's submissions (:func:`point`). What
:func:`autorl.record.charts.timeline_svg` draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from autorl.grader.schema import BaselineRow, EvalRecord
    from autorl.record.schema import ResultRecord

__all__ = ["Band", "Point", "TestMark", "Timeline", "point", "timeline_of_result"]


class Point(TypedDict):
    """A submission on the timeline (:func:`point`)."""

    submission_id: int
    t_s: float | None
    scored_t_s: float | None
    score: float | None
    ci95: list[float] | None
    status: str | None
    engine: str | None
    wake_s: float | None
    load_s: float | None
    generate_s: float | None
    sleep_s: float | None


class Band(TypedDict):
    """The dev baseline on the timeline: its score and interval (and, from a live store, its item count)."""

    score: float | None
    ci95: list[float] | None
    n: NotRequired[int | None]


class TestMark(TypedDict):
    """The selected checkpoint's test score on the timeline (there is none without a score)."""

    submission_id: int | None
    score: float
    ci95: list[float] | None
    baseline_score: float | None


class Timeline(TypedDict):
    """The data of :func:`timeline_svg`: each submission over the agent's time, the dev baseline, the test score,
    the time budget and (a run in flight) the time elapsed."""

    points: list[Point]
    baseline: Band | None
    test: TestMark | None
    timeout_s: float | None
    elapsed_s: float | None


def point(sub: Mapping[str, Any], t0: float) -> Point:
    """A submission record as a point of :func:`timeline_svg`: its times since ``t0`` (submitted, scored), its
    score with its interval, its status and how it was evaluated."""
    at = sub.get("finished_at") or sub.get("created_at")
    return {
        "submission_id": sub["submission_id"],
        "t_s": round(float(sub["created_at"]) - t0, 2) if sub.get("created_at") else None,
        "scored_t_s": round(float(at) - t0, 2) if at else None,
        "score": sub.get("score"),
        "ci95": sub.get("ci95"),
        "status": sub.get("status"),
        "engine": sub.get("engine"),
        "wake_s": sub.get("wake_s"),
        "load_s": sub.get("load_s"),
        "generate_s": sub.get("generate_s"),
        "sleep_s": sub.get("sleep_s"),
    }


def _band(baseline: EvalRecord | BaselineRow) -> Band:
    # the dev baseline's record with its interval, or its row (no interval) when the score was set by hand
    ci = baseline.get("ci95")
    return {"score": baseline.get("score"), "ci95": ci if isinstance(ci, list) else None}


def _test_mark(test: Mapping[str, Any]) -> TestMark | None:
    score = test.get("score")
    if score is None:
        return None
    return {
        "submission_id": test.get("submission_id"),
        "score": score,
        "ci95": test.get("ci95"),
        "baseline_score": test.get("baseline_score"),
    }


def timeline_of_result(result: ResultRecord) -> Timeline:
    """The data of :func:`timeline_svg` from a run's record (as ``result.json`` holds it): each submission over
    the agent's time, the dev baseline, the test score of the selected checkpoint and the time budget."""
    meta = result.get("meta") or {}
    subs = result.get("submissions") or []
    t0 = meta.get("agent_started") or min((float(s["created_at"]) for s in subs if s.get("created_at")), default=0.0)
    baseline = result.get("baseline")
    test = result.get("test") or None
    return {
        "points": [point(s, float(t0)) for s in subs],
        "baseline": _band(baseline) if baseline else None,
        "test": _test_mark(test) if test else None,
        "timeout_s": meta.get("timeout_s") or (result.get("row") or {}).get("duration_s"),
        "elapsed_s": None,
    }
