"""The grader's final test evaluation: the hidden test split scores a submission once, never shown to the agent.

The orchestrator asks for the dev-best's score at the end of a run (and, for the best-of-k figure, every distinct
submission's); where the keep policy deletes checkpoints while the run goes, the grader takes each submission's
test score between submissions first (:meth:`FinalTest._test_next`). A test evaluation is claimed in the store
once; a second ask waits for the first's score; one claimed by a grader that stopped before scoring it (its
orchestrator lost) is scored by the next, once.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from autorl.errors import AutorlError, GraderError, NotFound
from autorl.grader import records
from autorl.grader.jobs import EvalFailed
from autorl.grader.snapshot import Snapshot
from autorl.grader.store import DONE, FAILED, RUNNING

if TYPE_CHECKING:
    from autorl.grader.config import GraderConfig
    from autorl.grader.jobs import EvalSlot
    from autorl.grader.schema import BaselineRow, EvalRecord, TestRecord, TestSummary
    from autorl.grader.store import Store


class FinalTest:
    """The test-split half of :class:`autorl.grader.core.Grader` (its store, slots and configuration)."""

    config: GraderConfig
    store: Store
    _slots: list[EvalSlot]
    _stop: threading.Event
    _test_lock: threading.Lock
    _testing: set[int]

    def baseline_record(self, split: str, slot: int = 0) -> EvalRecord:
        raise NotImplementedError

    def prune(self) -> list[int]:
        raise NotImplementedError

    def evaluate_test(self, sid: int | None = None) -> TestRecord:
        """Score one submission (default: best on dev) on the hidden test split, once."""
        if sid is None:
            best = records.best(self.store.all())
            if best is None:
                raise NotFound("no finished submission to evaluate on the test split")
            sid = int(best["submission_id"])
        sub = self.store.get(sid)
        if sub is None:
            raise NotFound(f"no submission {sid}")
        if sub["status"] != DONE:
            raise GraderError(f"submission {sid} is {sub['status']}, not done", status=409)
        with self._test_lock:
            claimed = self.store.claim_test(sid) or self._abandoned_test(sid)
            if claimed:
                self._testing.add(sid)
        if claimed:
            try:
                self._score_test(sid, Snapshot.from_row(sub))
            finally:
                with self._test_lock:
                    self._testing.discard(sid)
        else:  # scored by another thread of this grader now (between submissions): its score, once there
            end = time.monotonic() + 2 * self.config.eval_timeout
            while sid in self._testing and time.monotonic() < end and not self._stop.is_set():
                time.sleep(0.1)
        result = self.store.test_score(sid)
        assert result is not None
        return records.public_test(result)

    def _test_next(self) -> bool:
        """Between submissions, when the keep policy deletes checkpoints once scored and the run scores every
        submission on the test split (the best-of-k figure, never shown to the agent): score the next one that
        waits for it, so that its copies may go. Whether one was scored."""
        if (
            self.config.keep == "all"
            or not self.config.keep_while_running
            or not self.config.test_each
            or self._stop.is_set()
        ):
            return False
        tested = {int(t["submission_id"]) for t in self.store.test_scores()}
        subs = self.store.all()
        waiting = [
            s
            for s in subs
            if s["status"] == DONE and s["duplicate_of"] is None and not s.get("pruned") and int(s["id"]) not in tested
        ]
        if not waiting:
            return False
        try:
            self.evaluate_test(int(waiting[0]["id"]))
        except AutorlError:
            return False
        return True

    def _abandoned_test(self, sid: int) -> bool:
        """Whether the test evaluation of ``sid`` was claimed by a grader that stopped before scoring it (it
        lost its orchestrator): no score was seen, so this grader may score it, once."""
        row = self.store.test_score(sid)
        return row is not None and row["status"] == RUNNING and sid not in self._testing

    def _score_test(self, sid: int, snapshot: Snapshot) -> None:
        """Score the claimed test evaluation of ``sid``, and the base model's once, beside it."""
        # the base model's test score and record: the store's, else evaluated now and kept (None: no base model)
        base_score: float | None = None
        base_record: EvalRecord | None = None
        try:
            record = self._slots[0].run(snapshot, "test", f"sub{sid}")
            if self.config.base_model:
                row: BaselineRow | None = self.store.baseline("test")
                if row is None:
                    base_record = self.baseline_record("test")
                    base_score = base_record["score"]
                    self.store.set_baseline("test", base_score, base_record, "evaluated")
                else:
                    base_score, base_record = row["score"], row["record"]
        except EvalFailed as exc:
            if not self._stop.is_set():  # abandoned by a stop: left claimed, for the grader that recovers the run
                self.store.finish_test(sid, status=FAILED, error=str(exc), infra_failure=exc.harness)
            return
        summary: TestSummary = {**records.summary(record), "baseline_score": base_score}
        self.store.finish_test(
            sid, status=DONE, score=record["score"], record=summary, comparison=records.compare(base_record, record)
        )
        self.prune()
