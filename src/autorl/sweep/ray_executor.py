"""The ``ray`` executor (``pip install 'autorl[ray]'``): one Ray task per run with ``num_gpus`` (and a
placement group packing them on one node when a run needs several), ``max_retries=0`` so that the retry rules
stay autorl's, on a local cluster or a remote one (``address``, else ``RAY_ADDRESS``; ``ray://`` works).

The run that a task starts gets no ``RAY_*`` variable (the worker drops them) and the agent's sandbox masks the
temporary directory where Ray keeps its session: an agent can neither reach the cluster nor read its files.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, ClassVar

from autorl.errors import MissingDependencyError, UsageError
from autorl.sweep.executors import Executor, Launch
from autorl.sweep.records import Outcome

if TYPE_CHECKING:
    from ray import ObjectRef
    from ray.util.placement_group import PlacementGroup


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("the ray executor", "'autorl[ray]'") from None
    return ray


def _run(attempt_dir: str) -> Outcome:
    from autorl.sweep.worker import run_attempt

    return run_attempt(attempt_dir)


def passed_env() -> dict[str, str]:
    """The coordinator's ``AUTORL_*`` variables (the scratch disk, the reserve, the run program, ...): a task on a
    cluster started elsewhere runs in the environment of that cluster's raylet, not the coordinator's, so they
    travel with each task (Slurm's ``sbatch`` exports the whole environment itself)."""
    return {k: v for k, v in os.environ.items() if k.startswith("AUTORL_")}


class RayExecutor(Executor):
    """Places each attempt as a Ray task."""

    name: ClassVar[str] = "ray"

    def __init__(self, options: Any, **kw: Any) -> None:
        super().__init__(options, **kw)
        self.address = self.options.get("address") or os.environ.get("RAY_ADDRESS") or None
        self.refs: dict[str, ObjectRef[Outcome]] = {}
        self.groups: dict[str, PlacementGroup] = {}
        self._started = False

    def _connect(self) -> Any:
        ray = _ray()
        if self._started or ray.is_initialized():
            self._started = True
            return ray
        kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False, "include_dashboard": False}
        if self.address:
            kwargs["address"] = self.address
        elif self.options.get("num_cpus") is not None:
            kwargs["num_cpus"] = int(self.options["num_cpus"])
        try:
            ray.init(**kwargs)
        except Exception as exc:  # ConnectionError, a timeout, a bad address
            where = self.address or "a new local cluster"
            raise UsageError(f"ray is unreachable at {where}: {str(exc).strip().splitlines()[0][:200]}") from None
        self._started = True
        return ray

    def check(self, gpus_per_run: int, label: str) -> None:
        ray = self._connect()
        total = int(ray.cluster_resources().get("GPU", 0))
        if gpus_per_run > total:
            raise UsageError(f"cell {label}: gpus = {gpus_per_run} per run, but the Ray cluster has {total} GPU(s)")

    def start(self, launches: list[Launch]) -> list[dict[str, Any] | None]:
        ray = self._connect()
        remote = ray.remote(_run)
        out: list[dict[str, Any] | None] = []
        for launch in launches:
            opts: dict[str, Any] = {
                "num_gpus": launch.gpus,
                "num_cpus": 1,
                "max_retries": 0,
                "runtime_env": {"env_vars": passed_env()},
            }
            group = None
            if launch.gpus > 1:
                from ray.util.placement_group import placement_group
                from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

                group = placement_group([{"GPU": launch.gpus, "CPU": 1}], strategy="STRICT_PACK")
                opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(group)
            ref = remote.options(**opts).remote(str(launch.attempt_dir))
            task = ref.hex()
            self.refs[task] = ref
            if group is not None:
                self.groups[task] = group
            out.append({"executor": self.name, "task": task, "address": self.address})
        return out

    def poll(self, job: dict[str, Any]) -> str | None:
        ref = self.refs.get(str(job["task"]))
        if ref is None:  # a task owned by a driver that is gone: Ray stopped it with its owner
            return "interrupted: the coordinator (the Ray driver that owned the task) was gone"
        ray = _ray()
        ready, _ = ray.wait([ref], timeout=0)
        if not ready:
            return None
        self.refs.pop(str(job["task"]), None)
        group = self.groups.pop(str(job["task"]), None)
        if group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(group)
        try:
            ray.get(ref)
        except Exception as exc:  # WorkerCrashedError, NodeDiedError, OutOfMemoryError, ...
            return f"ray task failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
        return "finished"

    def cancel(self, job: dict[str, Any]) -> None:
        ref = self.refs.get(str(job["task"]))
        if ref is not None:
            _ray().cancel(ref, force=True)

    def close(self) -> None:
        if self._started and not self.address and self.options.get("shutdown", True):
            _ray().shutdown()
