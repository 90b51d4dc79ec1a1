"""The ``local`` executor: a queue over this machine's GPUs (``--gpus 0-7``, or those ``nvidia-smi`` lists) or,
on a CPU machine, ``--slots N``. Each run is its own ``autorl run`` process (through
:mod:`autorl.sweep.worker`) in its own session, with a disjoint ``CUDA_VISIBLE_DEVICES``; with
``--option runs_per_gpu=N`` (spec ``[local] runs_per_gpu = N``) a GPU is handed to up to N runs at once (their
grader engines sleep between submissions, so several runs fit one large GPU), a run's own GPUs always distinct.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from autorl.errors import UsageError
from autorl.procs.group import kill_group
from autorl.procs.lease import process_start_time
from autorl.sweep.executors import Executor, Launch

#: seconds an interrupted worker gets to stop its run before its process group is killed
KILL_GRACE_S = 30.0


def parse_devices(spec: str | list[Any] | None) -> list[str]:
    """``0-3``, ``0,1,5``, ``[0, 1]`` or a list of GPU UUIDs."""
    if spec is None:
        return []
    tokens = [str(t).strip() for t in spec] if isinstance(spec, list) else spec.split(",")
    out: list[str] = []
    for token in filter(None, (t.strip() for t in tokens)):
        lo, sep, hi = token.partition("-")
        if sep and lo.isdigit() and hi.isdigit():
            if int(hi) < int(lo):
                raise UsageError(f"--gpus: empty range {token!r}")
            out += [str(i) for i in range(int(lo), int(hi) + 1)]
        elif token.isdigit() or token.startswith(("GPU-", "MIG-")):
            out.append(token)
        else:
            raise UsageError(f"--gpus: {token!r} is neither a GPU index, a range (0-3) nor a GPU UUID")
    if len(set(out)) != len(out):
        raise UsageError("--gpus lists a GPU twice")
    return out


class LocalExecutor(Executor):
    """Runs attempts as subprocesses of this machine, at most ``slots`` at once, GPUs handed out disjointly."""

    name: ClassVar[str] = "local"

    def __init__(self, options: Any, **kw: Any) -> None:
        super().__init__(options, **kw)
        gpus = self.options.get("gpus")
        if gpus is None and not self.options.get("slots"):
            from autorl.inference.gpu_share import visible_gpus

            self.devices = [i for i, _ in visible_gpus()]
        else:
            self.devices = parse_devices(gpus)
        slots = self.options.get("slots")
        if slots is not None and (isinstance(slots, bool) or not isinstance(slots, int) or slots < 1):
            raise UsageError(f"--slots must be a positive integer, not {slots!r}")
        per_gpu = self.options.get("runs_per_gpu", 1)
        if isinstance(per_gpu, bool) or not isinstance(per_gpu, int) or per_gpu < 1:
            raise UsageError(f"runs_per_gpu must be a positive integer, not {per_gpu!r}")
        self.per_gpu: int = per_gpu
        #: the agent's quota and the disk each run needs (set by check_cells; None: not planned)
        self.output_quota: int | None = None
        self.disk_need: int | None = None
        self.slots: int = slots or max(1, len(self.devices) * per_gpu)
        #: each device once per run it may hold at once
        self.free = [d for _ in range(per_gpu) for d in self.devices]
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.held: dict[int, list[str]] = {}

    def check(self, gpus_per_run: int, label: str) -> None:
        if gpus_per_run > len(self.devices):
            have = f"GPUs {', '.join(self.devices)}" if self.devices else "no GPU (use --gpus 0-3 to name them)"
            raise UsageError(f"cell {label}: gpus = {gpus_per_run} per run, but the local executor has {have}")

    def capacity(self) -> int | None:
        return self.slots

    def _plan_disk(self, cells: Sequence[Mapping[str, Any]]) -> None:
        """Each run's share of the study's disk (:mod:`autorl.sweep.disk`): the agent's quota sized so that the
        runs that go at once fit (``output_quota_gb`` when the spec sets it), refused with the arithmetic when
        they cannot."""
        import tempfile

        from autorl.inference.gpu_share import weights_bytes
        from autorl.resources import resolve_model
        from autorl.sweep.disk import GIB, free_bytes, grader_share, plan_quota
        from autorl.sweep.worker import SCRATCH_ENV

        weights = 0
        for model in {str(c.get("model")) for c in cells}:
            try:
                weights = max(weights, weights_bytes(resolve_model(model).path))
            except Exception:  # not reachable from here (offline hub): the run refuses for itself
                continue
        asked = self.options.get("output_quota_gb")
        if asked is not None and (isinstance(asked, bool) or not isinstance(asked, int | float) or asked <= 0):
            raise UsageError(f"output_quota_gb must be a positive number of GiB, not {asked!r}")
        places = [Path(os.environ.get(SCRATCH_ENV) or tempfile.gettempdir())]
        if self.sweep_dir is not None:
            places.append(self.sweep_dir)
        free, where = free_bytes(places)
        quota = plan_quota(
            free,
            where,
            min(self.slots, len(cells)),
            weights,
            max(4 * GIB, 8 * weights),
            int(asked * GIB) if asked is not None else None,
        )
        self.output_quota = quota
        self.disk_need = quota + grader_share(weights)

    def check_cells(self, cells: Sequence[Mapping[str, Any]]) -> None:
        """Refuse a ``runs_per_gpu`` whose share of the smallest GPU cannot hold a vLLM grader's engine for a
        cell's model, and the agent's ``agent_gpu_gb`` when given, with the arithmetic."""
        from autorl.inference.gpu_share import GIB, GpuBudget, gpu_memory_bytes
        from autorl.plugins.registry import default_backend
        from autorl.resources import resolve_model

        self._plan_disk(cells)
        agent_gb = self.options.get("agent_gpu_gb", 0)
        if isinstance(agent_gb, bool) or not isinstance(agent_gb, int | float) or agent_gb < 0:
            raise UsageError(f"agent_gpu_gb must be a non-negative number of GiB, not {agent_gb!r}")
        sizes = [m for m in (gpu_memory_bytes(d) for d in self.devices) if m is not None]
        if not sizes:
            return
        checked: set[str] = set()
        for cell in cells:
            backend = cell.get("backend") or default_backend()
            model = str(cell.get("model"))
            if backend != "vllm" or not int(cell.get("gpus") or 0) or model in checked:
                continue
            checked.add(model)
            try:
                path = resolve_model(model).path
            except Exception:  # not reachable from here (offline hub): the run refuses for itself
                continue
            GpuBudget.for_model(path, min(sizes), self.per_gpu, agent_min_bytes=int(agent_gb * GIB)).check()

    def start(self, launches: list[Launch]) -> list[dict[str, Any] | None]:
        return [self._start_one(launch) for launch in launches]

    def _start_one(self, launch: Launch) -> dict[str, Any] | None:
        # distinct devices, the least shared first
        devices = sorted(set(self.free), key=lambda d: (-self.free.count(d), self.devices.index(d)))[: launch.gpus]
        if len(self.procs) >= self.slots or len(devices) < launch.gpus:
            return None
        for d in devices:
            self.free.remove(d)
        self._set_payload(launch.attempt_dir, gpus=devices, disk_need=self.disk_need)
        env = dict(os.environ)
        if self.output_quota is not None:
            from autorl.runs.plan import OUTPUT_QUOTA_ENV

            env.setdefault(OUTPUT_QUOTA_ENV, f"{self.output_quota / 2**30:.3f}")
        if devices:  # the run holds its engine to its share of each GPU (autorl.runs.plan.share_gpu)
            from autorl.inference.gpu_share import RUNS_PER_GPU_ENV

            env[RUNS_PER_GPU_ENV] = str(self.per_gpu)
        with (launch.attempt_dir / "worker.log").open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "autorl.sweep.worker", str(launch.attempt_dir)],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
            )
        self.procs[proc.pid] = proc
        self.held[proc.pid] = devices
        return {
            "executor": self.name,
            "host": socket.gethostname(),
            "pid": proc.pid,
            "start_time": process_start_time(proc.pid),
            "gpus": devices,
            "submitted": time.time(),
        }

    @staticmethod
    def _set_payload(attempt_dir: Path, **values: Any) -> None:
        from autorl.sweep.store import read_json, write_json

        payload = read_json(attempt_dir / "payload.json")
        payload.update(values)
        write_json(attempt_dir / "payload.json", payload)

    def poll(self, job: dict[str, Any]) -> str | None:
        pid = int(job["pid"])
        proc = self.procs.get(pid)
        if proc is not None:
            code = proc.poll()
            if code is None:
                return None
            self._release(pid)
            return "finished" if code == 0 else f"worker exited with code {code}"
        # recorded by a coordinator that is gone: the run lost its coordinator; stop what is left of it
        if job.get("host") != socket.gethostname():
            return f"interrupted: ran on {job.get('host')} under a coordinator that is gone"
        start = process_start_time(pid)
        # a pid reused since has another start time (recorded as text by earlier versions)
        if start is not None and str(start) == str(job.get("start_time")):
            self._stop(pid)
        return "interrupted: the coordinator was gone"

    def _release(self, pid: int) -> None:
        self.procs.pop(pid, None)
        self.free += self.held.pop(pid, [])

    @staticmethod
    def _stop(pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)  # the worker stops its run (SIGINT: grader and agent cleaned up)
        end = time.monotonic() + KILL_GRACE_S
        while time.monotonic() < end and process_start_time(pid) is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.2)
        kill_group(pid)

    def cancel(self, job: dict[str, Any]) -> None:
        pid = int(job["pid"])
        if pid in self.procs:
            self._stop(pid)
            self.procs[pid].wait()
            self._release(pid)

    def close(self) -> None:
        for pid in list(self.procs):
            proc = self.procs[pid]
            if proc.poll() is not None:
                self._release(pid)
