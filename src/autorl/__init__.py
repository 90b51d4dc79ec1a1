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
    from collections.abc import Mapping

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
    "sweep",
]


def sweep(spec: Any, *, executor: str = "local", **options: Any) -> dict[str, Any]:
    """Run (or resume) a study over agents x tasks x models x seeds and return its report; see
    :func:`autorl.sweep.sweep` for the options (``spec``: a sweep.toml/YAML path or the same as a dict)."""
    from autorl.sweep import sweep as _sweep

    return _sweep(spec, executor=executor, **options)


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
    benchmark_options: Mapping[str, Any] | None = None,
) -> EvalRecord:
    """Evaluate a checkpoint (local dir, hub id or built-in model) exactly as the grader would.

    See :func:`autorl.checkpoint_eval.evaluate`, which ``autorl eval`` calls too.
    """
    from autorl.checkpoint_eval import evaluate as _evaluate

    return _evaluate(task, model, split=split, limit=limit, backend=backend, base_model=base_model,
                     per_item_path=per_item_path, benchmark_options=benchmark_options)
