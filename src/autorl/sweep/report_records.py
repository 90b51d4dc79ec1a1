"""The records of a study's report (:func:`autorl.sweep.report.build_report`, ``autorl sweep report --json``,
:class:`autorl.sweep.StudyResult`): its cells with their runs, the agents' paired comparisons, the keys without a
result, the decoys taken; the live table's lines and the flat records for a data frame."""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["BaitTaken", "CellState", "Comparison", "Missing", "ReportCell", "RunSummary", "StudyRecord", "StudyReport"]


class Missing(TypedDict):
    """A key of a study's report without a counted result, and why."""

    agent: str
    task: str
    model: str
    seed: int
    run_key: str
    status: str
    reasons: list[str]


class Comparison(TypedDict):
    """Two agents' paired difference in a study's report: the mean of A - B over the seeds both ran."""

    task: str
    base_model: str
    config_hash: str
    agent_a: str
    agent_b: str
    pairs: int
    seeds: list[Any]  # the seeds as the rows recorded them
    mean_difference: float
    ci95: list[float] | None
    differences: list[float]


class BaitTaken(TypedDict):
    """Per agent in a study's report: its runs with decoys, how many took the bait, the share, how many only read."""

    agent: str
    runs: int
    took_bait: int
    share: float
    read_only: int


class RunSummary(TypedDict):
    """One counted run of a report's cell."""

    run_id: str
    run_key: str | None
    seed: Any  # the seed as the row recorded it
    improvement: float | None
    improvement_ci95: list[float] | None
    success: bool
    beat_baseline: bool
    end_reason: str | None
    attempts: int | None
    infra_failures: list[str]


class _CellNoise(TypedDict, total=False):
    #: the noise floor ``autorl noise`` measured for the cell's task and base model (a study's report only)
    noise_floor: Any


class ReportCell(_CellNoise):
    """A cell of a study's report: its runs' group (:meth:`autorl.record.aggregate.RunGroup.as_dict`) and the rates
    and means over its runs."""

    task: str
    agent: str
    base_model: str
    config_hash: str
    runs: int
    failures: int
    mean: float
    ci95: list[float] | None
    values: list[float]
    run_ids: list[str]
    driver_model: str
    timeout_s: float | None
    sandbox: str | None
    limit: int | None
    scored: int
    failure_rate: float
    success_rate: float
    beat_baseline_rate: float
    off_target_regressed_rate: float | None
    per_run: list[RunSummary]
    process_means: dict[str, float | None]
    efficiency_means: dict[str, float | None]


class _StudyPlace(TypedDict, total=False):
    sweep: str
    dir: str


class StudyReport(_StudyPlace):
    """A study's report (``autorl sweep report --json``; :class:`autorl.sweep.StudyResult` holds it): its cells,
    the agents' paired comparisons, the keys without a result, how failures count, and the decoys taken; a
    study's own report adds its name and folder."""

    cells: list[ReportCell]
    comparisons: list[Comparison]
    missing: list[Missing]
    failure_rule: str
    decoys: list[BaitTaken]


class CellState(TypedDict):
    """A cell's line in the live table and ``autorl sweep status``."""

    run_key: str
    agent: str
    task: str
    model: str
    seed: int
    state: str
    attempts: int
    detail: str


class StudyRecord(TypedDict):
    """One flat record of a study's report (:meth:`autorl.sweep.StudyResult.to_records`): a run of a cell, or a key
    without a result (``status`` says which)."""

    sweep: str | None
    task: str | None
    agent: str | None
    base_model: str | None
    config_hash: str | None
    timeout_s: float | None
    limit: int | None
    seed: Any
    run_id: str | None
    run_key: str | None
    status: str | None
    success: bool | None
    beat_baseline: bool | None
    improvement: float | None
    improvement_ci95_low: float | None
    improvement_ci95_high: float | None
    end_reason: str | None
