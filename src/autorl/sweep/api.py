"""A study from Python: :func:`sweep` runs (or resumes) one, :func:`load` reads one back, :func:`plan` expands a
spec without running it, :func:`ingest` records a study's counted results in the ledger."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.sweep.result import StudyResult

if TYPE_CHECKING:
    from autorl.sweep.coordinator import Study, Update

__all__ = ["ingest", "load", "plan", "sweep"]


def sweep(
    spec: str | Path | Mapping[str, Any],
    *,
    executor: str = "local",
    executor_options: Mapping[str, Any] | None = None,
    max_parallel: int | None = None,
    retries: int | None = None,
    sweep_dir: str | Path | None = None,
    on_update: Update | None = None,
) -> StudyResult:
    """Run (or resume) a study and return its report (a dict; in a notebook, a table; ``to_records()`` flat rows);
    the study's ``card.md`` is written beside its files.

    Args:
        spec: a ``sweep.toml``/YAML path, or the same as a dict (keys: ``autorl run``'s option names, each a
            value or a list; ``include``/``exclude`` lists of tables).
        executor: ``local``, ``slurm``, ``ray`` or one a plugin registers.
        executor_options: the executor's settings (``{"slots": 2}``, ``{"gpus": "0-3"}``,
            ``{"partition": "gpu"}``, ``{"address": "ray://head:10001"}``); they override the spec's table of
            the executor's name.
        max_parallel: the most runs at once.
        retries: how many times an attempt that failed for infrastructure reasons is retried (default 2, or
            the spec's ``retries``); a run that failed on its own merits is a result and never retried.
        sweep_dir: the study's directory (default ``AUTORL_HOME/sweeps/<name>``).
        on_update: called with the study and its key states whenever an attempt starts or ends.
    """
    from autorl.sweep.coordinator import run_sweep
    from autorl.sweep.report import study_report

    study = run_sweep(
        spec,
        executor=executor,
        executor_options=executor_options,
        max_parallel=max_parallel,
        retries=retries,
        sweep_dir=Path(sweep_dir).expanduser() if sweep_dir else None,
        on_update=on_update,
    )
    study.refresh()
    report = study_report(study)
    from autorl.record.card import write_study_card

    write_study_card(report, study.dir.root, study.spec)  # the study's card.md beside its files, as each run's
    return StudyResult(report)


def load(sweep: str | Path) -> StudyResult:
    """The report of a study from its files (a name under ``AUTORL_HOME/sweeps`` or its directory), running nothing."""
    from autorl.sweep.coordinator import open_study
    from autorl.sweep.report import study_report

    return StudyResult(study_report(open_study(sweep)))


def plan(spec: str | Path | Mapping[str, Any], sweep_dir: str | Path | None = None) -> Study:
    """The expanded study (cells, run keys, what is done already), without running anything (``--dry-run``)."""
    from autorl.sweep.coordinator import expand

    study = expand(spec, Path(sweep_dir).expanduser() if sweep_dir else None)
    study.refresh()
    return study


def ingest(sweep_dir: str | Path) -> int:
    """Upsert every counted result of a study into the ledger (idempotent); returns how many."""
    from autorl.record.ledger import check_result, ingest_results
    from autorl.sweep.coordinator import home, open_study

    study = open_study(sweep_dir)
    counted = [(s.counted.result(), s.counted.path) for s in study.states.values() if s.counted is not None]
    results = [check_result(r, path / "result.json") for r, path in counted if r is not None]
    ingest_results(results, home())
    return len(results)
