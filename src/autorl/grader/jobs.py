"""Both ends of an evaluation job, seen from the grader: what a job holds, the slot that runs it, its failure.

A slot is one place evaluations run (one per entry of ``GraderConfig.workers``, e.g. one GPU). It owns one
long-lived worker process (``python -m autorl.grader.worker --serve``, in its own process group) that keeps
its engine loaded between jobs, so that a submission costs its generation time rather than an engine start.
Jobs go to it over a private pipe as length-prefixed JSON frames, each with a fresh nonce; an answer is
accepted only from that pipe and with that nonce. Isolation is kept: a worker that crashes, is killed (out of
memory) or hangs past the timeout is killed with its whole process group and replaced, and that job is tried
once more on a fresh worker before it fails with the reason. A job the worker reports as failed (a checkpoint
that does not load, say) fails at once, and that worker is replaced too: its engine is not trusted again.
A backend that starts one engine per process (vllm with its engine core in-process) has the worker ask for a
fresh process instead of a second engine (the job then runs on a fresh worker, not counted as a failure), or
end after its answer when it frees its engine between jobs. The worker's end is :mod:`autorl.grader.worker`.

A slot warms up when the grader starts (:meth:`EvalSlot.warm_up`): its worker loads the run's base model and
lets the engine idle, so that the first submission finds it warm whether the baseline was scored now or read
from the cache. A warm-up that fails or outlasts its timeout costs nothing but itself: its worker is replaced,
the first submission loads the engine as it would have without one, and its record and the slot's log say why.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.grader.snapshot import Snapshot
from autorl.grader.worker import MAX_FRAME, build_job, encode_frame, evaluated_dir, job_base_model, write_all
from autorl.inference.failures import same_shape
from autorl.procs.group import kill_group
from autorl.procs.lease import PARENT_ENV

if TYPE_CHECKING:
    from autorl.grader.config import GraderConfig
    from autorl.grader.schema import EvalJob, EvalRecord, WarmUp


class EvalFailed(Exception):
    """One evaluation failed (worker crashed, timed out or reported an error); the reason is the message.

    ``harness`` names the cause when the failure is the harness's, not the checkpoint's
    (:mod:`autorl.inference.failures`): such an evaluation is retried, and recorded as an infrastructure failure
    when it still fails.
    """

    def __init__(self, message: str, harness: str | None = None) -> None:
        super().__init__(message)
        self.harness = harness


class _Restart(Exception):
    """The worker cannot start another engine in its process: run the job on a fresh worker (the message: why a
    fresh engine was needed)."""


class _WorkerLost(Exception):
    """The worker died, hung or broke the protocol: replace it, and the job may be tried again."""


class _Worker:
    """One worker process and the two pipe ends the slot holds."""

    def __init__(self, python: str, env: dict[str, str], log_path: Path) -> None:
        job_r, job_w = os.pipe()
        ans_r, ans_w = os.pipe()
        log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            with log_path.open("ab") as log:
                self.proc = subprocess.Popen(
                    [python, "-m", "autorl.grader.worker", "--serve", str(job_r), str(ans_w)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, **env, PARENT_ENV: str(os.getpid())},
                    start_new_session=True,
                    pass_fds=(job_r, ans_w),
                )
        finally:
            os.close(job_r)
            os.close(ans_w)
        self.jobs = job_w
        self.answers = ans_r
        self.stopped = False

    def send(self, frame: bytes) -> None:
        try:
            write_all(self.jobs, frame)
        except OSError as exc:  # the worker is gone
            raise _WorkerLost(self.death()) from exc

    def receive(self, deadline: float) -> bytes:
        """One answer frame's body; :class:`_WorkerLost` when the worker dies, hangs past ``deadline`` or
        sends something that is not a frame."""
        head = self._read(4, deadline)
        size = int.from_bytes(head, "big")
        if size > MAX_FRAME:
            raise _WorkerLost(f"the evaluation worker sent a frame of {size} bytes")
        return self._read(size, deadline)

    def _read(self, n: int, deadline: float) -> bytes:
        chunks: list[bytes] = []
        while n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.answers], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self.answers, min(n, 1 << 20))
            if not chunk:
                raise _WorkerLost(self.death())
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def death(self) -> str:
        """Why the worker ended, once it has (waits a moment for its exit status)."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "evaluation worker closed its pipe but did not exit"
        if code < 0:
            name = signal.Signals(-code).name
            hint = " (out of memory?)" if -code == signal.SIGKILL else ""
            return f"evaluation worker was killed by {name}{hint}"
        return f"evaluation worker exited with code {code}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 0.0) -> None:
        """Close the job pipe (a clean end for the worker's loop), wait up to ``grace``, then kill the group."""
        if self.stopped:
            return
        self.stopped = True
        with contextlib.suppress(OSError):
            os.close(self.jobs)
        if grace:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
        kill_group(self.proc.pid)  # also what it started (an engine process) if it exited by itself
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        with contextlib.suppress(OSError):
            os.close(self.answers)


class EvalSlot:
    """One evaluation slot: runs one job at a time (a lock serialises callers) in its warm worker process.

    Each record's ``engine`` says how the model got into the engine (``fresh``, ``reused``, ``reloaded``) and
    ``extra.worker`` which worker ran it and whether the job had to be retried on a fresh one.
    """

    def __init__(
        self, config: GraderConfig, store_dir: Path, index: int = 0, env: dict[str, str] | None = None
    ) -> None:
        self.config = config
        self.store_dir = store_dir
        self.index = index
        self.env = dict(env or {})
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._workers_started = 0
        self._retiring = False  # the worker said it ends after its answer: the next job starts a fresh one
        self._closed = False
        #: why the worker this slot had was found dead between jobs (recorded with the next job)
        self._replaced_after: str | None = None
        #: what the warm-up did or why it failed (recorded with the next job)
        self._warmed: WarmUp | None = None

    @property
    def worker_pid(self) -> int | None:
        """The process id of the current worker (``None`` before the first job, or after a failure)."""
        worker = self._worker
        return worker.proc.pid if worker is not None else None

    def run(self, snapshot: Snapshot | None, split: str, tag: str) -> EvalRecord:
        """Evaluate a submission's ``snapshot`` (``None``: the run's base model, from the cross-run cache when its
        key matches) on ``split``, its files named ``tag``; the evaluation record, or :class:`EvalFailed`."""
        with self._lock:
            if self._closed:
                raise EvalFailed("the grader is stopping")
            job = build_job(
                self.config, self.store_dir, snapshot, split, tag, self.store_dir / "engines" / f"slot{self.index}"
            )
            lost: str | None = None
            restarted: str | bool = False
            harness: list[str] = []  # the harness's failures so far, each retried after a pause
            while True:
                try:
                    try:
                        record: EvalRecord = self._run_once(job)
                    except _WorkerLost as exc:
                        self._replace()
                        if self._closed:
                            raise EvalFailed("the grader is stopping") from None
                        if lost is None:
                            lost = str(exc)
                            continue
                        # lost twice: the machine's doing for a model of the base's shapes, else the checkpoint's
                        raise EvalFailed(
                            f"{exc} (also on a fresh worker, after: {lost})",
                            "the evaluation worker was lost twice" if self._base_shaped(job) else None,
                        ) from None
                except _Restart as exc:
                    if restarted:
                        raise EvalFailed("a fresh evaluation worker asked for a fresh process") from None
                    restarted = str(exc) or True
                    continue
                except EvalFailed as exc:
                    if exc.harness is None or self._closed:
                        raise
                    harness.append(f"{exc.harness}: {exc}"[:300])
                    if len(harness) > self.config.harness_retries:
                        raise EvalFailed(
                            f"{exc} (the harness's failure: {exc.harness}; tried {len(harness)} times)", exc.harness
                        ) from None
                    pause = self.config.harness_backoff_s * len(harness)
                    self._log(f"{tag}-{split}: the harness failed ({exc.harness}); trying again in {pause:.0f} s")
                    if not self._pause(pause):
                        raise EvalFailed("the grader is stopping") from None
                    lost = None
                    continue
                record.setdefault("extra", {})["worker"] = {
                    "slot": self.index,
                    "pid": self.worker_pid,
                    "started": self._workers_started,
                    **({"retried_after": lost} if lost else {}),
                    **({"harness_retries": harness} if harness else {}),
                    **({"fresh_process": restarted} if restarted else {}),
                    **({"replaced_after": self._replaced_after} if self._replaced_after else {}),
                    **({"warm_up": self._warmed} if self._warmed else {}),
                }
                self._replaced_after = self._warmed = None
                return record

    def _base_shaped(self, job: EvalJob) -> bool:
        try:
            return same_shape(evaluated_dir(job), job_base_model(job))
        except (OSError, ValueError):
            return False

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` unless the slot closes meanwhile; whether it is still open."""
        end = time.monotonic() + seconds
        while not self._closed and time.monotonic() < end:
            time.sleep(min(0.2, max(0.0, end - time.monotonic())))
        return not self._closed

    def warm_up(self) -> WarmUp:
        """Start this slot's worker and load the run's base model into its engine (asleep where the backend sleeps
        between evaluations), ahead of the first submission, which waits on the slot's lock meanwhile. Never
        raises: a failure (within ``warmup_timeout``) replaces the worker and is returned, logged and recorded
        with the next evaluation, which then loads the engine itself."""
        started = time.time()
        with self._lock:
            if self._closed:
                return {"error": "the grader is stopping"}
            job: EvalJob = {
                "warm_up": True,
                **build_job(
                    self.config, self.store_dir, None, "dev", "warmup", self.store_dir / "engines" / f"slot{self.index}"
                ),
            }
            job["log_path"] = str(self.store_dir / "logs" / f"warmup-slot{self.index}.log")
            timeout = min(self.config.warmup_timeout, self.config.eval_timeout)
            try:
                info: WarmUp = self._run_once(job, timeout, "warm-up")
            except (_Restart, _WorkerLost, EvalFailed) as exc:
                self._replace()
                stopping = "the grader is stopping" if self._closed else None
                info = {"error": stopping or str(exc) or "the worker asked for a fresh process"}
            info["took_s"] = round(time.time() - started, 3)
            info["finished_at"] = time.time()
            self._warmed = info
        if "error" in info:
            said = f"warm-up failed ({info['error']}); the first evaluation loads the engine itself"
        elif "skipped" in info:
            said = f"warm-up not needed: {info['skipped']}"
        else:
            said = f"warm-up: engine {info.get('engine')} in {info.get('load_s')} s, asleep: {info.get('sleep_s') is not None}"
        self._log(said)
        return info

    def _log(self, line: str) -> None:
        log = self.store_dir / "workers" / f"slot{self.index}.log"
        with contextlib.suppress(OSError), log.open("a") as f:
            f.write(f"autorl grader: slot {self.index}: {line}\n")

    def close(self) -> None:
        """Stop the slot: a job in flight is killed (its caller gets :class:`EvalFailed`)."""
        self._closed = True
        worker = self._worker
        if worker is not None:
            worker.stop(grace=0.0 if self._lock.locked() else 10.0)

    def _run_once(self, job: EvalJob, timeout: float | None = None, what: str = "evaluation") -> Any:
        """Send ``job`` to the worker and return the record it answers: a JSON object (checked here), an
        :class:`~autorl.grader.schema.EvalRecord` for an evaluation and a :class:`~autorl.grader.schema.WarmUp`
        for a warm-up (the caller's to name); its failures as :class:`EvalFailed`, ``_Restart`` or ``_WorkerLost``."""
        if self._worker is not None and (self._retiring or not self._worker.alive()):
            if not self._retiring:  # died while idle (not this job's fault): the record and the log say why
                self._replaced_after = self._worker.death()
                self._log(f"{self._replaced_after} while idle; replaced")
            self._replace()  # it ended after its last answer, or died while idle
        if self._worker is None:
            logs = self.store_dir / "workers"
            self._worker = _Worker(self.config.python, self.env, logs / f"slot{self.index}.log")
            self._workers_started += 1
        worker = self._worker
        nonce = secrets.token_hex(16)
        timeout = self.config.eval_timeout if timeout is None else timeout
        worker.send(encode_frame({**job, "nonce": nonce}))
        try:
            raw = worker.receive(time.monotonic() + timeout)
        except TimeoutError:
            raise _WorkerLost(f"{what} timed out after {timeout:.0f} s") from None
        try:
            answer = json.loads(raw)
        except ValueError:
            raise _WorkerLost("the evaluation worker sent an unreadable answer") from None
        if not isinstance(answer, dict) or answer.get("nonce") != nonce:
            raise _WorkerLost("the evaluation worker answered another job")
        if answer.get("ok") and isinstance(answer.get("record"), dict):
            self._retiring = answer.get("retiring") is True
            return answer["record"]
        self._replace()
        if answer.get("restart") is True:
            raise _Restart(str(answer.get("error") or ""))
        harness = answer.get("harness")
        raise EvalFailed(str(answer.get("error", "evaluation failed")), harness if isinstance(harness, str) else None)

    def _replace(self) -> None:
        """Kill the current worker (and everything in its process group); the next job starts a fresh one."""
        worker, self._worker = self._worker, None
        self._retiring = False
        if worker is not None:
            worker.stop()
