"""``autorl recover``: a run whose orchestrator died (killed, preempted, its node lost) finished from its facts and
its grader's store by the finish a live run ends with (:mod:`autorl.runs.lost`, :mod:`autorl.runs.finish`).

A lost run is one the ledger still lists as live whose orchestrator is gone (:mod:`autorl.runs.liveness`). Recovering it starts a grader on the run's own store (the store queues
the evaluations the dead grader had in flight again), waits for every accepted submission to be scored, closes
the run, scores the best on dev once on the test split if that has not happened, and records the run (the
audit included) with an ``end_reason`` naming the lost orchestrator and when. A run already recorded is left as
it is, so recovering twice changes nothing. A run whose store is gone, or killed before its baseline was scored,
is recorded as lost with what is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from autorl.errors import AutorlError, UsageError
from autorl.record.ledger import Ledger
from autorl.record.schema import RowRecord
from autorl.runs.liveness import lost_runs, run_status
from autorl.runs.progress import Say, to_stderr

__all__ = ["Recovered", "RecoveredRecord", "recover", "recover_all"]


class RecoveredRecord(TypedDict):
    """:class:`Recovered` as ``autorl recover --json`` prints it."""

    run_id: str
    action: str
    row: RowRecord


@dataclass(frozen=True)
class Recovered:
    """What ``recover`` did for one run: ``recorded`` (now in the ledger) or ``already recorded``."""

    run_id: str
    action: str
    row: RowRecord

    def to_dict(self) -> RecoveredRecord:
        return {"run_id": self.run_id, "action": self.action, "row": self.row}


def recover(
    run_id: str,
    *,
    home: Path,
    eval_timeout: float = 3600.0,
    final_test: bool = True,
    audit: bool = True,
    audit_budget_s: float = 900.0,
    log: Say | None = None,
) -> Recovered:
    """Record the lost run ``run_id`` from its grader's store (see the module's docstring).

    Raises:
        UsageError: no such run, or its orchestrator is still alive.
    """
    say = log or to_stderr
    ledger = Ledger(home / "autorl.db")
    try:
        run_id = ledger.find(run_id) or run_id  # a short id as the tables show it
        recorded = ledger.run(run_id)
        if recorded is not None:
            return Recovered(run_id, "already recorded", recorded["row"].copy())
        live = next((r for r in ledger.live() if r["run_id"] == run_id), None)
    finally:
        ledger.close()
    if live is None:
        raise UsageError(f"no run {run_id} is in flight or recorded in {home / 'autorl.db'}")
    status = run_status(live)
    if status.alive:
        raise UsageError(
            f"run {run_id} is still live ({status.detail}): only a run whose orchestrator is gone can be recovered"
        )
    from autorl.runs.lost import finish_lost  # the finish and a grader load only to recover a run

    result = finish_lost(
        live,
        status,
        home,
        eval_timeout=eval_timeout,
        final_test=final_test,
        audit=audit,
        audit_budget_s=audit_budget_s,
        say=say,
    )
    return Recovered(run_id, "recorded", result.row.copy())


def recover_all(*, home: Path, log: Say | None = None, **options: Any) -> list[Recovered]:
    """:func:`recover` every lost run (a run whose recovery fails is reported and the others still go)."""
    say = log or to_stderr
    ledger = Ledger(home / "autorl.db")
    try:
        lost = lost_runs(ledger)
    finally:
        ledger.close()
    out = []
    for live in reversed(lost):  # oldest first
        try:
            out.append(recover(str(live["run_id"]), home=home, log=say, **options))
        except AutorlError as exc:
            say(f"run {live['run_id']}: not recovered: {exc}")
        except Exception as exc:  # one run's broken leftovers never stop the others from being recovered
            say(f"run {live['run_id']}: not recovered: {type(exc).__name__}: {str(exc)[:300]}")
    return out
