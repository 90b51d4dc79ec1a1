"""The grader's core, apart from HTTP: intake, queue, evaluation slots, baseline, test evaluation and mirror.

:class:`Grader` owns one run's store. What it shows of that store is built by the pure functions of
:mod:`autorl.grader.records`; the workspace boundary (taking a submission in, writing ``scores.json``) is
:mod:`autorl.grader.intake`; the evaluations run in :class:`autorl.grader.jobs.EvalSlot` s. The module is
about 300 lines because it is the one class that changes the run's state, each change beside its checks.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from autorl.errors import AutorlError, GraderError, LimitReached, NotFound, QueueFull, RunClosed
from autorl.grader import records
from autorl.grader.config import GraderConfig
from autorl.grader.final_test import FinalTest
from autorl.grader.intake import take_in, write_mirror
from autorl.grader.jobs import EvalFailed, EvalSlot
from autorl.grader.keep import prune_now, source_file
from autorl.grader.quota import QuotaExceeded, check_quota
from autorl.grader.snapshot import PinnedDir, Snapshot
from autorl.grader.store import DONE, FAILED, QUEUED, WAITING, Store
from autorl.grader.validation import Limits, refusal_kind
from autorl.jsonio import write_json_atomic

if TYPE_CHECKING:
    from autorl.grader.schema import (
        BaselineRow,
        Comparison,
        EvalRecord,
        GraderState,
        SubmissionRecord,
        SubmissionRow,
        TimeInfo,
    )


class _Scored(TypedDict):
    """The columns of a submission row scored on dev (:meth:`Grader._scored`)."""

    status: str
    score: float
    record: EvalRecord
    comparison: Comparison | None
    finished_at: float


class Grader(FinalTest):
    """Owns one run's store and evaluation slots."""

    def __init__(self, config: GraderConfig) -> None:
        self.config = config
        self.store_dir = Path(config.store_dir)
        self.store_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.store_dir, 0o700)
        self.store = Store(self.store_dir / "grader.db")
        self.store.recover()
        if self.store.get_meta("task") is None:
            self.store.set_meta("task", config.task)
            self.store.set_meta("created_at", time.time())
        self.store.set_meta("keep", config.keep)  # what the run's end applies (autorl.grader.keep.keep_after_run)
        self.workspace = Path(config.workspace)
        self.output_dir = Path(config.output_dir)
        self.limits = Limits(config.max_bytes, config.max_files)
        # pinned now: whatever the agent later puts at these paths, submissions are read from these
        # directories and the mirror is written into this workspace, never through a link
        try:
            self._output = PinnedDir(self.output_dir)
            self._workspace = PinnedDir(self.workspace)
        except OSError as exc:
            raise GraderError(f"cannot open the run's workspace or output directory: {exc}") from None
        self._snapshots = self.store_dir / "snapshots"
        self._snapshots.mkdir(exist_ok=True, mode=0o700)
        for leftover in self._snapshots.glob(".incoming-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._slots = [EvalSlot(config, self.store_dir, i, env) for i, env in enumerate(config.workers or [{}])]
        self.baseline_error: str | None = None
        self._mirror_lock = threading.Lock()
        self._test_lock = threading.Lock()
        self._keep_lock = threading.Lock()
        self._testing: set[int] = set()  # test evaluations this grader is scoring now
        self._fill_comparisons()  # a store written by an earlier grader may have scores without one

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Start one thread per evaluation slot (slot 0 evaluates the baseline first)."""
        for slot in range(len(self._slots)):
            t = threading.Thread(target=self._loop, args=(slot,), name=f"grader-slot-{slot}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        """Stop the slots (an evaluation in flight is killed), then close the store and the pinned directories."""
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        for slot in self._slots:
            slot.close()
        for t in self._threads:
            t.join(timeout=10)
        self.store.close()
        self._output.close()
        self._workspace.close()

    @property
    def deadline(self) -> float | None:
        """The run's deadline (Unix seconds), as last set by the orchestrator."""
        value = self.store.get_meta("deadline", self.config.deadline)
        return None if value is None else float(value)

    def set_deadline(self, deadline: float) -> None:
        self.store.set_meta("deadline", float(deadline))

    @property
    def closed(self) -> bool:
        """Whether the run no longer takes submissions (closed by the orchestrator, or past its deadline)."""
        if self.store.get_meta("closed", False):
            return True
        deadline = self.deadline
        return deadline is not None and time.time() > deadline

    def close(self) -> None:
        self.store.set_meta("closed", True)

    def time_info(self) -> TimeInfo:
        now = time.time()
        deadline = self.deadline
        return {
            "now": now,
            "deadline": deadline,
            "remaining_s": max(0.0, deadline - now) if deadline else None,
            "closed": self.closed,
        }

    # -- submissions --------------------------------------------------------------------------------
    def submit(self, raw_path: Any, *, before_copy: Callable[[str], None] | None = None) -> int:
        """Snapshot, validate the snapshot, and queue; returns the new id. Raises the errors the API maps to
        statuses; every refusal is recorded with its kind (the audit reads these)."""
        if self.closed:
            raise RunClosed("the run is closed: the deadline has passed or the run was stopped")
        self._check_capacity()
        incoming = self._snapshots / f".incoming-{secrets.token_hex(8)}"
        try:
            self._check_quota()
            taken = take_in(
                raw_path,
                output=self._output,
                workspace=self.workspace,
                incoming=incoming,
                limits=self.limits,
                before_copy=before_copy,
            )
        except AutorlError as exc:
            self.store.add_refusal(
                str(raw_path), str(exc), "quota" if isinstance(exc, QuotaExceeded) else refusal_kind(exc)
            )
            raise
        digest, found = taken.digest, taken.checkpoint
        try:
            sid = self.store.add_submission(
                str(raw_path), max_total=self.config.max_submissions, max_queued=self.config.max_queue
            )
        except LookupError as exc:
            shutil.rmtree(incoming, ignore_errors=True)
            if exc.args[0] == "total":
                raise LimitReached(f"the run's limit of {self.config.max_submissions} submissions is reached") from None
            raise QueueFull(f"{self.config.max_queue} submissions are already waiting; try again later") from None
        snapshot = Snapshot(self._snapshots / str(sid), found.kind, digest)  # from here on, the submission
        write_json_atomic(source_file(self.store_dir, sid), {"parts": list(taken.parts), "source": taken.source})
        try:
            if snapshot.path.exists():  # left by a store that lost its database rows; ids are never reused
                shutil.rmtree(snapshot.path)
            incoming.rename(snapshot.path)
        except OSError as exc:
            shutil.rmtree(incoming, ignore_errors=True)
            self.store.update(sid, status=FAILED, error=f"could not store the snapshot: {exc}", finished_at=time.time())
            raise GraderError(f"could not store the snapshot: {exc}") from None
        earlier = self.store.evaluation(digest, "dev")
        if earlier is not None:
            first = next(
                (s["id"] for s in self.store.all() if s["content_hash"] == digest and s["status"] == DONE), None
            )
            now = time.time()
            self.store.update(
                sid, **snapshot.to_row(), duplicate_of=first, started_at=now, **self._scored(earlier, now)
            )
        else:
            self.store.update(sid, **snapshot.to_row(), status=QUEUED)
            with self._wake:
                self._wake.notify_all()
        self.write_mirror()
        return sid

    def _check_quota(self) -> None:
        """Refuse while the agent's workspace and /tmp hold more than the run's quota (:mod:`autorl.grader.quota`)."""
        check_quota(self.config.output_quota, self._workspace.fd, self.config.agent_tmp)

    def prune(self) -> list[int]:
        """Delete the copies the run's keep policy lets go now (:mod:`autorl.grader.keep`): each one's grader
        snapshot and, while unchanged since it was submitted, the agent's folder. The ids pruned."""
        if self.config.keep == "all" or not self.config.keep_while_running:
            return []
        with self._keep_lock:
            return prune_now(self.store, self.store_dir, self._output.fd, self.config.keep, self.config.test_each)

    def _check_capacity(self) -> None:
        """Refuse before copying when a limit is already reached (the insert checks again, atomically)."""
        counts = self.store.counts()
        if sum(counts.values()) >= self.config.max_submissions:
            raise LimitReached(f"the run's limit of {self.config.max_submissions} submissions is reached")
        if sum(counts.get(status, 0) for status in WAITING) >= self.config.max_queue:
            raise QueueFull(f"{self.config.max_queue} submissions are already waiting; try again later")

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

    def _loop(self, slot: int) -> None:
        # each slot warms its engine up before it takes a submission (slot 0 after the baseline, which the agent
        # waits for): a submission sent meanwhile waits in the queue and then finds the engine loaded
        warm = self.config.warm_up and self.config.base_model is not None and not self.closed
        while not self._stop.is_set():
            if slot == 0 and self._needs_baseline():
                self._run_baseline(slot)
                continue
            if warm:
                warm = False
                self._slots[slot].warm_up()
                continue
            sub = self.store.claim_next()
            if sub is None:
                if slot == 0 and self._test_next():
                    continue
                with self._wake:
                    self._wake.wait(timeout=0.5)
                continue
            self._evaluate_submission(sub, slot)

    def _evaluate_submission(self, sub: SubmissionRow, slot: int) -> None:
        sid = int(sub["id"])
        try:
            snapshot = Snapshot.from_row(sub)
            record = self._slots[slot].run(snapshot, "dev", f"sub{sid}")
        except (EvalFailed, ValueError) as exc:
            if self._stop.is_set():  # abandoned, not failed: the next grader on this store queues it again
                return
            self.store.update(
                sid, status=FAILED, error=str(exc), finished_at=time.time(), infra_failure=getattr(exc, "harness", None)
            )
        else:
            self.store.put_evaluation(snapshot.digest, "dev", record)
            self.store.update(sid, **self._scored(record, time.time()))
        self.write_mirror()
        self.prune()

    # -- baseline -----------------------------------------------------------------------------------
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

    # -- what the agent and the orchestrator see (read only) --------------------------------------------
    def status(self, sid: int) -> str:
        """One submission's status: a single-row read, for a request that waits on it."""
        status = self.store.status(sid)
        if status is None:
            raise NotFound(f"no submission {sid}")
        return status

    def submission(self, sid: int) -> SubmissionRecord:
        """The agent's record of one submission."""
        sub = self.store.get(sid)
        if sub is None:
            raise NotFound(f"no submission {sid}")
        subs = self.store.all()
        return records.public(sub, baseline=self.store.baseline("dev"), best=records.best(subs), total=len(subs))

    def submissions(self) -> list[SubmissionRecord]:
        """The agent's records of every submission."""
        return records.public_all(self.store.all(), self.store.baseline("dev"))

    def state(self) -> GraderState:
        """Everything the orchestrator collects at the end of a run."""
        return records.state(
            task=self.config.task,
            baseline=self.store.baseline("dev"),
            baseline_error=self.baseline_error,
            submissions=self.store.all(),
            tests=self.store.test_scores(),
            counts=self.store.counts(),
            refusals=self.store.refusals(),
            closed=self.closed,
        )

    def write_mirror(self) -> None:
        """A read-only ``scores.json`` in the workspace with the agent's records; nothing reads it back."""
        # one writer at a time, each reading the store inside the lock: the last write is the newest state
        with self._mirror_lock:
            write_mirror(self._workspace, json.dumps(self.submissions(), indent=2).encode())
