"""What a finishing run reads from its grader: evaluations in flight waited for, the run closed, the best on dev
scored once on the hidden test split (and, for the peers' best-of-k, every other distinct scored submission), all
from the grader's own store; when the grader is lost for good, its state read from the store file
(:class:`Collected`). The finish (:mod:`autorl.runs.finish`) builds the run's record from what this returns.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from autorl.errors import GraderError
from autorl.grader.records import state_from_store

if TYPE_CHECKING:
    from autorl.grader.client import GraderClient
    from autorl.grader.process import GraderProcess
    from autorl.grader.schema import GraderState, SubmissionRecord, TestRecord
    from autorl.runs.progress import Say

__all__ = ["Collected", "Unscored", "collect", "collect_from", "distinct_scored"]


@dataclass(frozen=True)
class Collected:
    """The grader's state once the run is closed and the best submission's test evaluation; when the grader
    was lost for good, why (the state is then read from its store)."""

    state: GraderState
    test: TestRecord | None
    grader_lost: str | None = None
    #: every distinct scored submission's test evaluation (the peers' best-of-k), when asked for
    test_all: list[TestRecord | Unscored] | None = None


class Unscored(TypedDict):
    """A submission the grader could not score on the test split when asked (left out of the best-of-k's k)."""

    submission_id: int
    status: str
    score: None
    error: str


def collect(
    admin: GraderClient, eval_timeout: float, final_test: bool, say: Say, test_all: bool = False
) -> tuple[GraderState, TestRecord | None, list[TestRecord | Unscored] | None]:
    """From the grader's own store only: evaluations in flight finished (up to ``eval_timeout`` s), the run
    closed, the best on dev scored once on the test split; with ``test_all`` every other distinct scored
    submission too, once each (the peers' protocol, never the headline). Returns the grader's state, the best's
    test evaluation and, with ``test_all``, every test evaluation."""
    _wait_for_evaluations(admin, eval_timeout)
    admin.close_run()
    state = admin.state()
    test = None
    best = state["best"]
    if final_test and best is not None:
        say(f"scoring the best submission ({best['submission_id']}) on the hidden test split")
        test = admin.evaluate_test()
    if not (final_test and test_all and test is not None and best is not None):
        return state, test, None
    tests: list[TestRecord | Unscored] = [test]
    others = distinct_scored(state["submissions"], exclude=best["submission_id"])
    if others:
        say(f"scoring {len(others)} other submission(s) on the test split for the best-of-k figure (not the result)")
    for sid in others:
        try:
            tests.append(admin.evaluate_test(sid))
        except GraderError as exc:  # one that cannot be scored is left out of k, said so
            tests.append({"submission_id": sid, "status": "failed", "score": None, "error": str(exc)[:300]})
    return state, test, tests


def distinct_scored(submissions: list[SubmissionRecord], exclude: int | None = None) -> list[int]:
    """The scored submissions with distinct content (the earliest of equal ones; ``exclude``'s content counts
    as seen), in submission order."""
    done = sorted(
        (s for s in submissions if s.get("status") == "done" and s.get("score") is not None),
        key=lambda s: int(s["submission_id"]),
    )
    seen = {s.get("content_hash") for s in done if s["submission_id"] == exclude}
    out = []
    for s in done:
        digest = s.get("content_hash") or f"#{s['submission_id']}"
        if s["submission_id"] == exclude or s.get("duplicate_of") is not None or digest in seen:
            continue
        seen.add(digest)
        out.append(int(s["submission_id"]))
    return out


def _wait_for_evaluations(admin: GraderClient, timeout: float) -> None:
    end = time.monotonic() + timeout
    while True:
        counts = admin.state()["counts"]
        if not counts.get("queued") and not counts.get("running") and not counts.get("pending"):
            return
        if time.monotonic() > end:
            return
        time.sleep(0.5)


def collect_from(
    grader: GraderProcess,
    store_dir: Path,
    task: str,
    eval_timeout: float,
    final_test: bool,
    say: Say,
    test_all: bool = False,
) -> Collected:
    """:func:`collect` from a grader that answers (made again when it was started again under the call); from
    its store file when the grader is gone for good."""
    try:
        state, test, tests = grader.surviving(lambda: collect(grader.admin, eval_timeout, final_test, say, test_all))
        return Collected(state, test, test_all=tests)
    except GraderError:
        if grader.alive:
            raise
    lost = grader.error or "the grader is gone"
    say(f"warning: {lost}; the run is recorded from the grader's store")
    return Collected(state_from_store(store_dir / "grader.db", task), None, lost)
