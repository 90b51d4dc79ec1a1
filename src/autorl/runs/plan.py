"""Steps 1 and 2 of a run: its names resolved through the registry (benchmark, agent, backend; GPUs and sandbox
from their options), then the base model and the benchmark's data acquired."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.agents.base import Agent
from autorl.gpus import GpuAssignment, parse_gpus
from autorl.registry import default_backend, get_backend, get_benchmark, resolve_agent
from autorl.resources import BenchmarkData, ResolvedModel, prepare_data, resolve_model
from autorl.sandbox import choose

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.progress import Say
    from autorl.sandbox import SandboxChoice

__all__ = ["Assets", "Plan", "acquire", "resolve"]


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


def resolve(agent: str, task: str, backend: str | None, gpus: str | None, sandbox: str, network: str,
            agent_env: Mapping[str, str] | None, benchmark_options: Mapping[str, Any] | None,
            backend_options: Mapping[str, Any] | None, say: Say) -> Plan:
    """Benchmark, agent, backend, GPUs and sandbox from their names (unknown: one line with close matches)."""
    bench_options = dict(benchmark_options or {})
    benchmark = get_benchmark(task)(bench_options)
    agent_cls = resolve_agent(agent)
    agent_obj = agent_cls({"env": dict(agent_env or {})})
    agent_obj.preflight()
    agent_obj.check_task(benchmark)
    choice = choose(sandbox, network)
    warning = choice.warning
    if sandbox == "auto" and choice.recorded_mode != "bwrap" and warning:
        warning += (f"; the run is recorded as sandbox {choice.recorded_mode} and flagged by the audit "
                    "(--sandbox bwrap refuses to run without a sandbox)")
    if warning:
        say(f"warning: {warning}")
    backend_name = backend or default_backend()
    get_backend(backend_name)
    assignment = parse_gpus(gpus) if gpus else GpuAssignment()
    options = dict(backend_options or {})
    if assignment.shared:
        # the grader's idle engine gives the shared GPU back to the agent between evaluations
        options.setdefault("sleep_when_idle", True)
        if backend_name == "vllm":
            options.setdefault("gpu_memory_utilization", 0.25)  # bench/vllm_h200.md
    return Plan(task=task, benchmark=benchmark, benchmark_options=bench_options, agent=agent_obj,
                agent_name=agent_cls.name, backend=backend_name, backend_options=options, gpus=assignment,
                sandbox=choice, sandbox_warning=warning)


@dataclass(frozen=True)
class Assets:
    """The base model's files and the benchmark's data (training data for the agent, hidden for the grader)."""

    model: ResolvedModel
    data: BenchmarkData


def acquire(plan: Plan, model: str, home: Path) -> Assets:
    """The base model (local, built-in or from the hub) and the benchmark's data (the plugin's, idempotent)."""
    return Assets(resolve_model(model), prepare_data(plan.benchmark, home))
