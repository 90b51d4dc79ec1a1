"""autorl: can a large model, as an autonomous ML engineer, post-train a small model past its baseline?

The public API is what ``__all__`` lists: everything a plugin imports (docs/plugins), and ``run``,
``evaluate`` and ``sweep`` for scripts (``run`` returns a :class:`RunResult`), ``runs`` and ``items`` (DataFrames of the recorded runs) for notebooks.
Plugins' tests also use :mod:`autorl.testing` (a pytest plugin). The entry points load on first use
(:func:`__getattr__`), so ``import autorl`` stays light: no torch, no grader, no plugin, no pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from autorl.agent import Agent, AgentContext
from autorl.benchmark import Benchmark
from autorl.errors import AutorlError, EvaluationError, HiddenDataError, ResourceError, UsageError
from autorl.evaluation.episode import (
    Environment,
    EpisodeBenchmark,
    EpisodeEvaluator,
    StepResult,
    episode_steps,
)
from autorl.evaluation.generation import GenerationEvaluator
from autorl.hidden import (
    has_hidden_items,
    hidden_secret,
    items_digest,
    read_hidden_items,
    secret_rng,
    write_hidden_items,
)
from autorl.hookspecs import RegisterAgent, RegisterBackend, RegisterBenchmark, hookimpl
from autorl.inference.base import Backend, Completion, GenerationRequest
from autorl.jsonio import read_jsonl, write_json_atomic, write_jsonl_atomic, write_text_atomic
from autorl.plugins.loader import PluginWarning
from autorl.plugins.registry import get_agent, get_backend, get_benchmark
from autorl.resources import autorl_home, file_lock
from autorl.scoring import EvalConfig, Evaluator, Item, ItemResult, Progress, Scorer
from autorl.version import __version__

if TYPE_CHECKING:
    from autorl import sweep
    from autorl.evaluation.checkpoint import evaluate
    from autorl.export.frames import items
    from autorl.record.frames import runs
    from autorl.record.result import RunResult
    from autorl.runs.runner import run

__all__ = [
    "Agent",
    "AgentContext",
    "AutorlError",
    "Backend",
    "Benchmark",
    "Completion",
    "Environment",
    "EpisodeBenchmark",
    "EpisodeEvaluator",
    "EvalConfig",
    "EvaluationError",
    "Evaluator",
    "GenerationEvaluator",
    "GenerationRequest",
    "HiddenDataError",
    "Item",
    "ItemResult",
    "PluginWarning",
    "Progress",
    "RegisterAgent",
    "RegisterBackend",
    "RegisterBenchmark",
    "ResourceError",
    "RunResult",
    "Scorer",
    "StepResult",
    "UsageError",
    "__version__",
    "autorl_home",
    "episode_steps",
    "evaluate",
    "file_lock",
    "get_agent",
    "get_backend",
    "get_benchmark",
    "has_hidden_items",
    "hidden_secret",
    "hookimpl",
    "items",
    "items_digest",
    "read_hidden_items",
    "read_jsonl",
    "run",
    "runs",
    "secret_rng",
    "sweep",
    "write_hidden_items",
    "write_json_atomic",
    "write_jsonl_atomic",
    "write_text_atomic",
]

#: The entry points that load with their first use: name -> the module that defines it.
_LAZY = {
    "run": "autorl.runs.runner",
    "evaluate": "autorl.evaluation.checkpoint",
    "items": "autorl.export.frames",
    "RunResult": "autorl.record.result",
}
#: Entry points that are also packages: the package itself, which is callable (``autorl.runs()`` and the run
#: wing ``autorl.runs.plan`` are one name; ``autorl.sweep(spec)`` runs a study and ``autorl.sweep.load(name)``
#: reads one; importing a submodule makes the package the attribute anyway).
_CALLABLE_PACKAGES = ("runs", "sweep")


def __getattr__(name: str) -> Any:
    """``autorl.run``, ``autorl.RunResult``, ``autorl.evaluate``, ``autorl.sweep``, ``autorl.runs`` and
    ``autorl.items``, imported when first used."""
    if name in _CALLABLE_PACKAGES:
        return importlib.import_module(f"autorl.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'autorl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
