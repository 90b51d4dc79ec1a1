"""The grader's dev baseline: the base model scored on the dev split, and each submission paired with it.

Slot 0 evaluates the base model before it takes a submission (from the cross-run cache when its key matches); the
orchestrator may set the baseline's score by hand instead (no record, so no paired comparison). A submission scored
on dev gets its comparison with the baseline's record (:func:`autorl.grader.records.compare`), and scores written
before the baseline was known get theirs once it is.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, TypedDict

from autorl.grader import records
from autorl.grader.jobs import EvalFailed
from autorl.grader.store import DONE

if TYPE_CHECKING:
    from autorl.grader.config import GraderConfig
    from autorl.grader.jobs import EvalSlot
    from autorl.grader.schema import BaselineRow, Comparison, EvalRecord
    from autorl.grader.store import Store


class _Scored(TypedDict):
    """The columns of a submission row scored on dev (:meth:`Baseline._scored`)."""

    status: str
    score: float
    record: EvalRecord
    comparison: Comparison | None
    finished_at: float


class Baseline:
    """The dev-baseline half of :class:`autorl.grader.core.Grader` (its store, slots and configuration)."""

    config: GraderConfig
    store: Store
    baseline_error: str | None
    _slots: list[EvalSlot]
    _threads: list[threading.Thread]

    def write_mirror(self) -> None:
        raise NotImplementedError

    def _scored(self, record: EvalRecord, finished_at: float) -> _Scored:
        """The columns of a submission scored with the full dev ``record``, its comparison included."""
        base = self.store.baseline("dev")
        return {
            "status": DONE,
            "score": record["score"],
            "record": records.summary(record),
            "comparison": records.compare(base["record"] if base else None, record),
            "finished_at": finished_at,
        }

    def _fill_comparisons(self) -> None:
        """Give every scored submission that lacks one its comparison with the dev baseline (when it has items)."""
        base = self.store.baseline("dev")
        if base is None or not base.get("record"):
            return
        for sub in self.store.all():
            if sub["status"] == DONE and sub["comparison"] is None and sub["content_hash"]:
                comp = records.compare(base["record"], self.store.evaluation(sub["content_hash"], "dev"))
                if comp is not None:
                    self.store.update(sub["id"], comparison=comp)

    def _needs_baseline(self) -> bool:
        return (
            self.config.evaluate_baseline
            and self.config.base_model is not None
            and self.baseline_error is None
            and self.store.baseline("dev") is None
        )

    def _run_baseline(self, slot: int) -> None:
        try:
            record = self.baseline_record("dev", slot)
        except EvalFailed as exc:
            self.baseline_error = str(exc)
            return
        self.store.set_baseline("dev", record["score"], record, "evaluated")
        self._fill_comparisons()
        self.write_mirror()

    def baseline_record(self, split: str, slot: int = 0) -> EvalRecord:
        """The base model's evaluation on ``split``, from the cross-run cache when its key matches."""
        assert self.config.base_model is not None
        return self._slots[slot].run(None, split, "baseline")

    def set_baseline(self, score: float) -> None:
        """Set the dev baseline's score by hand (no record: submissions get no paired comparison from it)."""
        self.store.set_baseline("dev", float(score), None, "set")
        self.write_mirror()

    def wait_baseline(self, timeout: float) -> BaselineRow | None:
        """The dev baseline row once there is one (``None`` after ``timeout`` s, or when it failed)."""
        end = time.time() + timeout
        while time.time() < end:
            base = self.store.baseline("dev")
            if base is not None or self.baseline_error or not self._threads:
                return base
            time.sleep(0.1)
        return self.store.baseline("dev")
