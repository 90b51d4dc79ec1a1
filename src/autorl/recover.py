"""``autorl recover``: a run whose orchestrator died (killed, preempted, its node lost) finished from its facts and
its grader's store by the finish a live run ends with (:mod:`autorl.runs.finish`); and the detection of such
runs, for ``autorl results``, the dashboard, ``autorl doctor`` and a sweep.

A lost run is one the ledger still lists as live (:meth:`autorl.ledger.Ledger.live`) whose orchestrator is gone
(:func:`autorl.lease.orchestrator_status`). Recovering it starts a grader on the run's own store (the store queues
the evaluations the dead grader had in flight again), waits for every accepted submission to be scored, closes
the run, scores the best on dev once on the test split if that has not happened, and records the run (the
audit included) with an ``end_reason`` naming the lost orchestrator and when. A run already recorded is left as
it is, so recovering twice changes nothing. A run whose store is gone, or killed before its baseline was scored,
is recorded as lost with what is known.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autorl.errors import AutorlError, UsageError
from autorl.grader import records
from autorl.grader.config import GraderConfig
from autorl.grader.process import GraderProcess, grader_log_path
from autorl.grader.server import free_port
from autorl.lease import OrchestratorStatus, orchestrator_status
from autorl.ledger import Ledger
from autorl.progress import Say, to_stderr
from autorl.registry import get_benchmark
from autorl.runs.facts import RunFacts
from autorl.runs.finish import Collected, Ending, collect_from, finish, gateway_totals, orchestrator

__all__ = ["LIVE_GRACE_S", "LOST_REASON", "Recovered", "in_flight", "lost_runs", "recover", "recover_all",
           "run_status"]

#: how every recovered or lost run's ``end_reason`` begins (a sweep tells an infrastructure failure by it)
LOST_REASON = "orchestrator lost"
#: how long after its deadline a run without a heartbeat is still taken for live
LIVE_GRACE_S = 3 * 3600.0


@dataclass(frozen=True)
class Recovered:
    """What ``recover`` did for one run: ``recorded`` (now in the ledger) or ``already recorded``."""

    run_id: str
    action: str
    row: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "action": self.action, "row": self.row}


def run_status(live: Mapping[str, Any], now: float | None = None) -> OrchestratorStatus:
    """Whether a run the ledger lists as live still has its orchestrator: its store's heartbeat says
    (:func:`autorl.lease.orchestrator_status`); without one (the store is gone, or the run began before
    heartbeats), it is live until :data:`LIVE_GRACE_S` past its deadline."""
    now = time.time() if now is None else now
    store_dir = live.get("store_dir")
    status = orchestrator_status(Path(str(store_dir)), now=now) if store_dir else None
    if status is not None:
        return status
    started = float(live.get("started") or now)
    deadline = live.get("deadline")
    limit = float(deadline) if deadline else started + float(live.get("timeout_s") or 0) + 3600
    if now < limit + LIVE_GRACE_S:
        return OrchestratorStatus(True, None, "no heartbeat; within its time")
    where = "no grader store" if not store_dir or not Path(str(store_dir)).exists() else "no heartbeat"
    return OrchestratorStatus(False, None, f"{where}, {(now - limit) / 3600:.0f} h past its deadline")


def in_flight(ledger: Ledger, now: float | None = None) -> list[dict[str, Any]]:
    """Every run the ledger lists as in flight, newest first: its live row with ``status`` (``running`` or
    ``lost``), ``lost_at`` and ``detail``, and for a lost one ``recover``, the command that records it."""
    out = []
    for live in ledger.live():
        status = run_status(live, now)
        row = {**live, "status": "running" if status.alive else "lost", "lost_at": status.lost_at,
               "detail": status.detail}
        if not status.alive:
            row["recover"] = f"autorl recover {live['run_id']}"
        out.append(row)
    return out


def lost_runs(ledger: Ledger, now: float | None = None) -> list[dict[str, Any]]:
    """The runs in flight whose orchestrator is gone (:func:`in_flight`'s ``lost`` ones), newest first."""
    return [r for r in in_flight(ledger, now) if r["status"] == "lost"]


def recover(run_id: str, *, home: Path, eval_timeout: float = 3600.0, final_test: bool = True, audit: bool = True,
            audit_budget_s: float = 900.0, log: Say | None = None) -> Recovered:
    """Record the lost run ``run_id`` from its grader's store (see the module's docstring).

    Raises:
        UsageError: no such run, or its orchestrator is still alive.
    """
    say = log or to_stderr
    ledger = Ledger(home / "autorl.db")
    try:
        recorded = ledger.run(run_id)
        if recorded is not None:
            return Recovered(run_id, "already recorded", dict(recorded["row"]))
        live = next((r for r in ledger.live() if r["run_id"] == run_id), None)
    finally:
        ledger.close()
    if live is None:
        raise UsageError(f"no run {run_id} is in flight or recorded in {home / 'autorl.db'}")
    status = run_status(live)
    if status.alive:
        raise UsageError(f"run {run_id} is still live ({status.detail}): only a run whose orchestrator is gone "
                         "can be recovered")
    config = _config(Path(str(live.get("store_dir") or "")))
    facts = RunFacts.from_live({**_older_facts(live, config), **live})
    lost_at = status.lost_at or facts.started
    when = dt.datetime.fromtimestamp(lost_at, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    collected, how = _collect(facts, config, eval_timeout, final_test, say)
    say(f"run {run_id}: {LOST_REASON} at {when} ({status.detail}); {how}")
    agent_started = facts.agent_started or facts.started
    outcome = {"exit_code": None, "timed_out": False, "duration_s": max(0.0, lost_at - agent_started),
               "reason": LOST_REASON}
    totals = gateway_totals(facts.gateway_dir)
    ending = Ending(outcome=outcome, finished=lost_at, gateway=totals,
                    gateway_error=None if totals else "the gateway gave no totals before its orchestrator was lost",
                    end_reason=f"{LOST_REASON} at {when}; {how}",
                    orchestrator=orchestrator(lost_at=status.lost_at, detail=status.detail, recovered_at=time.time(),
                                              how=how))
    benchmark = get_benchmark(facts.task)(dict(facts.benchmark_options))
    result = finish(facts, collected, ending, benchmark, home, audit=audit, audit_budget_s=audit_budget_s, say=say)
    return Recovered(run_id, "recorded", dict(result.row))


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


# -- collecting -------------------------------------------------------------------------------------------
def _collect(facts: RunFacts, config: GraderConfig | None, eval_timeout: float, final_test: bool,
             say: Say) -> tuple[Collected, str]:
    """What the grader's store holds, collected by a grader started on it as the end of a run collects, and
    how (in words)."""
    store_dir = Path(facts.store_dir)
    if config is None or not (store_dir / "grader.db").is_file():
        nothing = records.state(task=facts.task, baseline=None, baseline_error=None, submissions=[], tests=[],
                                counts={}, refusals=[], closed=True)
        return Collected(nothing, None), "the grader store is gone"
    state = records.state_from_store(store_dir / "grader.db", facts.task)
    if state["baseline_score"] is None:
        return Collected(state, None), "killed before its baseline was scored"
    grader = GraderProcess(config, store_dir / "config.json", free_port(), grader_log_path(store_dir))
    try:
        grader.wait_ready()
        return collect_from(grader, store_dir, facts.task, eval_timeout, final_test, say), \
            "recovered from its grader's store"
    except AutorlError as exc:
        return (Collected(records.state_from_store(store_dir / "grader.db", facts.task), None),
                f"recovered from its grader's store without a grader ({exc})")
    finally:
        grader.stop()


def _config(store_dir: Path) -> GraderConfig | None:
    try:
        return GraderConfig.load(store_dir / "config.json")
    except (OSError, ValueError, TypeError, AutorlError):
        return None


def _older_facts(live: Mapping[str, Any], config: GraderConfig | None) -> dict[str, Any]:
    """The facts a ledger row written by an older version lacks, from the grader's configuration and the
    folders beside its store (a row of today's holds them all, and wins)."""
    store_dir = Path(str(live.get("store_dir") or ""))
    agent_dir = store_dir.with_name(f"{store_dir.name}.agent")
    tmp = agent_dir / "tmp"
    found: dict[str, Any] = {"watch_dir": str(agent_dir / "watch"),
                             "tmp_dir": str(tmp) if live.get("sandbox") == "bwrap" and tmp.is_dir() else None}
    if config is not None:
        found.update(backend=config.backend, model_path=config.base_model, hidden_dir=config.hidden_dir,
                     benchmark_options=config.benchmark_options, limit=config.limit)
    return found
