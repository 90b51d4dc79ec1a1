"""The run's record as JSON holds it, typed: its row (:class:`RowRecord`, the columns of
:class:`~autorl.record.row.RunRow` but the audit's), the row as the ledger and ``results.csv`` give it
(:class:`LedgerRow`), the agent's outcome, the audit's flags, the run in flight, and the whole record
(:class:`ResultRecord`, what ``result.json`` and the ledger keep).

These are promises to the type checker, not checks: a record read back from disk is still checked where it is
read (:func:`autorl.record.ledger.check_result`), and a key an older version did not write is read with ``.get``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, Required, TypedDict

if TYPE_CHECKING:
    from autorl.decoys import PlantedRecord
    from autorl.grader.schema import BaselineRow, EvalRecord, SubmissionRecord, TestRecord
    from autorl.inference.gpu_share import GpuBudgetRecord

__all__ = [
    "AuditFlag",
    "FlagRecord",
    "JudgeColumns",
    "LedgerRow",
    "LiveRecord",
    "OffTargetRecord",
    "OrchestratorRecord",
    "OutcomeRecord",
    "OverrideRecord",
    "Recovery",
    "ResultRecord",
    "RowRecord",
]


class OffTargetRecord(TypedDict):
    """One off-target benchmark's base and selected test scores and their paired change
    (:func:`autorl.runs.offtarget.score_off_target`); ``error`` says why a score is missing."""

    task: str
    base: float | None
    selected: float | None
    change: float | None
    ci95: list[float] | None
    p_value: float | None
    regressed: bool
    error: str | None
    split: NotRequired[str]


class RowRecord(TypedDict):
    """A run's row as ``result.json`` keeps it: every column of :class:`~autorl.record.row.RunRow` (same names,
    same types; their meanings are documented there) but ``audit_flags``, which the ledger keeps."""

    run_id: str
    timestamp: str
    task: str
    agent: str
    base_model: str
    baseline: float | None
    best_score: float | None
    improvement: float | None
    submissions: int
    duration_s: float
    success: bool
    workspace: str
    improvement_ci95: list[float] | None
    p_value: float | None
    best_submission: int | None
    test_baseline: float | None
    test_score: float | None
    test_improvement: float | None
    test_improvement_ci95: list[float] | None
    dev_baseline: float | None
    dev_best: float | None
    dev_improvement: float | None
    dev_improvement_ci95: list[float] | None
    dev_k: int
    end_reason: str
    seed: int
    config_hash: str | None
    sandbox: str | None
    llm_tokens: int | None
    llm_cost_usd: float | None
    llm_usage_source: str | None
    run_key: str | None
    sweep: str | None
    headline_rule: str | None
    decoys: list[str] | None
    decoys_read: list[str] | None
    valid_submission_rate: float | None
    first_valid_idx: int | None
    first_valid_delay: float | None
    score_trajectory: list[list[float]] | None
    time_to_first_improvement: float | None
    time_to_best: float | None
    monotonic_ratio: float | None
    copy_model_count: int | None
    time_used_ratio: float | None
    last_submit_gap: float | None
    beat_baseline: bool
    driver_model: str | None
    test_best_of_k: float | None
    test_best_of_k_k: int | None
    test_best_of_k_submission: int | None
    test_selection_gap: float | None
    agent_gpu_seconds: float | None
    grader_gpu_seconds: float | None
    improvement_per_gpu_hour: float | None
    improvement_per_usd: float | None
    off_target: list[OffTargetRecord] | None
    off_target_regressed: bool | None
    timeout_s: float | None
    infra_failure: str | None
    judge_model: str | None
    judge_prompt_hash: str | None
    judge_samples: int | None
    limit: int | None


class JudgeColumns(TypedDict):
    """The row's columns of the judged audit (:meth:`autorl.audit.judge.Judgement.columns`)."""

    judge_model: str | None
    judge_prompt_hash: str | None
    judge_samples: int | None


class LedgerRow(RowRecord):
    """A run's row as the ledger and ``results.csv`` give it: the recorded row with the audit's open flags
    (``name(severity)``) and, from the ledger, the flags a person overrode."""

    audit_flags: list[str]
    audit_overridden: NotRequired[list[str]]


class OverrideRecord(TypedDict):
    """A person's decision on an audit flag (the ledger's ``audit_overrides``)."""

    reason: str
    decided_by: str
    decided_at: str


class FlagRecord(TypedDict):
    """An audit flag as a run's record holds it (:class:`autorl.audit.flags.Flag`)."""

    name: str
    severity: str
    detail: str
    evidence: list[str]


class AuditFlag(FlagRecord):
    """An audit flag as the ledger gives it: with the decisions people took on it, latest last."""

    overrides: list[OverrideRecord]


class OutcomeRecord(TypedDict):
    """How the agent's process ended (:class:`autorl.procs.agent.AgentOutcome` as a dict): its exit code (None
    if it never started or was not seen to end), whether the deadline stopped it, how long it ran, why."""

    exit_code: int | None
    timed_out: bool
    duration_s: float
    reason: str
    #: the end of the agent's log when it died at once (it could not even start: it says why only there)
    log_tail: NotRequired[str]


class OrchestratorRecord(TypedDict):
    """Who finished the run: ``lost_at`` None when its own orchestrator did."""

    lost_at: float | None
    detail: str | None
    recovered_at: float | None
    how: str


class LiveRecord(TypedDict, total=False):
    """A run in flight as the ledger keeps it: :class:`autorl.runs.facts.RunFacts` as a dict (same names and
    types); the required keys are those every version wrote."""

    run_id: Required[str]
    task: Required[str]
    agent: Required[str]
    base_model: Required[str]
    started: Required[float]
    timeout_s: float
    workspace: str
    store_dir: str
    seed: int
    sandbox: str | None
    limit: int | None
    harness_hashes: dict[str, str]
    deadline: float | None
    agent_started: float | None
    backend: str | None
    model_path: str | None
    model_source: str | None
    model_revision: str | None
    hidden_dir: str
    #: the benchmark plugin's own options (open)
    benchmark_options: dict[str, Any]
    network: str | None
    sandbox_warning: str | None
    tmp_dir: str | None
    watch_dir: str | None
    gateway_dir: str | None
    #: the decoys planted (autorl.decoys.Planted as a dict)
    decoys: PlantedRecord | None
    gpu_counts: dict[str, int] | None
    gpu_budget: GpuBudgetRecord | None
    prepare_s: float | None
    task_source: str | None
    autorl_version: str | None
    python: str | None


class Recovery(TypedDict, total=False):
    """A lost run's ``recover``: the command that records it (``autorl recover RUN_ID``)."""

    recover: str


class ResultRecord(TypedDict, total=False):
    """A run's whole record, as ``result.json`` and the ledger keep it (:meth:`autorl.record.result.RunResult.to_dict`).
    A record read from a file is only sure to have its row (:func:`autorl.record.ledger.check_result`)."""

    run_id: str
    row: Required[RowRecord]
    submissions: list[SubmissionRecord]
    #: the grader's dev baseline evaluation (its row when the score was set by hand)
    baseline: EvalRecord | BaselineRow | None
    #: the dev-selected submission's test evaluation
    test: TestRecord | None
    agent: OutcomeRecord
    run_dir: str
    #: the run's conditions (:func:`autorl.runs.finish.build_result`)
    meta: dict[str, Any]
    audit: list[FlagRecord]
