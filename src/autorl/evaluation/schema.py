"""The evaluation layer's JSON records, as the grader stores them, sends them between processes and reads them
back: an evaluation record (:class:`EvalRecord`, what :meth:`autorl.evaluation.run.EvalRecord.to_dict` gives;
:class:`EvalIdentity`, what its config hash covers) and the paired comparison of two of them
(:class:`Comparison`). :mod:`autorl.grader.schema` holds them with the grader's own records.

These are promises to the type checker about records this harness wrote, not checks: a record read from a file
an agent could have written is validated where it is read, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # typing has it from Python 3.11; annotations are never evaluated here (``from __future__``)
    from typing import NotRequired


class EvalIdentity(TypedDict):
    """Everything that can move a score other than the model itself (:func:`autorl.evaluation.identity.eval_config`);
    its hash is a record's ``config_hash``."""

    benchmark: str
    benchmark_version: str
    split: str
    #: the benchmark's :class:`~autorl.scoring.EvalConfig` (prompting and decoding)
    eval_config: dict[str, Any]
    #: the backend's :meth:`~autorl.inference.base.Backend.identity` (each backend its own keys)
    backend: dict[str, Any]
    evaluation_version: str
    #: the benchmark's :meth:`~autorl.benchmark.Benchmark.identity`, where it has such settings
    benchmark_identity: NotRequired[dict[str, Any]]
    #: the hash of the split's hidden items (the grader always has it)
    hidden_items: NotRequired[str]
    #: only the first ``limit`` items were scored
    limit: NotRequired[int]


class EvalRecord(TypedDict):
    """One evaluation of one model on one split, in percentage points (what
    :meth:`autorl.evaluation.run.EvalRecord.to_dict` gives). ``item_scores`` (item id -> score in [0, 1]), which
    the paired comparison needs, is absent from the summary a store keeps with a submission (:func:`summary`);
    ``engine``, ``load_s`` and ``generate_s`` are absent from records written before they were measured (a
    baseline cached across runs)."""

    benchmark: str
    split: str
    score: float
    n: int
    stderr: float
    ci95: list[float]
    #: :func:`autorl.evaluation.identity.stable_hash` of ``config``
    config_hash: str
    config: EvalIdentity
    item_scores: NotRequired[dict[str, float]]
    #: items whose evaluation raised (scored 0)
    errors: int
    duration_s: float
    output_tokens: int
    per_item_path: str | None
    #: the evaluator's figures (``ci_method``, ``single_split``, success rate, judge cost, engine figures such
    #: as ``wake_s`` and ``gpu_turn``, the grader's ``worker`` and ``cached``): open, each evaluator its own
    extra: dict[str, Any]
    #: ``fresh``, ``reused`` or ``reloaded`` (:data:`autorl.inference.base.FRESH` ...)
    engine: NotRequired[str]
    load_s: NotRequired[float]
    generate_s: NotRequired[float]


class TestSummary(EvalRecord):
    """A test-split evaluation as the store keeps it with a submission's test score: the summary (no item scores)
    and the base model's test score beside it (``None`` without a base model)."""

    baseline_score: float | None


class Comparison(TypedDict):
    """Candidate minus baseline on the same items (:class:`autorl.evaluation.stats.PairedComparison`), in
    percentage points; ``ci95`` excludes 0 exactly when ``p_value < 0.05``."""

    n: int
    difference: float
    ci95: list[float]
    p_value: float
    #: ``mcnemar-exact``, ``paired-t`` or ``none`` (no items)
    test: str
    wins: int
    losses: int
    ties: int


class ScoreSummary(TypedDict):
    """One score's uncertainty (:class:`autorl.evaluation.stats.ScoreStats`)."""

    n: int
    mean: float
    stderr: float
    ci95: list[float]
    #: ``wilson``, ``t`` or ``empty``
    method: str


def summary(record: EvalRecord) -> EvalRecord:
    """An evaluation record less its per-item scores (what a store keeps with a submission)."""
    kept = record.copy()
    kept.pop("item_scores", None)
    return kept
