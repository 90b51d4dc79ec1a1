"""A recorded run's items as a pandas DataFrame, for notebooks: :func:`items` (``autorl.items()``: the base model
beside the checkpoint, from the grader's records); every recorded run (``autorl.runs()``) is
:func:`autorl.record.frames.runs`. pandas is an optional extra (``autorl[data]``), imported when called.

Example::

    import autorl
    df = autorl.runs(task="gsm8k")
    df.groupby("agent")["improvement"].describe()
    autorl.items(df.run_id.iloc[-1]).query("outcome == 'loss'")
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from autorl.errors import UsageError
from autorl.record.frames import pandas_module

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ITEM_COLUMNS", "items"]

#: the columns of :func:`items`, in order
ITEM_COLUMNS = (
    "item_id",
    "outcome",
    "change",
    "prompt",
    "reference",
    "base_score",
    "score",
    "base_answer",
    "answer",
    "base_error",
    "error",
    "base_answers",
    "answers",
)


def items(
    run_id: str, split: str = "test", *, submission: int | None = None, home: str | Path | None = None
) -> pd.DataFrame:
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
    pd = pandas_module("autorl.items()")
    from autorl.export.recorded import select
    from autorl.grader.items import read_run_items

    chosen = select(run_id, Path(home).expanduser() if home else None)
    if chosen.study is not None:
        raise UsageError(
            f"{run_id!r} is a study; autorl.items takes one of its runs (autorl.runs(study={run_id!r}).run_id)"
        )
    found = read_run_items(chosen.results[0], split, submission)
    frame = pd.DataFrame([p.to_dict() for p in found.items], columns=list(ITEM_COLUMNS))
    for name in ("change", "base_score", "score"):
        frame[name] = pd.to_numeric(frame[name], errors="coerce").astype("float64")
    frame.attrs.update(run_id=found.run_id, split=split, submission=found.submission, notes=found.notes)
    return frame
