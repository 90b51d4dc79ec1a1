"""Both ends of an evaluation job, seen from the grader: what a job holds, the slot that runs it, its failure.

A slot is one place evaluations run (one per entry of ``GraderConfig.workers``, e.g. one GPU). Today a slot
starts a fresh ``python -m autorl.grader.worker JOB.json`` process for every job, in its own process group,
so that a crash, an out-of-memory kill or a hang fails that one evaluation and the grader keeps serving.
The worker's end of the job file is :mod:`autorl.grader.worker`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.evaluation.run import write_json_atomic

if TYPE_CHECKING:
    from autorl.grader.config import GraderConfig


class EvalFailed(Exception):
    """One evaluation failed (worker crashed, timed out or reported an error); the reason is the message."""


def build_job(config: GraderConfig, store_dir: Path, model_dir: Path, split: str, tag: str, *,
              cache: bool = False) -> dict[str, Any]:
    """The job a worker runs: everything it needs to evaluate ``model_dir`` on ``split``."""
    jobs = store_dir / "jobs"
    return {
        "task": config.task,
        "benchmark_options": config.benchmark_options,
        "backend": config.backend,
        "backend_options": config.backend_options,
        "model_dir": str(model_dir),
        "base_model_dir": config.base_model,
        "split": split,
        "hidden_dir": config.hidden_dir,
        "limit": config.limit,
        "per_item_path": str(store_dir / "items" / f"{tag}-{split}.jsonl"),
        "result_path": str(jobs / f"{tag}-{split}.result.json"),
        "cache_dir": config.baseline_cache_dir if cache else None,
    }


class EvalSlot:
    """One evaluation slot: runs one job at a time (a lock serialises callers) in a worker process."""

    def __init__(self, config: GraderConfig, store_dir: Path, index: int = 0, env: dict[str, str] | None = None) -> None:
        self.config = config
        self.store_dir = store_dir
        self.index = index
        self.env = dict(env or {})
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False

    def run(self, model_dir: Path, split: str, tag: str, *, cache: bool = False) -> dict[str, Any]:
        """Evaluate ``model_dir`` on ``split``; the evaluation record, or :class:`EvalFailed`."""
        with self._lock:
            if self._closed:
                raise EvalFailed("the grader is stopping")
            return self._run_fresh(build_job(self.config, self.store_dir, model_dir, split, tag, cache=cache), tag, split)

    def close(self) -> None:
        """Stop the slot: a job in flight is killed (its caller gets :class:`EvalFailed`)."""
        self._closed = True
        proc = self._proc
        if proc is not None:
            kill_group(proc)

    def _run_fresh(self, job: dict[str, Any], tag: str, split: str) -> dict[str, Any]:
        jobs = self.store_dir / "jobs"
        jobs.mkdir(exist_ok=True)
        result_path = Path(job["result_path"])
        job_path = jobs / f"{tag}-{split}.job.json"
        write_json_atomic(job_path, job)
        result_path.unlink(missing_ok=True)
        log_path = self.store_dir / "logs" / f"{tag}-{split}.log"
        log_path.parent.mkdir(exist_ok=True)
        timeout = self.config.eval_timeout
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                [self.config.python, "-m", "autorl.grader.worker", str(job_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env},
                start_new_session=True,
            )
            self._proc = proc
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                raise EvalFailed(f"evaluation timed out after {timeout:.0f} s") from None
            finally:
                self._proc = None
        if result_path.is_file():
            result = json.loads(result_path.read_text())
            if result.get("ok"):
                return dict(result["record"])
            raise EvalFailed(str(result.get("error", "evaluation failed")))
        if code < 0:
            name = signal.Signals(-code).name
            hint = " (out of memory?)" if -code == signal.SIGKILL else ""
            raise EvalFailed(f"evaluation worker was killed by {name}{hint}")
        tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise EvalFailed(f"evaluation worker exited with code {code}: {tail[0][:300]}")


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group ``proc`` leads and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
