"""The finish of a run whose orchestrator died: its facts read from the ledger's row of the run in flight, what
its grader's store holds collected by a grader started on that store, and the shared finish
(:func:`autorl.runs.finish.finish`) with an ending that names the lost orchestrator. ``autorl recover``
(:mod:`autorl.runs.recover`) finds such runs and calls :func:`finish_lost`.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autorl.errors import AutorlError
from autorl.grader import records
from autorl.grader.config import GraderConfig
from autorl.grader.process import GraderProcess, grader_log_path
from autorl.plugins.registry import get_benchmark, resolve_task
from autorl.procs.group import free_port
from autorl.record.result import RunResult
from autorl.record.schema import OutcomeRecord
from autorl.runs.collect import Collected, collect_from
from autorl.runs.facts import RunFacts
from autorl.runs.finish import Ending, finish, gateway_totals, orchestrator
from autorl.runs.liveness import OrchestratorStatus
from autorl.runs.progress import Say

__all__ = ["LOST_REASON", "finish_lost"]

#: how every recovered or lost run's ``end_reason`` begins (a sweep tells an infrastructure failure by it)
LOST_REASON = "orchestrator lost"


def finish_lost(
    live: Mapping[str, Any],
    status: OrchestratorStatus,
    home: Path,
    *,
    eval_timeout: float,
    final_test: bool,
    audit: bool,
    audit_budget_s: float,
    say: Say,
) -> RunResult:
    """Finish, record and audit the run of the ledger's live row ``live`` whose orchestrator is gone (``status``)."""
    config = _config(Path(str(live.get("store_dir") or "")))
    facts = RunFacts.from_live({**_older_facts(live, config), **live})
    lost_at = status.lost_at or facts.started
    when = dt.datetime.fromtimestamp(lost_at, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    collected, how = _collect(facts, config, eval_timeout, final_test, say)
    say(f"run {facts.run_id}: {LOST_REASON} at {when} ({status.detail}); {how}")
    agent_started = facts.agent_started or facts.started
    outcome: OutcomeRecord = {
        "exit_code": None,
        "timed_out": False,
        "duration_s": max(0.0, lost_at - agent_started),
        "reason": LOST_REASON,
    }
    totals = gateway_totals(facts.gateway_dir)
    ending = Ending(
        outcome=outcome,
        finished=lost_at,
        gateway=totals,
        gateway_error=None if totals else "the gateway gave no totals before its orchestrator was lost",
        end_reason=f"{LOST_REASON} at {when}; {how}",
        orchestrator=orchestrator(lost_at=status.lost_at, detail=status.detail, recovered_at=time.time(), how=how),
    )
    if facts.task_source:  # a task given as a folder: taken again, as the run took it
        resolve_task(facts.task_source)
    benchmark = get_benchmark(facts.task)(dict(facts.benchmark_options))
    return finish(facts, collected, ending, benchmark, home, audit=audit, audit_budget_s=audit_budget_s, say=say)


# -- collecting -------------------------------------------------------------------------------------------
def _collect(
    facts: RunFacts, config: GraderConfig | None, eval_timeout: float, final_test: bool, say: Say
) -> tuple[Collected, str]:
    """What the grader's store holds, collected by a grader started on it as the end of a run collects, and
    how (in words)."""
    store_dir = Path(facts.store_dir)
    if config is None or not (store_dir / "grader.db").is_file():
        nothing = records.state(
            task=facts.task,
            baseline=None,
            baseline_error=None,
            submissions=[],
            tests=[],
            counts={},
            refusals=[],
            closed=True,
        )
        return Collected(nothing, None), "the grader store is gone"
    state = records.state_from_store(store_dir / "grader.db", facts.task)
    if state["baseline_score"] is None:
        return Collected(state, None), "killed before its baseline was scored"
    grader = GraderProcess(config, store_dir / "config.json", free_port(), grader_log_path(store_dir))
    try:
        grader.wait_ready()
        collected = collect_from(grader, store_dir, facts.task, eval_timeout, final_test, say)
        return collected, "recovered from its grader's store"
    except AutorlError as exc:
        return (
            Collected(records.state_from_store(store_dir / "grader.db", facts.task), None),
            f"recovered from its grader's store without a grader ({exc})",
        )
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
    if not live.get("store_dir"):
        return {}
    store_dir = Path(str(live["store_dir"]))
    agent_dir = store_dir.with_name(f"{store_dir.name}.agent")
    tmp = agent_dir / "tmp"
    found: dict[str, Any] = {
        "watch_dir": str(agent_dir / "watch"),
        "tmp_dir": str(tmp) if live.get("sandbox") == "bwrap" and tmp.is_dir() else None,
    }
    if config is not None:
        found.update(
            backend=config.backend,
            model_path=config.base_model,
            hidden_dir=config.hidden_dir,
            benchmark_options=config.benchmark_options,
            limit=config.limit,
        )
    return found
