"""``autorl recover``: a run whose orchestrator died (killed, preempted, its node lost) recorded from its grader's
store, the way the end of a run records it; and the detection of such runs, for ``autorl results``, the
dashboard, ``autorl doctor`` and a sweep.

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
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autorl.errors import AutorlError, UsageError
from autorl.lease import OrchestratorStatus, orchestrator_status
from autorl.ledger import Ledger
from autorl.results import RunResult, run_row

__all__ = ["LIVE_GRACE_S", "LOST_REASON", "Recovered", "in_flight", "lost_runs", "recover", "recover_all", "run_status", "state_from_store"]

Log = Callable[[str], None]
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
            audit_budget_s: float = 900.0, log: Log | None = None) -> Recovered:
    """Record the lost run ``run_id`` from its grader's store (see the module's docstring).

    Raises:
        UsageError: no such run, or its orchestrator is still alive.
    """
    say: Log = log or (lambda m: print(m, file=sys.stderr, flush=True))
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
    from autorl.registry import get_benchmark
    from autorl.runner import record

    result = _recovered_result(live, status, home, eval_timeout=eval_timeout, final_test=final_test, say=say)
    result.run_dir.mkdir(parents=True, exist_ok=True)  # a workspace that is gone still gets its result.json
    benchmark = get_benchmark(result.row["task"])(dict(result.meta.get("benchmark_options") or {}))
    # the audit needs the hidden data and the store; a run lost with its store is recorded as it is
    can_audit = audit and bool(result.meta.get("hidden_dir")) and Path(result.run_dir).is_dir()
    record(result, benchmark, home, audit=can_audit, audit_budget_s=audit_budget_s, say=say)
    return Recovered(run_id, "recorded", dict(result.row))


def recover_all(*, home: Path, log: Log | None = None, **options: Any) -> list[Recovered]:
    """:func:`recover` every lost run (a run whose recovery fails is reported and the others still go)."""
    say: Log = log or (lambda m: print(m, file=sys.stderr, flush=True))
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
def _recovered_result(live: Mapping[str, Any], status: OrchestratorStatus, home: Path, *, eval_timeout: float,
                      final_test: bool, say: Log) -> RunResult:
    run_id = str(live["run_id"])
    store_dir = Path(str(live.get("store_dir") or ""))
    lost_at = status.lost_at or float(live.get("started") or time.time())
    when = dt.datetime.fromtimestamp(lost_at, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    config = _config(store_dir)
    state: dict[str, Any] = _empty_state(str(live["task"]))
    test: dict[str, Any] | None = None
    how = "the grader store is gone"
    if config is not None and (store_dir / "grader.db").is_file():
        state = state_from_store(store_dir / "grader.db", str(live["task"]))
        if state["baseline_score"] is None:
            how = "killed before its baseline was scored"
        else:
            try:
                state, test = _collect_with_grader(config, store_dir, eval_timeout, final_test, say)
                how = "recovered from its grader's store"
            except AutorlError as exc:
                state = state_from_store(store_dir / "grader.db", str(live["task"]))
                how = f"recovered from its grader's store without a grader ({exc})"
    say(f"run {run_id}: {LOST_REASON} at {when} ({status.detail}); {how}")
    agent_started = float(live.get("agent_started") or live.get("started") or lost_at)
    outcome = {"exit_code": None, "timed_out": False, "duration_s": max(0.0, lost_at - agent_started),
               "reason": LOST_REASON}
    row = run_row(run_id=run_id, started=float(live.get("started") or lost_at), finished=lost_at,
                  task=str(live["task"]), agent=str(live["agent"]), base_model=str(live["base_model"]),
                  workspace=str(live.get("workspace") or ""), seed=int(live.get("seed") or 0),
                  sandbox=live.get("sandbox"), state=state, test=test, outcome=outcome)
    row.end_reason = f"{LOST_REASON} at {when}; {how}"
    name = store_dir.name
    agent_dir = store_dir.with_name(f"{name}.agent")
    meta: dict[str, Any] = {
        "backend": config.backend if config else None,
        "model_path": config.base_model if config else None,
        "limit": config.limit if config else live.get("limit"),
        "eval_config": (state.get("baseline") or {}).get("config"),
        "agent_started": live.get("agent_started"),
        "deadline": live.get("deadline"),
        "timeout_s": live.get("timeout_s"),
        "store_dir": str(store_dir),
        "hidden_dir": config.hidden_dir if config else "",
        "benchmark_options": config.benchmark_options if config else {},
        "refusals": state.get("refusals", []),
        "harness_hashes": live.get("harness_hashes") or {},
        "tmp_dir": str(agent_dir / "tmp") if live.get("sandbox") == "bwrap" and (agent_dir / "tmp").is_dir() else None,
        "watch_dir": str(agent_dir / "watch"),
        "orchestrator": {"lost_at": status.lost_at, "detail": status.detail, "recovered_at": time.time(),
                         "how": how},
    }
    run_dir = Path(str(live.get("workspace") or home / "runs" / str(live["task"]) / run_id))
    return RunResult(run_id, row.record(), state["submissions"], state.get("baseline"), test, outcome, run_dir, meta)


def _config(store_dir: Path) -> Any:
    from autorl.grader.config import GraderConfig

    try:
        return GraderConfig.load(store_dir / "config.json")
    except (OSError, ValueError, TypeError, AutorlError):
        return None


def _empty_state(task: str) -> dict[str, Any]:
    return {"task": task, "baseline": None, "baseline_score": None, "submissions": [], "best": None, "test": [],
            "counts": {}, "refusals": [], "closed": True}


def state_from_store(db: Path, task: str) -> dict[str, Any]:
    """The grader's ``state()`` read from its store file alone (read-only: nothing is evaluated or written)."""
    from autorl.grader import records
    from autorl.grader.store import Store

    store = Store.read_only(db)
    try:
        return records.state(task=task, baseline=store.baseline("dev"), baseline_error=None,
                             submissions=store.all(), tests=store.test_scores(), counts=store.counts(),
                             refusals=store.refusals(), closed=bool(store.get_meta("closed", False)))
    finally:
        store.close()


def _collect_with_grader(config: Any, store_dir: Path, eval_timeout: float, final_test: bool,
                         say: Log) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A grader on the run's store, collected as the end of a run collects (:func:`autorl.runner.collect`)."""
    from autorl.grader.process import GraderProcess, grader_log_path
    from autorl.grader.server import free_port
    from autorl.runner import collect

    grader = GraderProcess(config, store_dir / "config.json", free_port(), grader_log_path(store_dir))
    try:
        grader.wait_ready()
        return collect(grader.admin, eval_timeout, final_test, say)
    finally:
        grader.stop()
