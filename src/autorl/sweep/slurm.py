"""The ``slurm`` executor, through submitit (``pip install 'autorl[slurm]'``): one job array per placement
(per GPU count and timeout), ``slurm_array_parallelism`` = ``--max-parallel``, the run's GPUs per job, a time
limit of the run's timeout plus a margin for the baseline, the evaluations and the audit, and
``partition``/``account``/``qos``/``constraint`` (and any other ``slurm_*`` setting) passed through. Job ids
are kept in each attempt's ``job.json``, so that a later ``sweep run`` or ``sweep status`` reattaches.

``cluster = "local"`` runs the same code path through submitit's own local executor (tests, a laptop).
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from autorl.errors import MissingDependencyError, UsageError
from autorl.sweep.executors import Executor, Launch

if TYPE_CHECKING:
    import submitit

    from autorl.sweep.records import Outcome

#: seconds added to a run's timeout for its time limit: baseline, evaluations in flight, test split, audit
DEFAULT_MARGIN_S = 1800.0
PASSED = ("partition", "account", "qos", "constraint")
#: Slurm states after which a job writes nothing more
ENDED = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "PREEMPTED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "REVOKED",
    "FINISHED",
    "INTERRUPTED",
)


def _submitit() -> Any:
    try:
        import submitit
    except ImportError:
        raise MissingDependencyError("the slurm executor", "'autorl[slurm]'") from None
    return submitit


class SlurmExecutor(Executor):
    """Places attempts as Slurm job arrays through submitit."""

    name: ClassVar[str] = "slurm"

    def __init__(self, options: Any, **kw: Any) -> None:
        super().__init__(options, **kw)
        self.cluster = str(self.options.get("cluster") or "slurm")
        if self.cluster not in ("slurm", "local", "debug"):
            raise UsageError(f"slurm: cluster must be slurm, local or debug, not {self.cluster!r}")
        self.margin_s = float(self.options.get("time_margin_s", DEFAULT_MARGIN_S))
        base = self.sweep_dir or Path.cwd()
        self.folder = Path(self.options.get("folder") or base / "slurm")
        self.jobs: dict[str, submitit.Job[Outcome]] = {}
        self._checked = False

    def check(self, gpus_per_run: int, label: str) -> None:
        _submitit()
        if self._checked:
            return
        if self.cluster == "slurm" and not (shutil.which("sbatch") and shutil.which("sacct")):
            raise UsageError(
                "slurm is unreachable: sbatch/sacct are not on PATH (run on a login node of the "
                "cluster, or use --executor local)"
            )
        self._checked = True

    def _parameters(self, gpus: int, timeout_s: float) -> dict[str, Any]:
        params: dict[str, Any] = {
            "timeout_min": max(1, math.ceil((timeout_s + self.margin_s) / 60)),
            "gpus_per_node": gpus,
            "tasks_per_node": 1,
            "nodes": 1,
            "cpus_per_task": int(self.options.get("cpus_per_task", 4)),
            "name": f"autorl-sweep-{self.sweep_dir.name if self.sweep_dir else 'runs'}",
        }
        if self.options.get("mem_gb") is not None:
            params["mem_gb"] = self.options["mem_gb"]
        if self.max_parallel:
            params["slurm_array_parallelism"] = self.max_parallel
        for key in PASSED:
            if self.options.get(key):
                params[f"slurm_{key}"] = str(self.options[key])
        for key, value in self.options.items():
            if key.startswith("slurm_"):
                params[key] = value
        return params

    def start(self, launches: list[Launch]) -> list[dict[str, Any] | None]:
        submitit = _submitit()
        from autorl.sweep.worker import run_attempt

        out: list[dict[str, Any] | None] = [None] * len(launches)
        groups: dict[tuple[int, float], list[int]] = {}
        for i, launch in enumerate(launches):
            groups.setdefault((launch.gpus, launch.timeout_s), []).append(i)
        for (gpus, timeout_s), members in groups.items():
            executor = submitit.AutoExecutor(folder=str(self.folder / "%j"), cluster=self.cluster)
            executor.update_parameters(**self._parameters(gpus, timeout_s))
            try:  # submitit prints sbatch's complaint before raising it: it belongs in the one-line error only
                with contextlib.redirect_stderr(io.StringIO()), executor.batch():
                    jobs = [executor.submit(run_attempt, str(launches[i].attempt_dir)) for i in members]
            except Exception as exc:  # sbatch refusing the array (bad partition, account, qos)
                raise UsageError(f"slurm refused the job array: {str(exc).strip().splitlines()[-1][:300]}") from None
            for i, job in zip(members, jobs, strict=True):
                self.jobs[str(job.job_id)] = job
                out[i] = {
                    "executor": self.name,
                    "cluster": self.cluster,
                    "job_id": str(job.job_id),
                    "folder": str(self.folder),
                }
        return out

    def _job(self, job: dict[str, Any]) -> Any:
        known = self.jobs.get(str(job["job_id"]))
        if known is not None or self.cluster != "slurm":
            return known
        submitit = _submitit()
        # a job submitted by an earlier coordinator: reattached by its id
        known = submitit.SlurmJob(folder=str(Path(job["folder"]) / "%j"), job_id=str(job["job_id"]))
        self.jobs[str(job["job_id"])] = known
        return known

    def poll(self, job: dict[str, Any]) -> str | None:
        handle = self._job(job)
        if handle is None:
            return "interrupted: the coordinator that held this local submitit job was gone"
        try:
            done = bool(handle.done())
            state = str(handle.state) if done else self._controller_state(str(job["job_id"]))
            if state is None:
                return None
        except Exception as exc:  # sacct unreachable for a moment: ask again at the next poll
            if self.cluster == "slurm":
                return None
            return f"submitit: {exc}"[:300]
        if state.split()[0].upper() in ("COMPLETED", "FINISHED", "DONE"):
            return "finished"
        reason = f"slurm job {job['job_id']} ended {state}"
        try:  # (submitit's exception() waits until it sees the job done: only asked once it has)
            error = handle.exception() if done else None
        except Exception:  # the job's result file is missing: the state says enough
            error = None
        return f"{reason}: {str(error).strip().splitlines()[-1][:200]}" if error else reason

    def _controller_state(self, job_id: str) -> str | None:
        """The state of a job that wrote no result, from the controller (``scontrol``) where ``sacct`` has
        nothing to say (a cluster without an accounting database, or one that has not heard of the job yet):
        None while it may still run. Without this, a job killed outright (SIGKILL, a node lost) on such a
        cluster would be waited for forever."""
        if self.cluster != "slurm":
            return None
        state = str(self._job({"job_id": job_id}).state).split()[0].upper()
        if state not in ("UNKNOWN", ""):
            return state if state in ENDED else None
        try:
            proc = subprocess.run(
                ["scontrol", "-o", "show", "job", job_id],
                capture_output=True,
                text=True,
                timeout=30,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        found = re.search(r"\bJobState=(\S+)", proc.stdout)
        if found is None:  # purged from the controller (MinJobAge) and never in an accounting database
            return "GONE" if "invalid job id" in proc.stderr.lower() else None
        return found.group(1) if found.group(1) in ENDED else None

    def cancel(self, job: dict[str, Any]) -> None:
        handle = self._job(job)
        if handle is not None:
            handle.cancel(check=False)
