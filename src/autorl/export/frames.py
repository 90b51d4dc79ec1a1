"""Recorded runs as pandas DataFrames, for notebooks: :func:`runs` (one row a run, the ``results.csv`` columns
typed) and :func:`items` (a run's items, the base model beside the checkpoint). pandas is an optional extra
(``autorl[data]``), imported when called.

Example::

    import autorl
    df = autorl.runs(task="gsm8k")
    df.groupby("agent")["improvement"].describe()
    autorl.items(df.run_id.iloc[-1]).query("outcome == 'loss'")
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.errors import MissingDependencyError, UsageError, extra_install
from autorl.record.row import CSV_COLUMNS, RunRow

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ITEM_COLUMNS", "column_kinds", "items", "runs"]

#: the columns of :func:`items`, in order
ITEM_COLUMNS = ("item_id", "outcome", "change", "prompt", "reference", "base_score", "score", "base_answer",
                "answer", "base_error", "error", "base_answers", "answers")


def _pandas(what: str) -> Any:
    try:
        import pandas
    except ImportError:
        raise MissingDependencyError(what, extra_install("data")) from None
    return pandas


def column_kinds() -> dict[str, str]:
    """What each ``results.csv`` column holds, from :class:`~autorl.record.row.RunRow`'s field types: ``float``
    (NaN for none), ``int`` (``int?`` where a run may have none: pandas' nullable ``Int64``), ``bool`` (``bool?``:
    nullable ``boolean``), ``str`` (pandas' text type), ``datetime`` (``timestamp``, UTC) or ``object`` (lists,
    tables)."""
    kinds: dict[str, str] = {}
    for name, hint in typing.get_type_hints(RunRow).items():
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        args = set(typing.get_args(hint)) if union else {hint}
        optional = "?" if type(None) in args else ""
        one = next(iter(args - {type(None)})) if len(args - {type(None)}) == 1 else None
        if name == "timestamp":
            kinds[name] = "datetime"
        elif one in (float, int, bool):
            kinds[name] = one.__name__ + ("" if one is float else optional)
        else:
            kinds[name] = "str" if one is str else "object"
    return kinds


def _typed(pd: Any, frame: Any) -> Any:
    for name, kind in column_kinds().items():
        col = frame[name]
        if kind == "datetime":
            frame[name] = pd.to_datetime(col, utc=True, errors="coerce", format="ISO8601")
        elif kind == "float":
            frame[name] = pd.to_numeric(col, errors="coerce").astype("float64")
        elif kind.startswith("int"):
            numbers = pd.to_numeric(col, errors="coerce")
            whole = numbers.dropna()
            # a count recorded as 3.0 is 3; one that is not whole stays a float rather than being rounded
            if (whole == whole.round()).all():
                frame[name] = numbers.astype("Int64" if kind == "int?" or numbers.isna().any() else "int64")
            else:
                frame[name] = numbers.astype("float64")
        elif kind.startswith("bool"):
            flags = col.map(lambda v: None if v is None or v != v else bool(v))
            frame[name] = flags.astype("boolean" if kind == "bool?" or flags.isna().any() else "bool")
        elif kind == "str":
            frame[name] = pd.Series([None if v is None else str(v) for v in col], index=frame.index)
    return frame


def runs(task: str | None = None, agent: str | None = None, study: str | None = None, *,
         home: str | Path | None = None) -> pd.DataFrame:
    """Every recorded run as a DataFrame: one row a run, oldest first, the ``results.csv`` columns in their
    order with their types (:func:`column_kinds`), the audit's open flags in ``audit_flags``.

    Args:
        task: only this task's runs.
        agent: only this agent's runs.
        study: only the runs of this study (its name: the ``sweep`` column).
        home: the ``AUTORL_HOME`` to read (default: the environment's).
    """
    pd = _pandas("autorl.runs()")
    from autorl.export.recorded import open_ledger

    ledger = open_ledger(Path(home).expanduser() if home else None)
    try:
        rows = ledger.rows(task=task)
    finally:
        ledger.close()
    rows = [r for r in rows if (agent is None or r.get("agent") == agent) and (study is None or r.get("sweep") == study)]
    frame = pd.DataFrame([{c: r.get(c) for c in CSV_COLUMNS} for r in rows], columns=list(CSV_COLUMNS),
                         dtype=object)
    return _typed(pd, frame)


def items(run_id: str, split: str = "test", *, submission: int | None = None,
          home: str | Path | None = None) -> pd.DataFrame:
    """A recorded run's items as a DataFrame, in the benchmark's order: each item's ``prompt`` and
    ``reference``, the base model's and the checkpoint's first answer (every sample in ``base_answers`` /
    ``answers``) and score (0-1), ``change`` (checkpoint minus base) and ``outcome`` (``win``, ``loss``,
    ``same``, ``unpaired``), from the grader's own per-item records.

    Args:
        run_id: the run's id, or the start of it.
        split: ``test`` (the headline's items) or ``dev``.
        submission: the submission to compare with the base (default: the headline's).
        home: the ``AUTORL_HOME`` to read (default: the environment's).
    """
    pd = _pandas("autorl.items()")
    from autorl.export.recorded import select
    from autorl.grader.items import read_run_items

    chosen = select(run_id, Path(home).expanduser() if home else None)
    if chosen.study is not None:
        raise UsageError(f"{run_id!r} is a study; autorl.items takes one of its runs (autorl.runs(study="
                              f"{run_id!r}).run_id)")
    found = read_run_items(chosen.results[0], split, submission)
    frame = pd.DataFrame([p.to_dict() for p in found.items], columns=list(ITEM_COLUMNS))
    for name in ("change", "base_score", "score"):
        frame[name] = pd.to_numeric(frame[name], errors="coerce").astype("float64")
    frame.attrs.update(run_id=found.run_id, split=split, submission=found.submission, notes=found.notes)
    return frame
