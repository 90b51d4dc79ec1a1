"""The schema of the grader's records: every JSON-shaped record the grader stores, returns over its API and
hands the orchestrator, as typed dictionaries (the names here stay stable; the runs, record and ui layers read
the grader through them).

- The store's rows (:mod:`autorl.grader.store`): :class:`SubmissionRow`, :class:`BaselineRow`,
  :class:`TestRow`, :class:`RefusalRow`; each JSON column read back as its record (:class:`EvalRecord`,
  :class:`TestSummary`, :class:`Comparison`, :class:`Pruned`).
- What the agent sees of a submission (:class:`SubmissionRecord`, ``GET /submissions``, the workspace's
  ``scores.json``) and what the orchestrator collects (:class:`GraderState`, ``GET /admin/state``), with a test
  score (:class:`TestRecord`) and the dev baseline (:class:`BaselineRecord`); built by :mod:`autorl.grader.records`.
- An evaluation record (:class:`EvalRecord`) and the paired comparison (:class:`Comparison`), from the
  evaluation layer (:mod:`autorl.evaluation.schema`).
- The jobs a grader slot sends its worker and the worker's answers (:class:`EvalJob`, :class:`WorkerAnswer`,
  :class:`WarmUp`).

A typed dictionary is a promise to the type checker, not a check: a store file, a cache entry or anything an
agent could have written is validated where it is read, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from autorl.evaluation.schema import (
    Comparison,
    EvalIdentity,
    EvalRecord,
    ScoreSummary,
    TestSummary,
)

if TYPE_CHECKING:  # typing has it from Python 3.11; annotations are never evaluated here (``from __future__``)
    from typing import NotRequired

__all__ = [
    "BaselineRecord",
    "BaselineRow",
    "Best",
    "Comparison",
    "EvalIdentity",
    "EvalJob",
    "EvalRecord",
    "GraderState",
    "HowEvaluated",
    "KeepReport",
    "Pruned",
    "RefusalRow",
    "ScoreSummary",
    "SnapshotColumns",
    "SubmissionRecord",
    "SubmissionRow",
    "TestRecord",
    "TestRow",
    "TestSummary",
    "TimeInfo",
    "WarmUp",
    "WorkerAnswer",
]


# -- the store's rows ------------------------------------------------------------------------------------------
class Pruned(TypedDict):
    """When a submission's copies were deleted by the run's keep policy (:mod:`autorl.grader.keep`), and what of
    them: ``agent_copy`` is ``deleted``, ``emptied (...)``, ``not reachable`` or ``kept: <why>``."""

    at: float
    policy: str
    freed_bytes: int
    agent_copy: str


class KeepReport(TypedDict):
    """What applying a run's keep policy after the run did (with ``dry_run``: would do), in the record's
    ``meta.disk`` and ``autorl clean``'s report (:func:`autorl.grader.keep.keep_after_run`)."""

    #: ``None``: the store is gone and no policy was given
    policy: str | None
    #: the submissions whose copies went
    pruned: list[int]
    freed_bytes: int


class SnapshotColumns(TypedDict):
    """The columns of a submission row that hold its snapshot (:meth:`autorl.grader.snapshot.Snapshot.to_row`)."""

    snapshot: str
    #: ``full`` or ``lora``
    kind: str
    content_hash: str


class SubmissionRow(TypedDict):
    """One row of the store's ``submissions`` table, its JSON columns decoded."""

    id: int
    created_at: float
    #: the path the agent submitted, as it sent it
    model_path: str
    #: the grader's copy (``None`` while pending, or when the copy failed)
    snapshot: str | None
    content_hash: str | None
    kind: str
    #: ``pending``, ``queued``, ``running``, ``done`` or ``failed`` (:data:`autorl.grader.store.DONE` ...)
    status: str
    score: float | None
    #: the dev evaluation's summary (no item scores)
    record: EvalRecord | None
    comparison: Comparison | None
    error: str | None
    started_at: float | None
    finished_at: float | None
    duplicate_of: int | None
    attempts: int
    #: the harness's reason when the evaluation failed for it (:mod:`autorl.inference.failures`); this key and
    #: ``pruned`` are absent from a store written before their columns, opened read-only (never migrated)
    infra_failure: NotRequired[str | None]
    pruned: NotRequired[Pruned | None]


class BaselineRow(TypedDict):
    """One row of the store's ``baseline`` table: a split's base-model score, with its evaluation record
    (``None`` when the score was set by hand)."""

    split: str
    score: float
    record: EvalRecord | None
    #: ``evaluated`` or ``set``
    source: str
    set_at: float


class TestRow(TypedDict):
    """One row of the store's ``test_scores`` table: a submission's one test-split evaluation."""

    submission_id: int
    score: float | None
    record: TestSummary | None
    comparison: Comparison | None
    #: ``running`` (claimed), ``done`` or ``failed``
    status: str
    error: str | None
    created_at: float
    #: absent from a store written before its column, opened read-only
    infra_failure: NotRequired[str | None]


class RefusalRow(TypedDict):
    """One refused submission (evidence for the audit)."""

    id: int
    created_at: float
    model_path: str
    reason: str
    #: ``bad_request``, ``quota``, ... (:func:`autorl.grader.validation.refusal_kind`); absent from a store written
    #: before its column, opened read-only
    kind: NotRequired[str]


# -- what the agent and the orchestrator see ----------------------------------------------------------------------
class Best(TypedDict):
    """The run's best finished submission on dev."""

    submission_id: int
    score: float


class HowEvaluated(TypedDict):
    """How a submission was evaluated (:data:`autorl.grader.records.HOW_EVALUATED`): the engine (``fresh``,
    ``reused`` or ``reloaded``), the seconds to load and generate, to wake the engine and to put it to sleep
    (``None`` where a record has no such figure)."""

    engine: str | None
    load_s: float | None
    generate_s: float | None
    wake_s: float | None
    sleep_s: float | None


class SubmissionRecord(HowEvaluated):
    """What the agent sees of one submission (dev split only, never item-level results)."""

    submission_id: int
    status: str
    model_path: str
    kind: str
    #: always ``dev``
    split: str
    score: float | None
    n: int | None
    stderr: float | None
    ci95: list[float] | None
    baseline_score: float | None
    improvement: float | None
    improvement_ci95: list[float] | None
    p_value: float | None
    best: Best | None
    total_submissions: int
    error: str | None
    infra_failure: str | None
    pruned: Pruned | None
    duplicate_of: int | None
    content_hash: str | None
    config_hash: str | None
    #: the evaluator's figures, less its bookkeeping (``ci_method``, ``single_split``)
    extra: dict[str, Any]
    created_at: float
    finished_at: float | None


class TestRecord(HowEvaluated):
    """One test-split score as the orchestrator sees it (its baseline and comparison fixed when it was scored)."""

    submission_id: int
    #: always ``test``
    split: str
    status: str
    score: float | None
    n: int | None
    ci95: list[float] | None
    baseline_score: float | None
    improvement: float | None
    improvement_ci95: list[float] | None
    p_value: float | None
    error: str | None
    infra_failure: str | None
    config_hash: str | None
    extra: dict[str, Any]


class BaselineRecord(TypedDict):
    """The dev baseline as ``GET /admin/baseline`` answers it: its score and source, and, when it was evaluated
    (not set by hand), its evaluation record's summary."""

    score: float
    source: str
    benchmark: NotRequired[str]
    split: NotRequired[str]
    n: NotRequired[int]
    stderr: NotRequired[float]
    ci95: NotRequired[list[float]]
    config_hash: NotRequired[str]
    config: NotRequired[EvalIdentity]
    #: never sent (the summary drops it); here because the summary is typed as the record it comes from
    item_scores: NotRequired[dict[str, float]]
    errors: NotRequired[int]
    duration_s: NotRequired[float]
    output_tokens: NotRequired[int]
    per_item_path: NotRequired[str | None]
    extra: NotRequired[dict[str, Any]]
    engine: NotRequired[str]
    load_s: NotRequired[float]
    generate_s: NotRequired[float]


class GraderState(TypedDict):
    """Everything the orchestrator collects at the end of a run (``GET /admin/state``)."""

    task: str
    #: the dev baseline's evaluation record (summary), or its row when it was set by hand; ``None``: none yet
    baseline: EvalRecord | BaselineRow | None
    baseline_score: float | None
    baseline_error: str | None
    submissions: list[SubmissionRecord]
    best: Best | None
    test: list[TestRecord]
    #: submissions by status
    counts: dict[str, int]
    refusals: list[RefusalRow]
    closed: bool


class TimeInfo(TypedDict):
    """``GET /time``: the grader's clock, the run's deadline and whether it still takes submissions."""

    now: float
    deadline: float | None
    remaining_s: float | None
    closed: bool


# -- a slot and its worker ------------------------------------------------------------------------------------------
class EvalJob(TypedDict):
    """What a grader slot sends its worker (:func:`autorl.grader.worker.build_job`): everything needed to evaluate
    a submission's snapshot (``None``: the run's base model) on one split."""

    task: str
    benchmark_options: dict[str, Any]
    backend: str
    backend_options: dict[str, Any]
    snapshot: SnapshotColumns | None
    base_model_dir: str | None
    split: str
    hidden_dir: str
    limit: int | None
    per_item_path: str
    log_path: str
    #: the cross-run baseline cache (base model jobs only)
    cache_dir: str | None
    scratch_dir: str
    #: load the base model's engine and let it idle, evaluating nothing (:func:`autorl.grader.worker.warm_up`)
    warm_up: NotRequired[bool]
    #: the slot's token that the answer carries back
    nonce: NotRequired[str]


class WarmUp(TypedDict, total=False):
    """What a slot's warm-up did (``engine``, ``load_s``, ``sleep_s``), or why it did nothing (``skipped``) or
    failed (``error``); the slot adds how long it took and when it finished."""

    engine: str
    load_s: float
    sleep_s: float | None
    skipped: str
    error: str
    took_s: float
    finished_at: float


class WorkerAnswer(TypedDict, total=False):
    """The worker's answer to one job: ``ok`` with the evaluation record (or the warm-up's report), else the
    error, whether the harness is to blame (``harness``) or the job wants a fresh process (``restart``)."""

    nonce: str | None
    ok: bool
    record: EvalRecord | WarmUp
    retiring: bool
    restart: bool
    error: str
    harness: str | None
