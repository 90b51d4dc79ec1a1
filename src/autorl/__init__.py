"""autorl: can a large model, as an autonomous ML engineer, post-train a small model past its baseline?

The public API is what ``__all__`` lists; heavy libraries load only when a function needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autorl.agents.base import Agent, AgentContext
from autorl.benchmark import Benchmark, EvalConfig, Item
from autorl.errors import AutorlError
from autorl.evaluation.base import Evaluator, ItemResult
from autorl.hookspecs import hookimpl
from autorl.inference.base import Backend, Completion, GenerationRequest

from autorl.version import __version__

if TYPE_CHECKING:
    from autorl.evaluation.run import EvalRecord
    from autorl.runner import RunResult

__all__ = [
    "Agent",
    "AgentContext",
    "AutorlError",
    "Backend",
    "Benchmark",
    "Completion",
    "EvalConfig",
    "Evaluator",
    "GenerationRequest",
    "Item",
    "ItemResult",
    "__version__",
    "evaluate",
    "hookimpl",
    "run",
]


def run(agent: str, task: str, model: str, timeout: float, **options: Any) -> RunResult:
    """Run one agent on one task; see :func:`autorl.runner.run` for the options."""
    from autorl.runner import run as _run

    return _run(agent, task, model, timeout, **options)


def evaluate(
    task: str,
    model: str,
    *,
    split: str = "dev",
    limit: int | None = None,
    backend: str | None = None,
    base_model: str | None = None,
    per_item_path: str | None = None,
) -> EvalRecord:
    """Evaluate a checkpoint (local dir, hub id or built-in model) exactly as the grader would."""
    from pathlib import Path

    from autorl.evaluation.run import evaluate_model
    from autorl.registry import default_backend, get_backend, get_benchmark
    from autorl.resources import prepare_data, resolve_model

    benchmark = get_benchmark(task)()
    resolved = resolve_model(model)
    base = resolve_model(base_model).path if base_model else None
    data = prepare_data(benchmark)
    be = get_backend(backend or default_backend())()
    return evaluate_model(
        benchmark, be, resolved.path, split=split, hidden_dir=data.hidden_dir, base_model_dir=base, limit=limit,
        per_item_path=Path(per_item_path) if per_item_path else None,
    )
