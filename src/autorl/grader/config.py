"""The grader's configuration: what one grader process needs, and the one way a run builds it.

The orchestrator (``autorl run``), the standalone ``autorl grader serve`` and the ``local_grader`` test fixture
all build it with :meth:`GraderConfig.for_run`; the grader process reads it back with :meth:`GraderConfig.load`.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.resources import private_dir

if TYPE_CHECKING:
    from autorl.resources import BenchmarkData, ResolvedModel


#: the pause before an evaluation that failed for the harness's reason is tried again (times the attempt's number)
HARNESS_BACKOFF_ENV = "AUTORL_HARNESS_BACKOFF_S"


def _seconds_from_env(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value >= 0 else default


@dataclass
class GraderConfig:
    """Everything a grader process needs; written by the orchestrator, readable only by its owner."""

    task: str
    workspace: str
    output_dir: str
    store_dir: str
    hidden_dir: str
    base_model: str | None = None
    base_model_name: str | None = None
    backend: str = "hf"
    backend_options: dict[str, Any] = field(default_factory=dict)
    benchmark_options: dict[str, Any] = field(default_factory=dict)
    deadline: float | None = None
    agent_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    admin_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    eval_timeout: float = 3600.0
    #: load the base model's engine when the grader starts, so that the first submission finds it warm
    warm_up: bool = True
    #: seconds a warm-up may take (at most ``eval_timeout``) before its worker is replaced
    warmup_timeout: float = 900.0
    #: an evaluation that fails for the harness's reason (GPU memory taken by another run, an engine that died)
    #: is tried again this many times, after ``harness_backoff_s`` times the attempt's number of seconds
    harness_retries: int = 2
    harness_backoff_s: float = field(default_factory=lambda: _seconds_from_env(HARNESS_BACKOFF_ENV, 20.0))
    max_submissions: int = 200
    max_queue: int = 16
    max_bytes: int = 64 * 2**30
    max_files: int = 2000
    #: one entry per evaluation slot: extra environment for its worker (e.g. CUDA_VISIBLE_DEVICES)
    workers: list[dict[str, str]] = field(default_factory=lambda: [{}])
    baseline_cache_dir: str | None = None
    evaluate_baseline: bool = True
    limit: int | None = None
    python: str = sys.executable
    #: what stays on disk once a submission is scored (``best``, ``selected``, ``all``: autorl.grader.keep)
    keep: str = "best"
    #: apply the keep policy while the run goes, not only once it is recorded (checkpoints large enough for the
    #: disk to matter)
    keep_while_running: bool = True
    #: the run scores every submission on the test split (the best-of-k figure): with a keep policy applied while
    #: the run goes, the grader does so between submissions, before their copies go
    test_each: bool = False
    #: the most bytes the agent's workspace and /tmp (``agent_tmp``) may hold when it submits (None: no quota)
    output_quota: int | None = None
    agent_tmp: str | None = None
    #: the run's decoy tokens (token -> decoy name): refused as any wrong token, and noted wherever in a request
    #: they appear (autorl.decoys.DecoyTokens)
    decoy_tokens: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_run(
        cls,
        *,
        task: str,
        workspace: Path,
        output_dir: Path,
        store_dir: Path,
        data: BenchmarkData,
        base: ResolvedModel | None,
        backend: str,
        home: Path | None = None,
        **overrides: Any,
    ) -> GraderConfig:
        """The configuration of the grader of one run.

        ``data`` is the benchmark's prepared data (its hidden folder is the grader's), ``base`` the resolved base
        model (``None``: no baseline, full checkpoints only). ``store_dir`` is created private to its owner.
        With ``home`` (``AUTORL_HOME``) baselines are cached across runs in ``home/baselines``. ``overrides``
        set any other field (``backend_options``, ``eval_timeout``, ``workers``, ``limit``, ...); an unknown
        name is a ``TypeError``.
        """
        unknown = set(overrides) - set(cls.__dataclass_fields__)
        if unknown:
            raise TypeError(f"GraderConfig has no field(s) {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {
            "task": task,
            "workspace": str(workspace),
            "output_dir": str(output_dir),
            "store_dir": str(private_dir(Path(store_dir))),
            "hidden_dir": str(data.hidden_dir),
            "base_model": str(base.path) if base is not None else None,
            "base_model_name": base.spec if base is not None else None,
            "backend": backend,
            "baseline_cache_dir": str(private_dir(Path(home) / "baselines")) if home is not None else None,
        }
        values.update(overrides)
        return cls(**values)

    def save(self, path: Path) -> None:
        """Write the configuration as JSON, readable only by its owner (it holds both tokens)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(self), f, indent=2)

    @classmethod
    def load(cls, path: Path) -> GraderConfig:
        """Read a configuration written by :meth:`save` (fields it does not know are ignored)."""
        data = json.loads(path.read_text())
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})
