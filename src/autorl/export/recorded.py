"""Which recorded runs an export or a notebook call takes: a run (its id, or the start of it) or a study (its name),
from the ledger of ``AUTORL_HOME``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autorl.errors import UsageError
from autorl.record.frames import open_ledger

if TYPE_CHECKING:
    from autorl.record.ledger import Ledger
    from autorl.record.schema import ResultRecord

__all__ = ["Selection", "select"]


@dataclass(frozen=True)
class Selection:
    """The runs a name stands for: one run, or every recorded run of the study ``study``, each as its record
    with the row as the ledger shows it (the audit's open flags, the headline they leave)."""

    results: list[ResultRecord]
    study: str | None


def select(target: str, home: Path | None = None) -> Selection:
    """The runs ``target`` names: the run with that id, else the study of that name (the ``sweep`` column),
    else the one run whose id starts with it; a one-line :class:`UsageError` when it names nothing or several."""
    ledger = open_ledger(home)
    try:
        exact = ledger.run(target)
        if exact is not None:
            return Selection([_with_row(ledger, exact)], None)
        study = [_with_row(ledger, r) for r in ledger.runs() if r["row"].get("sweep") == target]
        if study:
            return Selection(study, target)
        try:
            run_id = ledger.resolve(target)
        except UsageError as exc:
            if str(exc).startswith("no run"):
                raise UsageError(
                    f"no run or study {target!r} in {ledger.path} (see `autorl results`; a study's "
                    "runs are there once `autorl sweep ingest` recorded them)"
                ) from None
            raise
        found = ledger.run(run_id)
        assert found is not None
        return Selection([_with_row(ledger, found)], None)
    finally:
        ledger.close()


def _with_row(ledger: Ledger, result: ResultRecord) -> ResultRecord:
    # the row as the ledger shows it: the audit's open flags, and the headline a judge's critical flag leaves
    return {**result, "row": ledger.row_of(result)}
