"""The finish of a run, shared by a live run (:func:`autorl.runs.runner.run`) and a recovered one
(:func:`autorl.runs.recover.recover`): collect from the grader's own store (:mod:`autorl.runs.collect`), score the
best on dev once on the test split, build the record from the run's facts (:func:`build_result`, the one builder of
a run's record), record it, then audit it and record it again with the audit's flags.

Both ways differ only in what they know of the agent's phase (:class:`Ending`): a live run saw it end; a
recovered one knows when its orchestrator was lost. Everything else in the record comes from the same facts
(:class:`~autorl.runs.facts.RunFacts`) and the same grader records, so both records have the same fields.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl import decoys, untrusted
from autorl.gateway.record import SUMMARY_NAME
from autorl.record.ledger import record_run
from autorl.record.metrics import driver_model, efficiency, process_metrics, test_best_of_k
from autorl.record.result import RunResult
from autorl.record.row import run_row
from autorl.record.schema import OffTargetRecord, OrchestratorRecord, OutcomeRecord
from autorl.resources import cached_instruct_variants

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.decoys import WatchedRecord
    from autorl.grader.process import Restart
    from autorl.grader.schema import SubmissionRecord
    from autorl.procs.agent import AgentOutcome
    from autorl.runs.collect import Collected
    from autorl.runs.facts import RunFacts
    from autorl.runs.progress import Say

__all__ = [
    "GATEWAY_USAGE_SOURCE",
    "Ending",
    "build_result",
    "finish",
    "gateway_totals",
    "orchestrator",
    "outcome_record",
    "record",
]

#: the gateway's totals: its own counts from the upstreams' usage fields, not the agent's word
GATEWAY_USAGE_SOURCE = "gateway"


# -- the record -------------------------------------------------------------------------------------------
def outcome_record(outcome: AgentOutcome) -> OutcomeRecord:
    """The agent's outcome as the record keeps it (``agent`` in ``result.json``)."""
    return {
        "exit_code": outcome.exit_code,
        "timed_out": outcome.timed_out,
        "duration_s": outcome.duration_s,
        "reason": outcome.reason,
    }


def orchestrator(
    *,
    lost_at: float | None = None,
    detail: str | None = None,
    recovered_at: float | None = None,
    how: str = "finished by its orchestrator",
) -> OrchestratorRecord:
    """The record's ``orchestrator``: who finished the run (``lost_at`` None: its own orchestrator)."""
    return {"lost_at": lost_at, "detail": detail, "recovered_at": recovered_at, "how": how}


@dataclass(frozen=True)
class Ending:
    """What is known of the agent's phase when the run is finished.

    Attributes:
        outcome: the agent's :class:`~autorl.procs.agent.AgentOutcome` as a dict.
        finished: when the run ended (epoch seconds).
        watch: the watcher's counts (``passes``, ``entries``, ``copied_bytes``; None when unknown).
        gateway: the LLM gateway's totals, or None (``gateway_error`` then says why).
        grader_restarts: the grader's restarts during the run (None: unknown).
        orchestrator: who finished the run (``lost_at``, ``detail``, ``recovered_at``, ``how``).
        end_reason: the row's ``end_reason`` in place of the one the outcome and the scores give.
        configured_model: the model the agent's environment named, or None.
    """

    outcome: OutcomeRecord
    finished: float
    orchestrator: OrchestratorRecord = field(default_factory=orchestrator)
    watch: dict[str, int | None] = field(default_factory=lambda: dict.fromkeys(("passes", "entries", "copied_bytes")))
    gateway: dict[str, Any] | None = None
    gateway_error: str | None = None
    grader_restarts: list[Restart] | None = None
    end_reason: str | None = None
    #: the decoys read while the agent ran and how that was watched (None: not watched; access times then)
    decoys: WatchedRecord | None = None
    #: the model the agent's environment named (the row's ``driver_model`` when no call went through the gateway)
    configured_model: str | None = None
    #: each off-target benchmark's base and selected scores (:func:`autorl.runs.offtarget.score_off_target`)
    off_target: list[OffTargetRecord] | None = None


def gateway_totals(gateway_dir: str | None) -> dict[str, Any] | None:
    """The totals a closed gateway wrote into its folder (out of the agent's reach), or None."""
    if not gateway_dir:
        return None
    try:
        totals = untrusted.read_json(Path(gateway_dir), SUMMARY_NAME, limit=2**20)
    except untrusted.UntrustedFileError:
        return None
    return totals if isinstance(totals, dict) else None


def build_result(facts: RunFacts, collected: Collected, ending: Ending, home: Path) -> RunResult:
    """The run's record: its row from the grader's state (:func:`autorl.record.row.run_row`) and its conditions
    from its facts. The one builder of a record: a live run and a recovered one get the same fields."""
    state, test, summary = collected.state, collected.test, ending.gateway
    usage = None
    if summary and (summary.get("calls") or summary.get("refused")):
        usage = {
            "tokens": int(summary.get("tokens") or 0),
            "cost_usd": float(summary.get("cost_usd") or 0.0),
            "source": GATEWAY_USAGE_SOURCE,
        }
    row = run_row(
        run_id=facts.run_id,
        started=facts.started,
        finished=ending.finished,
        task=facts.task,
        agent=facts.agent,
        base_model=facts.base_model,
        workspace=facts.workspace,
        seed=facts.seed,
        sandbox=facts.sandbox,
        state=state,
        test=test,
        outcome=ending.outcome,
        llm_usage=usage,
        metrics=process_metrics(
            state["submissions"],
            best=state["best"],
            baseline_score=state["baseline_score"],
            agent_started=facts.agent_started,
            deadline=facts.deadline,
            agent_duration_s=ending.outcome.get("duration_s"),
            base_hash=_base_hash(facts, state["submissions"]),
            refusals=state.get("refusals") or [],
        ).to_dict(),
        driver_model=driver_model(summary, ending.configured_model),
        best_of_k=test_best_of_k(collected.test_all, test),
        timeout_s=facts.timeout_s,
        limit=facts.limit,
    )
    for name, value in efficiency(
        gpu_counts=facts.gpu_counts,
        agent_s=ending.outcome.get("duration_s"),
        run_s=ending.finished - facts.started,
        improvement=row.improvement,
        cost_usd=row.llm_cost_usd,
    ).items():
        setattr(row, name, value)
    if ending.off_target is not None:
        row.off_target = ending.off_target
        row.off_target_regressed = any(o.get("regressed") for o in ending.off_target)
    row.decoys, row.decoys_read, decoy_meta = decoys.record(
        facts.decoys, facts.workspace, ending.decoys, [facts.store_dir, facts.gateway_dir]
    )
    if ending.end_reason:
        row.end_reason = ending.end_reason
    elif collected.grader_lost:
        row.end_reason = f"grader lost ({collected.grader_lost}); recorded from its store"
    baseline = state.get("baseline")
    meta: dict[str, Any] = {
        "autorl_version": facts.autorl_version,
        "backend": facts.backend,
        "model_path": facts.model_path,
        "model_source": facts.model_source,
        "model_revision": facts.model_revision,
        "limit": facts.limit,
        "eval_config": baseline.get("config") if baseline is not None else None,
        "python": facts.python,
        "agent_started": facts.agent_started,
        "deadline": facts.deadline,
        "prepare_s": facts.prepare_s,
        "task_source": facts.task_source,
        "finished_at": ending.finished,
        "recorded_at": time.time(),
        "timeout_s": facts.timeout_s,
        "gpu_budget": facts.gpu_budget,
        "llm_gateway": {"record_dir": facts.gateway_dir, **(summary or {"error": ending.gateway_error or "no totals"})},
    }
    if usage is not None and summary:
        meta["llm_usage"] = {
            k: summary.get(k)
            for k in ("prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "calls", "failed", "refused")
        }
    meta["grader"] = {"restarts": ending.grader_restarts, "lost": collected.grader_lost}
    meta["sandbox"] = {"mode": facts.sandbox, "network": facts.network, "warning": facts.sandbox_warning}
    meta.update(
        harness_hashes=facts.harness_hashes,
        store_dir=facts.store_dir,
        hidden_dir=facts.hidden_dir,
        benchmark_options=facts.benchmark_options,
        refusals=state.get("refusals", []),
        tmp_dir=facts.tmp_dir,
        watch_dir=facts.watch_dir,
        variants=[str(p) for p in _known_variants(facts.base_model, home)],
        watch=dict(ending.watch),
        orchestrator=ending.orchestrator.copy(),
        decoys=decoy_meta,
    )
    run_dir = Path(facts.workspace) if facts.workspace else home / "runs" / facts.task / facts.run_id
    return RunResult(
        facts.run_id, row.record(), state["submissions"], baseline, test, ending.outcome.copy(), run_dir, meta
    )


def _base_hash(facts: RunFacts, submissions: list[SubmissionRecord]) -> str | None:
    # the base model's content digest, comparable with the grader's digest of each submission (a copy of the
    # base submitted as is has the same); the base's files are the harness's, out of the agent's reach
    if not facts.model_path or not any(s.get("content_hash") for s in submissions):
        return None
    from autorl.evaluation.identity import model_hash

    try:
        return model_hash(Path(facts.model_path)) if Path(facts.model_path).is_dir() else None
    except OSError:
        return None


def _known_variants(spec: str, home: Path) -> list[Path]:
    try:
        return cached_instruct_variants(spec, home)
    except Exception:  # a cache that cannot be listed only means no variant at hand
        return []


# -- record and audit -------------------------------------------------------------------------------------
def record(
    result: RunResult,
    benchmark: Benchmark,
    home: Path,
    *,
    audit: bool,
    audit_budget_s: float,
    say: Say,
    judge: tuple[str, int] | None = None,
) -> None:
    """Recorded from the grader's store first, before any file the agent wrote is read; then audited (each
    audit step bounded, none able to lose the run) and recorded again with the audit's flags."""
    from autorl.audit import add_taken_decoys, audit_run, failed_flag, pending_flag

    if audit:
        result.audit = [pending_flag().to_dict()]
    else:
        _keep(result)
    record_run(result, home)
    if not audit:
        return
    say("auditing the run")
    try:
        result.audit = [f.to_dict() for f in audit_run(result.to_dict(), benchmark=benchmark, budget_s=audit_budget_s)]
    except Exception as exc:
        result.meta["post_run_errors"] = [f"audit: {type(exc).__name__}: {str(exc)[:200]}"]
        result.audit = [failed_flag(exc).to_dict()]
    add_taken_decoys(result.row, result.audit)  # the canaries the audit found in the agent's files
    if judge is not None:  # the judged audit (--audit-judge): its own gateway, its flags beside the others
        from autorl.runs.judging import ask_judge

        say(f"asking the judge {judge[0]}")
        try:
            judged = ask_judge(result.to_dict(), home, judge[0], samples=judge[1], budget_s=audit_budget_s)
            result.audit += [f.to_dict() for f in judged.flags]
            result.row = {**result.row, **judged.columns()}
        except Exception as exc:
            result.audit.append(
                {
                    "name": "judge-failed",
                    "severity": "medium",
                    "evidence": [],
                    "detail": f"the judge did not run ({type(exc).__name__}: {str(exc)[:200]}): run "
                    "`autorl audit RUN_ID --judge MODEL`",
                }
            )
    _keep(result)
    record_run(result, home)


def _keep(result: RunResult) -> None:
    """The run's keep policy applied once nothing reads its checkpoints any more (:mod:`autorl.grader.keep`);
    what it deleted goes into the record's ``meta.disk``. A failure costs only itself."""
    from autorl.grader.keep import keep_after_run

    store = result.meta.get("store_dir")
    if not store:
        return
    try:
        result.meta["disk"] = keep_after_run(Path(str(store)), Path(str(result.row.get("workspace"))) / "output")
    except Exception as exc:
        result.meta.setdefault("post_run_errors", []).append(f"keep: {type(exc).__name__}: {str(exc)[:200]}")


def finish(
    facts: RunFacts,
    collected: Collected,
    ending: Ending,
    benchmark: Benchmark,
    home: Path,
    *,
    audit: bool,
    audit_budget_s: float,
    say: Say,
    judge: tuple[str, int] | None = None,
) -> RunResult:
    """The run's record built (:func:`build_result`), recorded and audited (:func:`record`)."""
    result = build_result(facts, collected, ending, home)
    with contextlib.suppress(OSError):  # a workspace that is gone still gets its result.json (when it can)
        result.run_dir.mkdir(parents=True, exist_ok=True)
    # the audit needs the hidden data: a run recovered without its grader's configuration is recorded as it is
    record(
        result,
        benchmark,
        home,
        audit=audit and bool(facts.hidden_dir),
        audit_budget_s=audit_budget_s,
        say=say,
        judge=judge,
    )
    return result
