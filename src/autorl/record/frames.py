"""Recorded runs as a pandas DataFrame, for notebooks: :func:`runs` (``autorl.runs()``: one row a run, the
``results.csv`` columns typed by :func:`column_kinds`), read from the ledger of a home (:func:`open_ledger`). pandas
is an optional extra (``autorl[data]``), imported when called (:func:`pandas_module`). A run's items as a DataFrame
(``autorl.items()``) need the grader's records: :mod:`autorl.export.frames`.

Example::

    import autorl
    df = autorl.runs(task="gsm8k")
    df.groupby("agent")["improvement"].describe()
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

    from autorl.record.ledger import Ledger

__all__ = ["column_kinds", "open_ledger", "pandas_module", "runs"]


def open_ledger(home: Path | None = None) -> Ledger:
    """The ledger of ``home`` (default ``AUTORL_HOME``), which must exist: a one-line error where it does not."""
    from autorl.record.ledger import Ledger
    from autorl.resources import autorl_home

    db = (home or autorl_home()) / "autorl.db"
    if not db.is_file():
        raise UsageError(f"no runs recorded yet: {db} does not exist")
    return Ledger(db)


def pandas_module(what: str) -> Any:
    """pandas, or a one-line :class:`MissingDependencyError` naming ``what`` and the install."""
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


def runs(
    task: str | None = None, agent: str | None = None, study: str | None = None, *, home: str | Path | None = None
) -> pd.DataFrame:
    """Every recorded run as a DataFrame: one row a run, oldest first, the ``results.csv`` columns in their
    order with their types (:func:`column_kinds`), the audit's open flags in ``audit_flags``.

    Args:
        task: only this task's runs.
        agent: only this agent's runs.
        study: only the runs of this study (its name: the ``sweep`` column).
        home: the ``AUTORL_HOME`` to read (default: the environment's).
    """
    pd = pandas_module("autorl.runs()")
    ledger = open_ledger(Path(home).expanduser() if home else None)
    try:
        rows = ledger.rows(task=task)
    finally:
        ledger.close()
    rows = [
        r for r in rows if (agent is None or r.get("agent") == agent) and (study is None or r.get("sweep") == study)
    ]
    frame = pd.DataFrame([{c: r.get(c) for c in CSV_COLUMNS} for r in rows], columns=list(CSV_COLUMNS), dtype=object)
    return _typed(pd, frame)
