"""The worker's end of an evaluation job: a long-lived loop per grader slot.

``python -m autorl.grader.worker --serve IN_FD OUT_FD`` (what :class:`autorl.grader.jobs.EvalSlot` starts):
jobs arrive as length-prefixed JSON frames on ``IN_FD``; each answer goes back on ``OUT_FD`` carrying the
job's nonce. A job names a submission's :class:`~autorl.grader.snapshot.Snapshot` (or none: the run's base
model). The backend stays loaded between jobs (``Backend.acquire``: reused, reloaded in place, or loaded
afresh) and sleeps between them when its options say so. A warm-up job (``"warm_up": true``) loads the base
model's engine before any submission and lets it idle as between two jobs (:func:`warm_up`). Each job's output
goes to its own log file. After a failed job the worker exits (its engine is not trusted again); a crash or a
hang is the slot's to handle.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from autorl.evaluation.identity import config_hash, model_hash, stable_hash
from autorl.evaluation.run import evaluate_model
from autorl.grader.items import per_item_path
from autorl.grader.snapshot import Snapshot
from autorl.grader.validation import LORA, describe
from autorl.inference.base import EngineRestart
from autorl.inference.failures import harness_failure, same_shape
from autorl.inference.gpu_share import gpu_turn
from autorl.jsonio import write_json_atomic

if TYPE_CHECKING:
    from autorl.grader.config import GraderConfig
    from autorl.grader.schema import EvalJob, EvalRecord, WarmUp, WorkerAnswer
    from autorl.inference.base import Backend

#: frames above this are refused by both ends (a record with per-item scores of a large split is far below)
MAX_FRAME = 256 * 2**20
_HEADER = struct.Struct(">I")


def encode_frame(data: EvalJob | WorkerAnswer) -> bytes:
    body = json.dumps(data, default=str).encode()
    return _HEADER.pack(len(body)) + body


def write_all(fd: int, data: bytes) -> None:
    """Write every byte (a pipe takes at most its buffer's worth per call)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_frame(fd: int, data: WorkerAnswer) -> None:
    write_all(fd, encode_frame(data))


def read_frame(stream: BinaryIO) -> EvalJob | None:
    """The next job the grader sent (a frame holding a JSON object), or ``None`` at a clean end of the stream."""
    head = stream.read(_HEADER.size)
    if not head:
        return None
    if len(head) < _HEADER.size:
        raise EOFError("truncated frame header")
    (size,) = _HEADER.unpack(head)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes refused")
    body = stream.read(size)
    if len(body) < size:
        raise EOFError("truncated frame")
    job: EvalJob = json.loads(body)  # written by the grader's slot (autorl.grader.jobs), this worker's parent
    if not isinstance(job, dict):
        raise ValueError("a frame must hold a JSON object")
    return job


def build_job(
    config: GraderConfig, store_dir: Path, snapshot: Snapshot | None, split: str, tag: str, scratch_dir: Path
) -> EvalJob:
    """The job a worker runs: everything it needs to evaluate ``snapshot`` (None: the run's base model, whose
    record is cached across runs) on ``split``, with ``scratch_dir`` for its backend's files."""
    return {
        "task": config.task,
        "benchmark_options": config.benchmark_options,
        "backend": config.backend,
        "backend_options": config.backend_options,
        "snapshot": snapshot.to_row() if snapshot is not None else None,
        "base_model_dir": config.base_model,
        "split": split,
        "hidden_dir": config.hidden_dir,
        "limit": config.limit,
        "per_item_path": str(per_item_path(store_dir, tag, split)),
        "log_path": str(store_dir / "logs" / f"{tag}-{split}.log"),
        "cache_dir": config.baseline_cache_dir if snapshot is None else None,
        "scratch_dir": str(scratch_dir),
    }


def _backend_key(job: EvalJob) -> str:
    return json.dumps([job["backend"], job.get("backend_options") or {}], sort_keys=True, default=str)


def job_base_model(job: EvalJob) -> Path | None:
    """The run's base model of a job (``None``: the run has none)."""
    base = job.get("base_model_dir")
    return Path(base) if base else None


def model_dirs(job: EvalJob) -> tuple[Path, Path | None]:
    """The folder to evaluate and the base model to apply it to: a submission's snapshot (the base only under a
    LoRA adapter), or the base model itself."""
    base = job_base_model(job)
    snapshot_row = job.get("snapshot")
    if snapshot_row is None:
        if base is None:
            raise ValueError("a job without a snapshot evaluates the base model, and names none")
        return base, None
    snapshot = Snapshot.from_row(snapshot_row)
    return snapshot.path, base if snapshot.kind == LORA else None


def evaluated_dir(job: EvalJob) -> Path | None:
    """The folder a job evaluates: a submission's snapshot, or ``None`` for the run's base model."""
    snapshot = job.get("snapshot")
    return Snapshot.from_row(snapshot).path if snapshot is not None else None


def harness_blame(job: EvalJob, exc: BaseException) -> str | None:
    """Why a job's failure is the harness's, not the checkpoint's (:mod:`autorl.inference.failures`): a cause of
    the machine's, for the base model or a checkpoint of its shapes; ``None``: the checkpoint's."""
    cause = harness_failure(exc)
    if cause is None:
        return None
    try:
        fits = same_shape(evaluated_dir(job), job_base_model(job))
    except (OSError, ValueError, KeyError):
        fits = False
    return cause if fits else None


def run_job(job: EvalJob, backend: Backend | None = None) -> EvalRecord:
    """Evaluate one job; its record as a dict. With ``backend`` (a warm worker's) the engine is kept loaded."""
    from autorl.plugins.registry import get_backend, get_benchmark

    benchmark = get_benchmark(job["task"])(job.get("benchmark_options") or {})
    keep = backend is not None
    if backend is None:
        backend = get_backend(job["backend"])(job.get("backend_options") or {})
    model_dir, base_dir = model_dirs(job)
    cache_file = None
    cache_dir = job.get("cache_dir")
    if cache_dir:
        # baselines are reused across runs when benchmark, eval config, backend and model bytes all match
        # (the config hash covers the hidden items themselves: another secret or data version is another key)
        benchmark.prepare_eval_data(Path(job["hidden_dir"]))
        key = stable_hash(
            [
                config_hash(benchmark, job["split"], backend, Path(job["hidden_dir"]), job.get("limit")),
                model_hash(model_dir),
                job.get("limit"),
            ]
        )
        cache_file = Path(cache_dir) / benchmark.name / f"{key}.json"
        if cache_file.is_file():
            cached: EvalRecord = json.loads(cache_file.read_text())  # written below by an earlier run
            cached.setdefault("extra", {})["cached"] = True
            cached["per_item_path"] = _copy_items(_items_beside(cache_file), job.get("per_item_path"))
            return cached
    record = evaluate_model(
        benchmark,
        backend,
        model_dir,
        split=job["split"],
        hidden_dir=Path(job["hidden_dir"]),
        base_model_dir=base_dir,
        limit=job.get("limit"),
        per_item_path=Path(job["per_item_path"]) if job.get("per_item_path") else None,
        keep_loaded=keep,
    )
    if cache_file is not None:
        write_json_atomic(cache_file, record.to_dict())
        _copy_items(record.per_item_path, _items_beside(cache_file))
    return record.to_dict()


def _items_beside(cache_file: Path) -> Path:
    """Where a cached baseline keeps its per-item records: a run that reuses the baseline gets its own copy,
    so that every run's store holds the base model's answers beside its submissions' (``autorl items``)."""
    return cache_file.with_name(f"{cache_file.stem}.items.jsonl")


def _copy_items(src: str | Path | None, dst: str | Path | None) -> str | None:
    """``src`` copied whole to ``dst`` (a temp file renamed into place); ``dst`` once it holds the copy, else None
    (nothing to copy, a cache entry older than its per-item records, or a copy that failed: the score stands
    without its items)."""
    if not src or not dst or not Path(src).is_file():
        return None
    target = Path(dst)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, tmp)
        os.replace(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return None
    return str(target)


def warm_up(job: EvalJob, backend: Backend) -> WarmUp:
    """Load the run's base model into ``backend``'s engine before the first submission and let it idle (asleep
    where its options say so), so that the first evaluation reuses the engine or swaps its weights in rather
    than starting one. What was done, for the slot's log and the next evaluation's record."""
    if not backend.keeps_engine():
        return {"skipped": "the backend keeps no engine between evaluations"}
    if backend.holds_engine():
        return {"skipped": "an engine is loaded already"}
    model_dir, _ = model_dirs({**job, "snapshot": None})
    started = time.monotonic()
    backend.model_dir = model_dir
    if backend.gpu_turn is None:
        backend.gpu_turn = gpu_turn
    engine = backend.acquire(model_dir)
    loaded = time.monotonic()
    backend.last_sleep_s = None
    backend.idle()
    return {
        "engine": engine,
        "load_s": round(loaded - started, 3),
        "sleep_s": round(backend.last_sleep_s, 3) if backend.last_sleep_s is not None else None,
    }


class _Output:
    """Points this process's stdout and stderr (the file descriptors, so that native code's output follows) at
    one job's log, then back at the worker's own log."""

    def __init__(self) -> None:
        self.saved = (os.dup(1), os.dup(2))

    @contextlib.contextmanager
    def to(self, log_path: str | None) -> Any:
        if not log_path:
            yield
            return
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(self.saved[0], 1)
            os.dup2(self.saved[1], 2)


def _evaluating(job: EvalJob) -> str:
    """What failed, in the checkpoint's terms, for a submission's error (``IndexError: list index out of range``
    alone says nothing of the model): ``" (evaluating the LoRA adapter (r 8, ...))"``; empty for the base."""
    snapshot = job.get("snapshot")
    if not snapshot:
        return ""
    try:
        return f" (evaluating {describe(Snapshot.from_row(snapshot).path)})"
    except Exception:  # a message's detail never hides the failure it describes
        return ""


def serve(in_fd: int, out_fd: int) -> int:
    """The warm worker's loop: one job per frame until the grader closes the pipe."""
    from autorl.plugins.registry import get_backend

    for fd in (in_fd, out_fd):
        os.set_inheritable(fd, False)  # nothing this worker starts (sandboxed code, engine processes) gets them
    jobs = os.fdopen(in_fd, "rb")
    output = _Output()
    backend: Backend | None = None
    backend_key: str | None = None
    while True:
        job = read_frame(jobs)
        if job is None:
            break
        nonce = job.get("nonce")
        with output.to(job.get("log_path")):
            try:
                if backend is not None and backend_key != _backend_key(job):
                    backend.release()
                    if backend.spent():
                        raise EngineRestart("another backend configuration needs a fresh process")
                    backend = None
                if backend is None:
                    backend = get_backend(job["backend"])(job.get("backend_options") or {})
                    backend_key = _backend_key(job)
                    backend.scratch_dir = Path(job["scratch_dir"]) if job.get("scratch_dir") else None
                record = warm_up(job, backend) if job.get("warm_up") else run_job(job, backend)
            except EngineRestart as exc:  # not a failure: the slot runs this job again in a fresh worker
                write_frame(out_fd, {"nonce": nonce, "ok": False, "restart": True, "error": str(exc)})
                return 0
            except Exception as exc:
                traceback.print_exc()
                write_frame(
                    out_fd,
                    {
                        "nonce": nonce,
                        "ok": False,
                        "error": f"{type(exc).__name__}: {exc}{_evaluating(job)}",
                        "harness": harness_blame(job, exc),
                    },
                )
                return 1
            # a backend of one engine per process that frees it when idle: this worker ends after the answer
            retiring = backend.engine_per_process() and not backend.keeps_engine()
            write_frame(out_fd, {"nonce": nonce, "ok": True, "record": record, "retiring": retiring})
            try:
                backend.idle()  # after the answer: the agent waits for the score, not for the GPU memory
            except Exception:
                traceback.print_exc()
                return 1
            if backend.spent():
                return 0
    if backend is not None:
        backend.release()
    return 0


def main(argv: list[str] | None = None) -> int:
    from autorl.procs.lease import end_with_parent

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[0] != "--serve" or not all(a.isdigit() for a in argv[1:]):
        print("usage: python -m autorl.grader.worker --serve IN_FD OUT_FD", file=sys.stderr)
        return 2
    end_with_parent()  # a grader killed mid-job takes its worker (and the engine's processes) with it
    return serve(int(argv[1]), int(argv[2]))


if __name__ == "__main__":
    raise SystemExit(main())
