"""The grader's logic, apart from HTTP: accept, snapshot, queue, evaluate in worker processes, report."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autorl.errors import AutorlError, GraderError, UsageError
from autorl.evaluation.stats import paired_compare
from autorl.grader.config import GraderConfig
from autorl.grader.jobs import EvalFailed, EvalSlot
from autorl.grader.snapshot import PinnedDir, Snapshot, open_submission, take_snapshot
from autorl.grader.store import DONE, FAILED, QUEUED, WAITING, Store
from autorl.grader.validation import (
    Checkpoint,
    Limits,
    PathRefused,
    refusal_kind,
    submission_parts,
    validate_checkpoint,
)


class RunClosed(AutorlError):
    """The run no longer takes submissions (HTTP 409)."""


class LimitReached(AutorlError):
    """The run's submission limit is reached (HTTP 429)."""


class QueueFull(AutorlError):
    """Too many submissions are waiting (HTTP 503)."""


class NotFound(AutorlError):
    """No such submission (HTTP 404)."""


class Grader:
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

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        for slot in range(len(self._slots)):
            t = threading.Thread(target=self._loop, args=(slot,), name=f"grader-slot-{slot}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
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
        value = self.store.get_meta("deadline", self.config.deadline)
        return None if value is None else float(value)

    def set_deadline(self, deadline: float) -> None:
        self.store.set_meta("deadline", float(deadline))

    @property
    def closed(self) -> bool:
        if self.store.get_meta("closed", False):
            return True
        deadline = self.deadline
        return deadline is not None and time.time() > deadline

    def close(self) -> None:
        self.store.set_meta("closed", True)

    def time_info(self) -> dict[str, Any]:
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
            snap, checkpoint = self._intake(raw_path, incoming, before_copy)
        except AutorlError as exc:
            self.store.add_refusal(str(raw_path), str(exc), refusal_kind(exc))
            raise
        try:
            sid = self.store.add_submission(
                str(raw_path), max_total=self.config.max_submissions, max_queued=self.config.max_queue
            )
        except LookupError as exc:
            shutil.rmtree(incoming, ignore_errors=True)
            if exc.args[0] == "total":
                raise LimitReached(f"the run's limit of {self.config.max_submissions} submissions is reached") from None
            raise QueueFull(f"{self.config.max_queue} submissions are already waiting; try again later") from None
        snap_path = self._snapshots / str(sid)
        try:
            if snap_path.exists():  # left by a store that lost its database rows; ids are never reused
                shutil.rmtree(snap_path)
            incoming.rename(snap_path)
        except OSError as exc:
            shutil.rmtree(incoming, ignore_errors=True)
            self.store.update(sid, status=FAILED, error=f"could not store the snapshot: {exc}", finished_at=time.time())
            raise GraderError(f"could not store the snapshot: {exc}") from None
        digest = snap.content_hash
        earlier = self.store.evaluation(digest, "dev")
        if earlier is not None:
            first = next(
                (s["id"] for s in self.store.all() if s["content_hash"] == digest and s["status"] == DONE), None
            )
            self.store.update(
                sid,
                snapshot=str(snap_path),
                content_hash=digest,
                kind=checkpoint.kind,
                status=DONE,
                score=earlier["score"],
                record=_summary(earlier),
                duplicate_of=first,
                started_at=time.time(),
                finished_at=time.time(),
            )
        else:
            self.store.update(sid, snapshot=str(snap_path), content_hash=digest, kind=checkpoint.kind, status=QUEUED)
            with self._wake:
                self._wake.notify_all()
        self.write_mirror()
        return sid

    def _check_capacity(self) -> None:
        """Refuse before copying when a limit is already reached (the insert checks again, atomically)."""
        counts = self.store.counts()
        if sum(counts.values()) >= self.config.max_submissions:
            raise LimitReached(f"the run's limit of {self.config.max_submissions} submissions is reached")
        if sum(counts.get(status, 0) for status in WAITING) >= self.config.max_queue:
            raise QueueFull(f"{self.config.max_queue} submissions are already waiting; try again later")

    def _intake(
        self, raw_path: Any, incoming: Path, before_copy: Callable[[str], None] | None
    ) -> tuple[Snapshot, Checkpoint]:
        """The submission copied by descriptor from the pinned output directory, then validated as copied."""
        replaced = self._output.replaced_by()
        if replaced == "a link":
            raise PathRefused(f"the output directory {self.output_dir} was replaced by a link after the run started; "
                              "the grader reads only the original directory")
        parts = submission_parts(raw_path, str(self.workspace), self._output.aliases)
        try:
            try:
                fd = open_submission(self._output, parts)
            except UsageError as exc:
                if replaced is None or isinstance(exc, PathRefused):
                    raise
                raise UsageError(f"{exc} (the output directory was replaced by {replaced} after the run started; "
                                 "the grader reads only the original one: write checkpoints inside it)") from None
            try:
                snap = take_snapshot(fd, incoming, self.limits, before_copy=before_copy)
            finally:
                os.close(fd)
        except OSError as exc:
            shutil.rmtree(incoming, ignore_errors=True)
            raise GraderError(f"could not copy the checkpoint: {exc.strerror or exc}") from None
        try:
            checkpoint = validate_checkpoint(snap.path, snap.files)
        except BaseException:
            shutil.rmtree(incoming, ignore_errors=True)
            raise
        return snap, checkpoint

    def _loop(self, slot: int) -> None:
        while not self._stop.is_set():
            if slot == 0 and self._needs_baseline():
                self._run_baseline(slot)
                continue
            sub = self.store.claim_next()
            if sub is None:
                with self._wake:
                    self._wake.wait(timeout=0.5)
                continue
            self._evaluate_submission(sub, slot)

    def _evaluate_submission(self, sub: dict[str, Any], slot: int) -> None:
        sid = int(sub["id"])
        try:
            record = self.run_eval(Path(str(sub["snapshot"])), "dev", f"sub{sid}", slot)
        except EvalFailed as exc:
            self.store.update(sid, status=FAILED, error=str(exc), finished_at=time.time())
        else:
            self.store.put_evaluation(sub["content_hash"], "dev", record)
            self.store.update(sid, status=DONE, score=record["score"], record=_summary(record), finished_at=time.time())
        self.write_mirror()

    # -- evaluations in the slots ----------------------------------------------------------------------
    def run_eval(self, model_dir: Path, split: str, tag: str, slot: int = 0, cache: bool = False) -> dict[str, Any]:
        return self._slots[slot].run(model_dir, split, tag, cache=cache)

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
        self.write_mirror()

    def baseline_record(self, split: str, slot: int = 0) -> dict[str, Any]:
        """The base model's evaluation on ``split``, from the cross-run cache when its key matches."""
        assert self.config.base_model is not None
        return self.run_eval(Path(self.config.base_model), split, "baseline", slot, cache=True)

    def set_baseline(self, score: float) -> None:
        self.store.set_baseline("dev", float(score), None, "set")
        self.write_mirror()

    def wait_baseline(self, timeout: float) -> dict[str, Any] | None:
        end = time.time() + timeout
        while time.time() < end:
            base = self.store.baseline("dev")
            if base is not None or self.baseline_error or not self._threads:
                return base
            time.sleep(0.1)
        return self.store.baseline("dev")

    # -- reporting ----------------------------------------------------------------------------------
    def best(self) -> dict[str, Any] | None:
        done = [s for s in self.store.all() if s["status"] == DONE and s["score"] is not None]
        if not done:
            return None
        top = max(done, key=lambda s: (s["score"], -s["id"]))
        return {"submission_id": top["id"], "score": top["score"]}

    def comparison(self, sub: dict[str, Any], split: str = "dev") -> dict[str, Any] | None:
        base = self.store.baseline(split)
        if base is None or not base.get("record") or sub.get("content_hash") is None:
            return None
        full = self.store.evaluation(sub["content_hash"], split)
        if full is None:
            return None
        try:
            return paired_compare(*paired_scores(base["record"], full)).to_dict()
        except ValueError:
            return None

    def public(self, sub: dict[str, Any], *, total: int | None = None) -> dict[str, Any]:
        """The record the agent sees (dev split only; never item-level results)."""
        base = self.store.baseline("dev")
        rec = sub.get("record") or {}
        out: dict[str, Any] = {
            "submission_id": sub["id"],
            "status": sub["status"],
            "model_path": sub["model_path"],
            "kind": sub["kind"],
            "split": "dev",
            "score": sub["score"],
            "n": rec.get("n"),
            "stderr": rec.get("stderr"),
            "ci95": rec.get("ci95"),
            "baseline_score": base["score"] if base else None,
            "improvement": None,
            "improvement_ci95": None,
            "p_value": None,
            "best": self.best(),
            "total_submissions": total if total is not None else len(self.store.all()),
            "error": sub["error"],
            "duplicate_of": sub["duplicate_of"],
            "content_hash": sub["content_hash"],
            "config_hash": rec.get("config_hash"),
            # the evaluator's aggregate figures (success rate, length-controlled win rate, judge cost, ...)
            "extra": {k: v for k, v in (rec.get("extra") or {}).items() if k not in ("ci_method", "single_split")},
            "created_at": sub["created_at"],
            "finished_at": sub["finished_at"],
        }
        if sub["status"] == DONE and base is not None and sub["score"] is not None:
            out["improvement"] = sub["score"] - base["score"]
            if sub.get("comparison") is None:
                comp = self.comparison(sub)
                if comp is not None:
                    self.store.update(sub["id"], comparison=comp)
                    sub["comparison"] = comp
            comp = sub.get("comparison")
            if comp:
                out["improvement_ci95"] = comp["ci95"]
                out["p_value"] = comp["p_value"]
        return out

    def submission(self, sid: int) -> dict[str, Any]:
        sub = self.store.get(sid)
        if sub is None:
            raise NotFound(f"no submission {sid}")
        return self.public(sub)

    def submissions(self) -> list[dict[str, Any]]:
        subs = self.store.all()
        return [self.public(s, total=len(subs)) for s in subs]

    def wait(self, sid: int, timeout: float | None = None) -> dict[str, Any]:
        end = None if timeout is None else time.time() + timeout
        while True:
            sub = self.store.get(sid)
            if sub is None:
                raise NotFound(f"no submission {sid}")
            if sub["status"] in (DONE, FAILED) or (end is not None and time.time() > end):
                return self.public(sub)
            time.sleep(0.1)

    def write_mirror(self) -> None:
        """A read-only scores.json in the workspace, for the agent's convenience; nothing reads it back.

        Written into the pinned workspace directory under a fresh unpredictable name (``O_EXCL``, no link
        followed), then renamed over ``scores.json``: a link the agent plants there is replaced, never followed.
        """
        # one writer at a time, each reading the store inside the lock: the last write is the newest state
        with self._mirror_lock:
            data = json.dumps(self.submissions(), indent=2).encode()
            ws = self._workspace.fd
            tmp = f".scores.json.{secrets.token_hex(8)}.tmp"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444,
                             dir_fd=ws)
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                finally:
                    os.close(fd)
                os.rename(tmp, "scores.json", src_dir_fd=ws, dst_dir_fd=ws)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=ws)

    # -- final test evaluation ------------------------------------------------------------------------
    def evaluate_test(self, sid: int | None = None) -> dict[str, Any]:
        """Score one submission (default: best on dev) on the hidden test split, once."""
        if sid is None:
            best = self.best()
            if best is None:
                raise NotFound("no finished submission to evaluate on the test split")
            sid = int(best["submission_id"])
        sub = self.store.get(sid)
        if sub is None:
            raise NotFound(f"no submission {sid}")
        if sub["status"] != DONE:
            raise GraderError(f"submission {sid} is {sub['status']}, not done", status=409)
        if not self.store.claim_test(sid):
            existing = self.store.test_score(sid)
            assert existing is not None
            return self._public_test(existing)
        try:
            record = self.run_eval(Path(str(sub["snapshot"])), "test", f"sub{sid}")
            comparison = None
            base_score = None
            if self.config.base_model:
                base = self.store.baseline("test")
                if base is None:
                    rec = self.baseline_record("test")
                    self.store.set_baseline("test", rec["score"], rec, "evaluated")
                    base = self.store.baseline("test")
                assert base is not None
                base_score = base["score"]
                comparison = paired_compare(*paired_scores(base["record"], record)).to_dict()
        except EvalFailed as exc:
            self.store.finish_test(sid, status=FAILED, error=str(exc))
        else:
            summary = _summary(record)
            summary["baseline_score"] = base_score
            self.store.finish_test(sid, status=DONE, score=record["score"], record=summary, comparison=comparison)
        result = self.store.test_score(sid)
        assert result is not None
        return self._public_test(result)

    def _public_test(self, row: dict[str, Any]) -> dict[str, Any]:
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
            "config_hash": rec.get("config_hash"),
            "extra": {k: v for k, v in (rec.get("extra") or {}).items() if k not in ("ci_method", "single_split")},
        }

    def state(self) -> dict[str, Any]:
        """Everything the orchestrator collects at the end of a run."""
        base = self.store.baseline("dev")
        return {
            "task": self.config.task,
            "baseline": _summary(base["record"]) if base and base.get("record") else base,
            "baseline_score": base["score"] if base else None,
            "baseline_error": self.baseline_error,
            "submissions": self.submissions(),
            "best": self.best(),
            "test": [self._public_test(t) for t in self.store.test_scores()],
            "counts": self.store.counts(),
            "refusals": self.store.refusals(),
            "closed": self.closed,
        }


def paired_scores(baseline: dict[str, Any], record: dict[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
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


def _summary(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "item_scores"}



