"""Steps 1 and 2 of a run: its names resolved through the registry (benchmark, agent, backend; GPUs and sandbox
from their options), then the base model and the benchmark's data acquired."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.agent import Agent
from autorl.errors import UsageError
from autorl.inference.gpu_share import (
    GIB,
    RUNS_PER_GPU_ENV,
    GpuBudget,
    GpuBudgetRecord,
    gpu_memory_bytes,
    weights_bytes,
)
from autorl.plugins.registry import default_backend, get_backend, get_benchmark, resolve_agent
from autorl.resources import BenchmarkData, ResolvedModel, prepare_data, resolve_model
from autorl.runs.gpus import GpuAssignment, parse_gpus
from autorl.sandbox import choose

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.runs.progress import Say
    from autorl.runs.spec import RunSpec
    from autorl.sandbox import SandboxChoice

__all__ = ["Assets", "Plan", "acquire", "output_quota", "resolve", "runs_per_gpu", "share_gpu"]


@dataclass(frozen=True)
class Plan:
    """What the run's names resolve to: benchmark, agent, backend, GPUs, sandbox."""

    task: str
    benchmark: Benchmark
    benchmark_options: dict[str, Any]
    agent: Agent
    agent_name: str
    backend: str
    backend_options: dict[str, Any]
    gpus: GpuAssignment
    sandbox: SandboxChoice
    sandbox_warning: str | None
    #: the run's share of a GPU it shares (:func:`share_gpu`; ``GpuBudget.to_dict``), for the record
    gpu_budget: GpuBudgetRecord | None = None


def resolve(spec: RunSpec, task: str, agent_env: Mapping[str, str] | None, say: Say) -> Plan:
    """The spec's benchmark (``task``: its name as resolved), agent, backend, GPUs and sandbox from their names
    (unknown: one line with close matches); the agent is given ``agent_env``."""
    sandbox, network, backend = spec.sandbox, spec.network, spec.backend
    bench_options = dict(spec.benchmark_options)
    benchmark = get_benchmark(task)(bench_options)
    agent_cls = resolve_agent(spec.agent)
    agent_obj = agent_cls({"env": dict(agent_env or {})})
    agent_obj.preflight()
    agent_obj.check_task(benchmark)
    choice = choose(sandbox, network)
    warning = choice.warning
    if sandbox == "auto" and choice.recorded_mode != "bwrap" and warning:
        warning += (
            f"; the run is recorded as sandbox {choice.recorded_mode} and flagged by the audit "
            "(--sandbox bwrap refuses to run without a sandbox)"
        )
    if warning:
        say(f"warning: {warning}")
    backend_name = backend or default_backend()
    get_backend(backend_name)
    assignment = parse_gpus(spec.gpus) if spec.gpus else GpuAssignment()
    options = dict(spec.backend_options)
    if assignment.shared and backend_name != "vllm":  # vllm's engine is held to a budget (share_gpu)
        # the grader's idle engine gives the shared GPU back to the agent between evaluations
        options.setdefault("sleep_when_idle", True)
    return Plan(
        task=task,
        benchmark=benchmark,
        benchmark_options=bench_options,
        agent=agent_obj,
        agent_name=agent_cls.name,
        backend=backend_name,
        backend_options=options,
        gpus=assignment,
        sandbox=choice,
        sandbox_warning=warning,
    )


def runs_per_gpu() -> int:
    """How many runs share each of this run's GPUs (``AUTORL_RUNS_PER_GPU``, which a study's local executor sets
    from its ``runs_per_gpu``; 1 when unset)."""
    raw = os.environ.get(RUNS_PER_GPU_ENV, "1").strip() or "1"
    if not raw.isdigit() or int(raw) < 1:
        raise UsageError(f"{RUNS_PER_GPU_ENV} must be a positive whole number, not {raw!r}")
    return int(raw)


def share_gpu(plan: Plan, assets: Assets, say: Say, total_bytes: int | None = None) -> Plan:
    """Hold the grader's vLLM engine to its run's share of a GPU that it shares with the agent or, in a study, with
    other runs (:class:`~autorl.inference.gpu_share.GpuBudget`): a KV cache sized in bytes instead of profiled
    free memory, no sleep between evaluations, and the agent told what is left (``AUTORL_GPU_MEMORY_BUDGET``). A
    share too small for the engine is refused here, before anything starts, with the arithmetic. Options the
    caller gave (``gpu_memory_utilization``, ``kv_cache_memory_bytes``, ``sleep_when_idle``) win."""
    runs = runs_per_gpu()
    if plan.backend != "vllm" or not (plan.gpus.shared or runs > 1):
        return plan
    device = plan.gpus.grader[0] if plan.gpus.grader else "0"
    total = total_bytes if total_bytes is not None else gpu_memory_bytes(device)
    options = dict(plan.backend_options)
    if total is None:  # no nvidia-smi to size it: the engine's own share, asleep between evaluations
        options.setdefault("sleep_when_idle", True)
        options.setdefault("gpu_memory_utilization", 0.25)  # bench/vllm_h200.md
        return replace(plan, backend_options=options)
    budget = GpuBudget.for_model(assets.model.path, total, runs)
    budget.check()
    for key, value in budget.engine_options().items():
        options.setdefault(key, value)
    say(f"GPU {device}: {budget.arithmetic()}")
    return replace(
        plan,
        backend_options=options,
        gpus=replace(plan.gpus, agent_memory_bytes=budget.agent_bytes),
        gpu_budget=budget.to_dict(),
    )


#: the quota on what the agent writes, in GiB, when the run is not given one (a study sets it per run)
OUTPUT_QUOTA_ENV = "AUTORL_OUTPUT_QUOTA_GB"


def output_quota(gib: float | None, model_dir: Path) -> int | None:
    """The bytes the agent's workspace and /tmp may hold when it submits: ``gib`` (0: no quota), else
    ``AUTORL_OUTPUT_QUOTA_GB``, else eight times the base model's weights and at least 4 GiB (room for a few
    checkpoints and a trainer's state)."""
    if gib is None and os.environ.get(OUTPUT_QUOTA_ENV):
        raw = os.environ[OUTPUT_QUOTA_ENV]
        try:
            gib = float(raw)
        except ValueError:
            raise UsageError(f"{OUTPUT_QUOTA_ENV} must be a number of GiB, not {raw!r}") from None
    if gib is not None:
        if gib < 0:
            raise UsageError(f"--output-quota must be a non-negative number of GiB, not {gib}")
        return int(gib * GIB) or None
    return max(4 * GIB, 8 * weights_bytes(model_dir))


@dataclass(frozen=True)
class Assets:
    """The base model's files and the benchmark's data (training data for the agent, hidden for the grader)."""

    model: ResolvedModel
    data: BenchmarkData


def acquire(plan: Plan, model: str, home: Path) -> Assets:
    """The base model (local, built-in or from the hub) and the benchmark's data (the plugin's, idempotent)."""
    return Assets(resolve_model(model), prepare_data(plan.benchmark, home))
