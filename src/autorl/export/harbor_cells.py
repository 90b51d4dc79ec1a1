"""What ``autorl export harbor`` is asked for: one exported task per :class:`TaskCell` (a task, its base model,
budget and scoring options), all verified the same way (:class:`Scoring`), checked option by option with a
one-line error before anything is prepared (:func:`check`), and a study's cells as Harbor tasks
(:func:`study_cells`). :mod:`autorl.export.harbor` writes the task directories.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autorl.errors import UsageError
from autorl.export.verifier import REWARDS

__all__ = ["DEFAULT_IMAGE", "NETWORKS", "NOT_EXPORTED", "Scoring", "TaskCell", "check", "study_cells"]

DEFAULT_IMAGE = "python:3.12-slim"
NETWORKS = {"on": "public", "off": "no-network"}
#: cell options a Harbor task has no use for: the agent is Harbor's ``-a``, repeats are its ``-k``
NOT_EXPORTED = (
    "agent",
    "seed",
    "sandbox",
    "agent_env",
    "audit",
    "audit_budget",
    "llm_budget_usd",
    "llm_budget_tokens",
    "grader_gpus",
)
_NAME = re.compile(r"[^a-z0-9._-]+")


@dataclass(frozen=True)
class TaskCell:
    """What makes one exported task: the task, its base model and budget, and how it is scored."""

    task: str
    model: str
    timeout: float
    limit: int | None = None
    backend: str = "hf"
    gpus: int = 0
    network: str = "on"
    benchmark_options: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:8]

    @property
    def name(self) -> str:
        model = Path(self.model.split("@", 1)[0].rstrip("/")).name.replace("autorl:", "")
        limit = f"-{self.limit}items" if self.limit else ""
        return _NAME.sub("-", f"{self.task}-{model}-{self.timeout:g}s{limit}".lower()).strip("-.")


@dataclass(frozen=True)
class Scoring:
    """How every exported task is verified (the same for a study's tasks)."""

    reward: str = "beat-baseline"
    verifier_timeout: float = 3600.0
    verifier_gpus: int | None = None
    image: str = DEFAULT_IMAGE
    build_timeout: float = 1800.0


def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise UsageError(f"{name} must be a positive number of seconds, not {value!r}")


def check(cell: TaskCell, scoring: Scoring) -> None:
    """One line naming the option that is wrong, before anything is prepared."""
    from autorl.plugins.registry import get_backend, get_benchmark

    _positive("--timeout", cell.timeout)
    _positive("--verifier-timeout", scoring.verifier_timeout)
    if cell.limit is not None and (isinstance(cell.limit, bool) or cell.limit < 1):
        raise UsageError(f"--limit must be a positive number of items, not {cell.limit!r}")
    if cell.gpus < 0 or (scoring.verifier_gpus or 0) < 0:
        raise UsageError("--gpus and --verifier-gpus must be 0 or more")
    if cell.network not in NETWORKS:
        raise UsageError(f"--network must be on or off, not {cell.network!r}")
    if scoring.reward not in REWARDS:
        raise UsageError(f"--reward must be one of {', '.join(REWARDS)}, not {scoring.reward!r}")
    if not scoring.image or any(c.isspace() for c in scoring.image):
        raise UsageError(f"--image must name one container image, not {scoring.image!r}")
    get_benchmark(cell.task)
    get_backend(cell.backend)
    if cell.backend == "openai":
        raise UsageError(
            "the openai backend scores what an external server serves; an exported verifier "
            "evaluates the checkpoint itself: use --backend hf or vllm"
        )


def study_cells(spec: str | Path | Mapping[str, Any]) -> list[TaskCell]:
    """A study's cells as Harbor tasks: one per distinct task, model, budget and scoring (agents and seeds are
    Harbor's to choose: ``-a`` and ``-k``)."""
    from autorl.sweep.spec import expand_options, load_spec

    cells: dict[str, TaskCell] = {}
    for o in expand_options(load_spec(spec)):
        cell = TaskCell(
            task=o["task"],
            model=o["model"],
            timeout=float(o["timeout"]),
            limit=o["limit"],
            backend=o["backend"] or "hf",
            gpus=int(o["gpus"]),
            network=o["network"],
            benchmark_options=dict(o["benchmark_options"]),
        )
        cells.setdefault(cell.key, cell)
    return list(cells.values())
