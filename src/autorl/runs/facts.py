"""What a run is, fixed before its agent starts: its names, where it lives and the conditions it runs under.

The runner writes them into the ledger's row of the run in flight when the run starts (the ledger is out of the
agent's reach), and both ways a run ends read them from there or from the runner: the live end, and
``autorl recover`` after the orchestrator died. The record's conditions are built from these facts alone
(:func:`autorl.runs.finish.build_result`), so that the two records have the same fields.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, cast

from autorl.decoys import PlantedRecord
from autorl.inference.gpu_share import GpuBudgetRecord
from autorl.record.schema import LiveRecord
from autorl.version import __version__

__all__ = ["RunFacts"]


@dataclass(frozen=True)
class RunFacts:
    """One run's facts (all JSON values). The first ones are what every row of a run in flight has had; the
    later ones were added for the record and default to "unknown" for a row written by an older version."""

    run_id: str
    task: str
    agent: str
    #: the model as the user gave it (a local path, a hub id, ``autorl:tiny``)
    base_model: str
    started: float
    timeout_s: float
    workspace: str = ""
    store_dir: str = ""
    seed: int = 0
    #: the sandbox the run is recorded under (``bwrap`` or ``none``)
    sandbox: str | None = None
    limit: int | None = None
    harness_hashes: dict[str, str] = field(default_factory=dict)
    #: set once the baseline is scored: the agent's start and deadline (epoch seconds)
    deadline: float | None = None
    agent_started: float | None = None
    backend: str | None = None
    #: the base model's files, where it came from (``local``, ``hub``, ``builtin``) and its revision
    model_path: str | None = None
    model_source: str | None = None
    model_revision: str | None = None
    hidden_dir: str = ""
    benchmark_options: dict[str, Any] = field(default_factory=dict)
    network: str | None = None
    sandbox_warning: str | None = None
    #: the agent's /tmp (bwrap only) and the watcher's record of its files, out of the agent's reach
    tmp_dir: str | None = None
    watch_dir: str | None = None
    #: the LLM gateway's folder (its calls and, once closed, its totals)
    gateway_dir: str | None = None
    #: the decoys planted in the workspace (autorl.decoys.Planted as a dict; None: none planted)
    decoys: PlantedRecord | None = None
    #: how many GPUs the agent and the grader had (``{"agent": n, "grader": n}``; None: unknown)
    gpu_counts: dict[str, int] | None = None
    #: the run's share of a GPU it shared with its agent or other runs (autorl.inference.gpu_share.GpuBudget)
    gpu_budget: GpuBudgetRecord | None = None
    #: seconds spent before ``started`` getting the base model (a download, the built-in model's build) and the
    #: benchmark's data ready; None: not measured
    prepare_s: float | None = None
    #: the local folder the task was given as (``--task ./folder``), which a later process resolves the task from
    task_source: str | None = None
    autorl_version: str | None = __version__
    python: str | None = field(default_factory=lambda: sys.version.split()[0])

    def to_dict(self) -> LiveRecord:
        # LiveRecord names these fields with these types (tests/test_record_types.py holds them equal)
        return cast(LiveRecord, asdict(self))

    @classmethod
    def from_live(cls, live: Mapping[str, Any]) -> RunFacts:
        """The facts of a ledger row of a run in flight: keys it does not know are ignored, missing ones take
        their defaults (``autorl_version`` and ``python``: unknown)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in live.items() if k in known}
        values.setdefault("autorl_version", None)
        values.setdefault("python", None)
        return cls(**values)
