"""What a run is asked to be: one :class:`RunSpec`, built by :func:`autorl.run` from its arguments and by a
study's cells (:meth:`autorl.sweep.spec.Cell.run_spec`), checked when it is built (a one-line
:class:`~autorl.errors.UsageError` naming the flag), and handed whole to :func:`autorl.runs.runner.run_spec`.
Its :class:`Limits` are the run's budgets in one place: its time (the agent's timeout), its submissions (the
grader's quota) and its LLM budget in tokens and in US dollars (the gateway's); one reached is raised as one
family, :class:`~autorl.errors.LimitReached` with the limit's kind as data.
:meth:`RunSpec.cli_args` writes it back as ``autorl run``'s flags, for a run started in its own process."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autorl.errors import UsageError
from autorl.gateway.budget import check_budget
from autorl.grader.keep import POLICIES

__all__ = ["AuditSettings", "Limits", "RunSpec"]


@dataclass(frozen=True)
class Limits:
    """A run's budgets; None: no limit of that kind (for ``submissions``: the grader's own default).

    Attributes:
        time_s: the agent's time budget in seconds (``--timeout``), fixed when the agent starts.
        submissions: the most submissions the grader takes from the agent.
        tokens: the agent's model calls stop (the gateway refuses them) past this many prompt + completion tokens.
        usd: the same, past this cost in US dollars.
    """

    time_s: float | None = None
    submissions: int | None = None
    tokens: int | None = None
    usd: float | None = None

    def __post_init__(self) -> None:
        if self.time_s is not None and self.time_s <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        if self.submissions is not None and self.submissions < 1:
            raise UsageError(f"the submission limit must be at least 1, not {self.submissions}")
        check_budget(self.usd, self.tokens)

    def deadline(self, start: float) -> float:
        """The agent's deadline (epoch seconds) when its clock starts at ``start``."""
        if self.time_s is None:
            raise ValueError("a run without a time limit has no deadline")
        return start + self.time_s


@dataclass(frozen=True)
class AuditSettings:
    """How the run is audited once it is recorded: the deterministic cheat audit (``enabled``, within
    ``budget_s`` of wall clock) and an optional judge model with its number of samples."""

    enabled: bool = True
    budget_s: float = 900.0
    judge: str | None = None
    judge_samples: int = 1

    def __post_init__(self) -> None:
        if self.budget_s <= 0:
            raise UsageError("--audit-budget must be a positive number of seconds")
        if self.judge is not None and (not self.judge.strip() or self.judge_samples < 1):
            raise UsageError("--audit-judge needs a model name and --audit-judge-samples at least 1")

    @property
    def judged(self) -> tuple[str, int] | None:
        """The judge and its samples, or None when no judge audits the run."""
        return (self.judge, self.judge_samples) if self.judge else None


@dataclass(frozen=True)
class RunSpec:
    """One run, as asked for: an agent on a task from a base model within its :class:`Limits`.

    The fields are :func:`autorl.run`'s arguments (its docstring tells each); ``limits`` holds the timeout and the
    LLM budgets, ``audit`` the audit's settings. Mappings are copied into plain dicts when the spec is built.
    """

    agent: str
    task: str
    model: str
    limits: Limits
    port: int | None = None
    backend: str | None = None
    gpus: str | None = None
    runs_dir: Path | None = None
    seed: int = 0
    agent_env: dict[str, str] = field(default_factory=dict)
    agent_credentials: tuple[str, ...] = ()
    benchmark_options: dict[str, Any] = field(default_factory=dict)
    backend_options: dict[str, Any] = field(default_factory=dict)
    eval_timeout: float = 3600.0
    grace_s: float = 10.0
    final_test: bool = True
    test_all: bool = True
    off_target: tuple[str, ...] = ()
    limit: int | None = None
    audit: AuditSettings = field(default_factory=AuditSettings)
    sandbox: str = "auto"
    network: str = "on"
    llm_prices: Path | None = None
    decoys: bool = True
    keep: str = "best"
    output_quota_gb: float | None = None

    def __post_init__(self) -> None:
        if self.limits.time_s is None:
            raise UsageError("--timeout is required: the agent's time budget in seconds")
        if self.limit is not None and self.limit <= 0:
            raise UsageError(f"--limit must be a positive number of items, not {self.limit}")
        if self.keep not in POLICIES:
            raise UsageError(f"--keep must be one of {', '.join(POLICIES)}, not {self.keep!r}")
        if self.port is not None and not 0 < self.port < 65536:
            raise UsageError(f"--port must be between 1 and 65535, not {self.port}")
        if self.output_quota_gb is not None and self.output_quota_gb < 0:
            raise UsageError(f"--output-quota must be a non-negative number of GiB, not {self.output_quota_gb}")
        # plain values of its own: a caller's mapping changed later does not change the run
        object.__setattr__(self, "agent_env", {str(k): str(v) for k, v in self.agent_env.items()})
        object.__setattr__(self, "agent_credentials", tuple(self.agent_credentials))
        object.__setattr__(self, "benchmark_options", dict(self.benchmark_options))
        object.__setattr__(self, "backend_options", dict(self.backend_options))
        object.__setattr__(self, "off_target", tuple(self.off_target))
        # an empty runs_dir is none given: the workspace goes under AUTORL_HOME/runs
        object.__setattr__(self, "runs_dir", Path(self.runs_dir) if self.runs_dir else None)
        if self.llm_prices is not None:
            object.__setattr__(self, "llm_prices", Path(self.llm_prices))

    @property
    def timeout(self) -> float:
        """The agent's time budget in seconds (``limits.time_s``)."""
        assert self.limits.time_s is not None  # checked when the spec was built
        return self.limits.time_s

    @classmethod
    def build(
        cls,
        agent: str,
        task: str,
        model: str,
        timeout: float,
        *,
        audit: bool = True,
        audit_budget_s: float = 900.0,
        audit_judge: str | None = None,
        audit_judge_samples: int = 1,
        llm_budget_usd: float | None = None,
        llm_budget_tokens: int | None = None,
        agent_env: Mapping[str, str] | None = None,
        benchmark_options: Mapping[str, Any] | None = None,
        backend_options: Mapping[str, Any] | None = None,
        runs_dir: Path | str | None = None,
        llm_prices: Path | str | None = None,
        **fields: Any,
    ) -> RunSpec:
        """A spec from :func:`autorl.run`'s arguments (flat: ``timeout`` and the LLM budgets become its
        :class:`Limits`, the ``audit*`` arguments its :class:`AuditSettings`)."""
        return cls(
            agent=agent,
            task=task,
            model=model,
            limits=Limits(time_s=timeout, tokens=llm_budget_tokens, usd=llm_budget_usd),
            audit=AuditSettings(
                enabled=audit, budget_s=audit_budget_s, judge=audit_judge, judge_samples=audit_judge_samples
            ),
            agent_env=dict(agent_env or {}),
            benchmark_options=dict(benchmark_options or {}),
            backend_options=dict(backend_options or {}),
            runs_dir=Path(runs_dir) if runs_dir else None,
            llm_prices=Path(llm_prices) if llm_prices is not None else None,
            **fields,
        )

    def cli_args(self) -> list[str]:
        """``autorl run``'s flags for this spec, for a run started in its own process (a study's attempt): the
        flags that differ from ``autorl run``'s defaults, and always the agent, task, model, timeout, seed,
        sandbox, network and audit budget (without ``--json``). A spec's port, backend options, evaluation
        timeout, grace and final test have no flag and are refused here."""
        unsaid = [
            name
            for name, value, default in (
                ("port", self.port, None),
                ("backend_options", self.backend_options, {}),
                ("eval_timeout", self.eval_timeout, 3600.0),
                ("grace_s", self.grace_s, 10.0),
                ("final_test", self.final_test, True),
                ("submissions", self.limits.submissions, None),
            )
            if value != default
        ]
        if unsaid:
            raise UsageError(f"a run started by `autorl run` cannot be given {', '.join(unsaid)}")
        args = [
            "--agent",
            self.agent,
            "--task",
            self.task,
            "--model",
            self.model,
            "--timeout",
            repr(float(self.timeout)),
            "--seed",
            str(self.seed),
            "--sandbox",
            self.sandbox,
            "--network",
            self.network,
            "--audit-budget",
            repr(float(self.audit.budget_s)),
        ]
        for flag, value in (
            ("--limit", self.limit),
            ("--backend", self.backend),
            ("--llm-budget-usd", self.limits.usd),
            ("--llm-budget-tokens", self.limits.tokens),
        ):
            if value is not None:
                args += [flag, str(value)]
        for k, v in sorted(self.agent_env.items()):
            args += ["--agent-env", f"{k}={v}"]
        for name in self.agent_credentials:
            args += ["--agent-credential", name]
        for k, o in sorted(self.benchmark_options.items()):
            args += ["--benchmark-option", f"{k}={json.dumps(o)}"]
        if not self.audit.enabled:
            args.append("--no-audit")
        if self.audit.judge:
            args += ["--audit-judge", self.audit.judge, "--audit-judge-samples", str(self.audit.judge_samples)]
        if not self.decoys:
            args.append("--no-decoys")
        if not self.test_all:
            args.append("--no-test-all")
        for name in self.off_target:
            args += ["--off-target", name]
        paths: tuple[tuple[str, object], ...] = (
            ("--gpus", self.gpus),
            ("--runs-dir", self.runs_dir),
            ("--llm-prices", self.llm_prices),
            ("--output-quota", self.output_quota_gb),
        )
        args += [part for flag, given in paths if given is not None for part in (flag, str(given))]
        if self.keep != "best":
            args += ["--keep", self.keep]
        return args
