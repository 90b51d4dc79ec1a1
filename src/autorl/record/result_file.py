"""A run's ``result.json`` read back: a file from this machine, another one or an older version, checked to be a
run's record the ledger can hold (its row's keys, its submissions' ids) before anything ingests it, and a file that
is not one named in a one-line :class:`~autorl.errors.ResourceError`. The writer is :mod:`autorl.record.ledger`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from autorl.errors import ResourceError
from autorl.record.schema import ResultRecord

__all__ = ["check_result", "read_result"]

#: the columns a recorded row cannot lack (the ledger's keys)
_REQUIRED = ("run_id", "timestamp", "task", "agent", "base_model", "success")


def read_result(path: Path) -> ResultRecord:
    """A ``result.json`` file, checked to be a run's record (a one-line :class:`ResourceError` when not)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ResourceError(f"{path} is not a run result: {exc}") from None
    return check_result(data, path)


def check_result(data: Any, where: Path | str) -> ResultRecord:
    """``data`` if it is a run's record the ledger can hold (a row with its keys, submissions with their ids),
    else a one-line :class:`ResourceError` naming ``where`` (an older version's file, a hostile one)."""
    row = data.get("row") if isinstance(data, dict) else None
    subs = data.get("submissions", []) if isinstance(data, dict) else None
    if not isinstance(row, dict) or not isinstance(subs, list):
        raise ResourceError(f"{where} is not a run result: no row and submissions")
    missing = [k for k in _REQUIRED if k not in row]
    if missing:
        raise ResourceError(f"{where} is not a run result: its row has no {', '.join(missing)}")
    if not all(isinstance(s, dict) and "submission_id" in s for s in subs):
        raise ResourceError(f"{where} is not a run result: a submission without its submission_id")
    return cast(ResultRecord, dict(data))  # its row's keys and its submissions' ids checked above
