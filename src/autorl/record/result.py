"""A run's whole record as a notebook and ``result.json`` see it (:class:`RunResult`): its row, its submissions, its
test evaluation and its agent, with the row's figures by name, each read as its type."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from autorl.record.display import as_number as _number
from autorl.record.display import as_pair as _pair
from autorl.record.display import run_html, run_repr
from autorl.record.schema import FlagRecord, OutcomeRecord, ResultRecord, RowRecord

if TYPE_CHECKING:
    from autorl.grader.schema import BaselineRow, EvalRecord, SubmissionRecord, TestRecord

__all__ = ["RunResult"]


_T = TypeVar("_T")


def _count(value: Any) -> int:
    return int(_number(value) or 0)


class _Column(Generic[_T]):
    """A read-only attribute of :class:`RunResult`: its row's ``key``, read by ``read``."""

    def __init__(self, key: str, read: Callable[[Any], _T], doc: str | None = None) -> None:
        self.key, self.read, self.__doc__ = key, read, doc

    @overload
    def __get__(self, result: None, owner: type[Any]) -> _Column[_T]: ...

    @overload
    def __get__(self, result: RunResult, owner: type[Any]) -> _T: ...

    def __get__(self, result: RunResult | None, owner: type[Any]) -> _Column[_T] | _T:
        return self if result is None else self.read(result.row.get(self.key))

    def __set__(self, result: RunResult, value: Any) -> None:
        raise AttributeError(f"RunResult's {self.key} is read from its row")


@dataclass(repr=False)
class RunResult:
    """The outcome of one run; ``row`` is its ledger / results.csv row (:meth:`RunRow.record`).

    In a notebook the named properties say which split a figure is on: the headline (``test_baseline``,
    ``test_score``, ``improvement``, ``improvement_ci95``, ``p_value``) is the held-out test split; the
    ``dev_*`` figures are the best of ``k`` scored submissions on the split the agent saw (optimistic).
    """

    run_id: str
    row: RowRecord
    submissions: list[SubmissionRecord]
    #: the grader's dev baseline evaluation (``result.json`` keeps it under ``baseline``)
    dev_baseline_record: EvalRecord | BaselineRow | None
    test: TestRecord | None
    agent: OutcomeRecord
    run_dir: Path
    meta: dict[str, Any] = field(default_factory=dict)
    audit: list[FlagRecord] = field(default_factory=list)

    def to_dict(self) -> ResultRecord:
        """The run as ``result.json`` holds it (a copy: changing it leaves the run as it is)."""
        return copy.deepcopy(
            ResultRecord(
                run_id=self.run_id,
                row=self.row,
                submissions=self.submissions,
                baseline=self.dev_baseline_record,
                test=self.test,
                agent=self.agent,
                run_dir=str(self.run_dir),
                meta=self.meta,
                audit=self.audit,
            )
        )

    # the row's figures by name, each read as its type (the row is data read back from disk)
    task = _Column("task", str)
    agent_name = _Column("agent", str)
    model = _Column("base_model", str)
    test_baseline = _Column("baseline", _number, "The base model's score on the held-out test split.")
    test_score = _Column(
        "best_score", _number, "The dev-selected checkpoint's score on the held-out test split (the result)."
    )
    improvement = _Column("improvement", _number, "``test_score - test_baseline``, paired on the same items.")
    improvement_ci95 = _Column("improvement_ci95", _pair)
    p_value = _Column("p_value", _number, "The paired test's p-value for the test improvement.")
    success = _Column("success", bool)
    k = _Column("dev_k", _count, "How many submissions were scored on dev (the dev figures are the best of these).")
    dev_baseline = _Column("dev_baseline", _number)
    dev_best = _Column("dev_best", _number, "The best of ``k`` dev scores: optimistic, the agent saw them.")
    dev_improvement = _Column("dev_improvement", _number)
    dev_improvement_ci95 = _Column("dev_improvement_ci95", _pair)

    @property
    def baseline(self) -> EvalRecord | BaselineRow | None:
        """Deprecated: the dev baseline's record; use ``dev_baseline_record`` (or ``test_baseline``)."""
        warnings.warn(
            "RunResult.baseline is the dev baseline's record: use dev_baseline_record, or "
            "test_baseline / dev_baseline for the scores",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.dev_baseline_record

    @property
    def baseline_score(self) -> float | None:
        """Deprecated: the test baseline's score; use ``test_baseline``."""
        warnings.warn(
            "RunResult.baseline_score is the test baseline: use test_baseline (or dev_baseline)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.test_baseline

    def __repr__(self) -> str:
        return run_repr(self)

    def _repr_html_(self) -> str:
        return run_html(self)
