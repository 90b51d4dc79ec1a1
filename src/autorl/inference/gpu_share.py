"""How runs share one GPU: engine starts taken in turn, and each engine held to its run's memory budget.

vLLM's engine start measures the GPU's free memory, profiles a forward pass and sizes its KV cache from what it
saw, assuming that no other process allocates or frees memory meanwhile. On a GPU that several runs share (their
agents training, their graders' engines starting) that assumption fails: starts die with "No available memory
for the cache blocks" or "Error in memory profiling". Two remedies, both here:

- **One engine start at a time per GPU** (:func:`engine_start`): a file lock per GPU in a folder every process of
  the node agrees on (``AUTORL_GPU_LOCK_DIR``, default ``/tmp/autorl-gpu-locks``), held while an engine loads,
  profiles and allocates its cache, and while a sleeping engine wakes. Locks of several GPUs are taken in one
  order, so two engines never wait on each other.
- **A budget per run** (:class:`GpuBudget`): a GPU of ``total`` bytes shared by ``runs_per_gpu`` runs gives each
  ``total / runs_per_gpu``; of that, the grader's engine takes its weights, a KV cache sized in bytes
  (``kv_cache_memory_bytes``: vLLM then skips its profiling of free memory) and a fixed overhead, and the agent
  is told the rest (``AUTORL_GPU_MEMORY_BUDGET``). A budget that leaves the agent less than it needs is refused
  before anything starts, with the arithmetic.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from autorl.errors import UsageError
from autorl.inference.base import GpuTurn

__all__ = [
    "AGENT_BUDGET_ENV",
    "LOCK_DIR_ENV",
    "RUNS_PER_GPU_ENV",
    "GpuBudget",
    "engine_start",
    "gpu_keys",
    "gpu_memory_bytes",
    "gpu_turn",
    "kv_bytes_per_token",
    "visible_gpus",
    "weights_bytes",
]

LOCK_DIR_ENV = "AUTORL_GPU_LOCK_DIR"
#: how many runs share each of a run's GPUs (the local executor's ``runs_per_gpu``; 1 when unset)
RUNS_PER_GPU_ENV = "AUTORL_RUNS_PER_GPU"
#: what the agent is told it may use of each GPU it shares with its grader, in bytes
AGENT_BUDGET_ENV = "AUTORL_GPU_MEMORY_BUDGET"
GIB = 2**30
#: what an engine holds beside its weights and KV cache: the CUDA context, activations of the profiling pass,
#: CUDA graphs, the sampler's buffers (about 2 GiB measured for a 1.5B model; a margin on top)
DEFAULT_OVERHEAD_BYTES = 3 * GIB
#: tokens of KV cache an engine gets by default: 256 sequences of 256 tokens at once
DEFAULT_KV_TOKENS = 65_536
MIN_KV_BYTES = GIB // 2


def _lock_dir() -> Path:
    # not TMPDIR: the runs of a node each have their own, and every one of them must find the same locks
    return Path(os.environ.get(LOCK_DIR_ENV) or "/tmp/autorl-gpu-locks")


def gpu_keys(environ: dict[str, str] | None = None) -> list[str]:
    """The GPUs an engine started in this process would use, as stable names (UUIDs where ``nvidia-smi`` maps
    an index to one), sorted: what :func:`engine_start` locks. Empty on a machine without a GPU, unless
    ``CUDA_VISIBLE_DEVICES`` names some (then those names, unmapped)."""
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        names = [v.strip() for v in visible.split(",") if v.strip()]
        if not names or names == ["-1"]:
            return []
        uuids = dict(visible_gpus())
        return sorted({uuids.get(n, n) for n in names})
    return sorted(uuid for _, uuid in visible_gpus())


def gpu_memory_bytes(device: str) -> int | None:
    """The total memory of GPU ``device`` (an index or a UUID, as ``--gpus`` names it) by ``nvidia-smi``; ``None``
    where there is no such GPU or no ``nvidia-smi``."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and device in parts[:2] and parts[2].isdigit():
            return int(parts[2]) * 2**20
    return None


def visible_gpus() -> list[tuple[str, str]]:
    """(index, uuid) of each GPU ``nvidia-smi`` lists; empty when there is none."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [tuple(p.strip() for p in line.split(",")) for line in out.splitlines() if line.strip()]
    return [(r[0], r[1]) for r in rows if len(r) == 2]


def _open_lock(name: str) -> int:
    folder = _lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # shared by every user of the node; sticky, as /tmp is
        if folder.stat().st_uid == os.getuid():
            folder.chmod(0o1777)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    fd = os.open(folder / f"gpu-{safe}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{folder}/gpu-{safe}.lock is not a regular file")
    return fd


class EngineShare(TypedDict):
    """The vLLM options that hold an engine to its share of a GPU (:meth:`GpuBudget.engine_options`)."""

    kv_cache_memory_bytes: int
    gpu_memory_utilization: float
    sleep_when_idle: bool


@contextlib.contextmanager
def engine_start(keys: Sequence[str] | None = None, *, note: str = "") -> Iterator[GpuTurn]:
    """Hold the engine-start lock of every GPU in ``keys`` (default :func:`gpu_keys`) while the block runs.

    Yields a dict that says how long the wait was (``wait_s``) and which GPUs were locked (``gpus``); a process
    without a GPU locks nothing. A lock file that cannot be opened (a read-only /tmp) is noted in the dict and
    the start goes on unserialised, as it would have before: the lock orders starts, it never stops one.
    """
    names = sorted(set(gpu_keys() if keys is None else keys))
    info: GpuTurn = {"gpus": names, "wait_s": 0.0}
    fds: list[int] = []
    started = time.monotonic()
    try:
        for name in names:
            try:
                fd = _open_lock(name)
            except OSError as exc:
                info["unlocked"] = f"{type(exc).__name__}: {exc}"
                continue
            fds.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "since": time.time(), "what": note}).encode(), 0)
        info["wait_s"] = round(time.monotonic() - started, 3)
        yield info
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor releases its lock


def gpu_turn(note: str) -> contextlib.AbstractContextManager[GpuTurn]:
    """:func:`engine_start` on this process's GPUs, as a backend takes it (:attr:`Backend.gpu_turn
    <autorl.inference.base.Backend.gpu_turn>`)."""
    return engine_start(note=note)


def weights_bytes(model_dir: Path) -> int:
    """The bytes of a model folder's weight files (safetensors, else PyTorch ``.bin``/``.pt``), no link followed."""
    try:
        entries = list(os.scandir(model_dir))
    except OSError:
        return 0
    for suffixes in ((".safetensors",), (".bin", ".pt", ".pth")):
        found = [e for e in entries if e.name.endswith(suffixes) and e.is_file()]  # the hub cache links blobs
        if found:
            return sum(e.stat().st_size for e in found)
    return 0


def kv_bytes_per_token(model_dir: Path, dtype_bytes: int = 2) -> int | None:
    """Bytes of KV cache one token takes in every layer (keys and values), from ``config.json``; ``None`` when
    the config does not say (another architecture's names)."""
    try:
        config = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    config = config.get("text_config", config) if isinstance(config.get("text_config"), dict) else config
    try:
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return 2 * layers * kv_heads * head_dim * dtype_bytes


class GpuBudgetRecord(TypedDict):
    """A :class:`GpuBudget` as a run's record keeps it (``meta.gpu_budget``): its fields and what they add up to."""

    total_bytes: int
    runs_per_gpu: int
    weights_bytes: int
    kv_cache_bytes: int
    overhead_bytes: int
    agent_min_bytes: int
    per_run_bytes: int
    engine_bytes: int
    agent_bytes: int


@dataclass(frozen=True)
class GpuBudget:
    """One run's share of a GPU that ``runs_per_gpu`` runs share, and how its grader's engine fits in it."""

    total_bytes: int
    runs_per_gpu: int
    weights_bytes: int
    kv_cache_bytes: int
    overhead_bytes: int = DEFAULT_OVERHEAD_BYTES
    #: the least the agent needs (``agent_gpu_gb`` of the study); 0: not declared
    agent_min_bytes: int = 0

    @classmethod
    def for_model(
        cls,
        model_dir: Path,
        total_bytes: int,
        runs_per_gpu: int = 1,
        *,
        kv_tokens: int | None = None,
        overhead_bytes: int | None = None,
        agent_min_bytes: int = 0,
    ) -> GpuBudget:
        """The budget of an engine serving ``model_dir``: its weight files' size, a KV cache of ``kv_tokens``
        tokens (65,536 by default; at least 0.5 GiB) and the overhead."""
        per_token = kv_bytes_per_token(model_dir)
        tokens = DEFAULT_KV_TOKENS if kv_tokens is None else int(kv_tokens)
        kv = max(MIN_KV_BYTES, tokens * per_token) if per_token else 2 * GIB
        return cls(
            total_bytes=int(total_bytes),
            runs_per_gpu=max(1, int(runs_per_gpu)),
            weights_bytes=weights_bytes(model_dir),
            kv_cache_bytes=int(kv),
            overhead_bytes=DEFAULT_OVERHEAD_BYTES if overhead_bytes is None else int(overhead_bytes),
            agent_min_bytes=int(agent_min_bytes),
        )

    @property
    def per_run_bytes(self) -> int:
        return self.total_bytes // self.runs_per_gpu

    @property
    def engine_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.overhead_bytes

    @property
    def agent_bytes(self) -> int:
        """What is left of the run's share for its agent (negative: the engine alone does not fit)."""
        return self.per_run_bytes - self.engine_bytes

    def arithmetic(self) -> str:
        """The budget in one line of GiB."""

        def g(n: int) -> str:
            return f"{n / GIB:.1f}"

        line = (
            f"{g(self.total_bytes)} GiB / {self.runs_per_gpu} runs = {g(self.per_run_bytes)} GiB a run; "
            f"the grader's engine {g(self.engine_bytes)} GiB (weights {g(self.weights_bytes)} + KV cache "
            f"{g(self.kv_cache_bytes)} + overhead {g(self.overhead_bytes)}); the agent {g(self.agent_bytes)} GiB"
        )
        if self.agent_min_bytes:
            line += f" (it needs {g(self.agent_min_bytes)})"
        return line

    def check(self) -> None:
        """Refuse a budget that cannot fit, with the arithmetic."""
        if self.agent_bytes <= 0 or self.agent_bytes < self.agent_min_bytes:
            fewer = max(1, self.total_bytes // max(1, self.engine_bytes + self.agent_min_bytes))
            raise UsageError(
                f"runs_per_gpu = {self.runs_per_gpu} cannot fit: {self.arithmetic()}; "
                f"at most {fewer} such runs fit one GPU"
            )

    def engine_options(self) -> EngineShare:
        """vLLM options that hold an engine to its share: the KV cache in bytes (no profiling of free memory)
        and a utilisation that asks only for what the engine takes (vLLM checks it against free memory at start).
        No sleep between evaluations: the engine keeps its share, which the agent was not given."""
        utilisation = min(0.95, (self.engine_bytes + 256 * 2**20) / self.total_bytes)
        return {
            "kv_cache_memory_bytes": self.kv_cache_bytes,
            "gpu_memory_utilization": round(utilisation, 4),
            "sleep_when_idle": False,
        }

    def to_dict(self) -> GpuBudgetRecord:
        return GpuBudgetRecord(
            total_bytes=self.total_bytes,
            runs_per_gpu=self.runs_per_gpu,
            weights_bytes=self.weights_bytes,
            kv_cache_bytes=self.kv_cache_bytes,
            overhead_bytes=self.overhead_bytes,
            agent_min_bytes=self.agent_min_bytes,
            per_run_bytes=self.per_run_bytes,
            engine_bytes=self.engine_bytes,
            agent_bytes=self.agent_bytes,
        )
