"""The finish of a run, shared by a live run (:func:`autorl.runner.run`) and a recovered one
(:func:`autorl.recover.recover`): collect from the grader's own store, score the best on dev once on the test
split, build the record from the run's facts (:func:`build_result`, the one builder of a run's record), record
it, then audit it and record it again with the audit's flags.

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

from autorl import untrusted
from autorl.errors import GraderError
from autorl.gateway.record import SUMMARY_NAME
from autorl.grader.records import state_from_store
from autorl.ledger import record_run
from autorl.resources import cached_instruct_variants
from autorl.results import RunResult, run_row

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.grader.client import GraderClient
    from autorl.grader.process import GraderProcess
    from autorl.progress import Say
    from autorl.runs.facts import RunFacts

__all__ = ["GATEWAY_USAGE_SOURCE", "Collected", "Ending", "build_result", "collect", "collect_from", "finish",
           "gateway_totals", "orchestrator", "record"]

#: the gateway's totals: its own counts from the upstreams' usage fields, not the agent's word
GATEWAY_USAGE_SOURCE = "gateway"


# -- collect ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Collected:
    """The grader's state once the run is closed and the best submission's test evaluation; when the grader
    was lost for good, why (the state is then read from its store)."""

    state: dict[str, Any]
    test: dict[str, Any] | None
    grader_lost: str | None = None


def collect(admin: GraderClient, eval_timeout: float, final_test: bool,
            say: Say) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """From the grader's own store only: evaluations in flight finished (up to ``eval_timeout`` s), the run
    closed, the best on dev scored once on the test split. Returns the grader's state and that test evaluation."""
    _wait_for_evaluations(admin, eval_timeout)
    admin.close_run()
    state = admin.state()
    test = None
    if final_test and state["best"] is not None:
        say(f"scoring the best submission ({state['best']['submission_id']}) on the hidden test split")
        test = admin.evaluate_test()
    return state, test


def _wait_for_evaluations(admin: GraderClient, timeout: float) -> None:
    end = time.monotonic() + timeout
    while True:
        counts = admin.state()["counts"]
        if not counts.get("queued") and not counts.get("running") and not counts.get("pending"):
            return
        if time.monotonic() > end:
            return
        time.sleep(0.5)


def collect_from(grader: GraderProcess, store_dir: Path, task: str, eval_timeout: float, final_test: bool,
                 say: Say) -> Collected:
    """:func:`collect` from a grader that answers (made again when it was started again under the call); from
    its store file when the grader is gone for good."""
    try:
        return Collected(*grader.surviving(lambda: collect(grader.admin, eval_timeout, final_test, say)))
    except GraderError:
        if grader.alive:
            raise
    lost = grader.error or "the grader is gone"
    say(f"warning: {lost}; the run is recorded from the grader's store")
    return Collected(state_from_store(store_dir / "grader.db", task), None, lost)


# -- the record -------------------------------------------------------------------------------------------
def orchestrator(*, lost_at: float | None = None, detail: str | None = None, recovered_at: float | None = None,
                 how: str = "finished by its orchestrator") -> dict[str, Any]:
    """The record's ``orchestrator``: who finished the run (``lost_at`` None: its own orchestrator)."""
    return {"lost_at": lost_at, "detail": detail, "recovered_at": recovered_at, "how": how}


@dataclass(frozen=True)
class Ending:
    """What is known of the agent's phase when the run is finished.

    Attributes:
        outcome: the agent's :class:`~autorl.agents.process.AgentOutcome` as a dict.
        finished: when the run ended (epoch seconds).
        watch: the watcher's counts (``passes``, ``entries``, ``copied_bytes``; None when unknown).
        gateway: the LLM gateway's totals, or None (``gateway_error`` then says why).
        grader_restarts: the grader's restarts during the run (None: unknown).
        orchestrator: who finished the run (``lost_at``, ``detail``, ``recovered_at``, ``how``).
        end_reason: the row's ``end_reason`` in place of the one the outcome and the scores give.
    """

    outcome: dict[str, Any]
    finished: float
    orchestrator: dict[str, Any] = field(default_factory=orchestrator)
    watch: dict[str, int | None] = field(default_factory=lambda: dict.fromkeys(("passes", "entries", "copied_bytes")))
    gateway: dict[str, Any] | None = None
    gateway_error: str | None = None
    grader_restarts: list[dict[str, Any]] | None = None
    end_reason: str | None = None


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
    """The run's record: its row from the grader's state (:func:`autorl.results.run_row`) and its conditions
    from its facts. The one builder of a record: a live run and a recovered one get the same fields."""
    state, test, summary = collected.state, collected.test, ending.gateway
    usage = None
    if summary and (summary.get("calls") or summary.get("refused")):
        usage = {"tokens": int(summary.get("tokens") or 0), "cost_usd": float(summary.get("cost_usd") or 0.0),
                 "source": GATEWAY_USAGE_SOURCE}
    row = run_row(run_id=facts.run_id, started=facts.started, finished=ending.finished, task=facts.task,
                  agent=facts.agent, base_model=facts.base_model, workspace=facts.workspace, seed=facts.seed,
                  sandbox=facts.sandbox, state=state, test=test, outcome=ending.outcome, llm_usage=usage,
                  timeout_s=facts.timeout_s)
    if ending.end_reason:
        row.end_reason = ending.end_reason
    elif collected.grader_lost:
        row.end_reason = f"grader lost ({collected.grader_lost}); recorded from its store"
    meta: dict[str, Any] = {
        "autorl_version": facts.autorl_version,
        "backend": facts.backend,
        "model_path": facts.model_path,
        "model_source": facts.model_source,
        "model_revision": facts.model_revision,
        "limit": facts.limit,
        "eval_config": (state.get("baseline") or {}).get("config"),
        "python": facts.python,
        "agent_started": facts.agent_started,
        "deadline": facts.deadline,
        "timeout_s": facts.timeout_s,
        "llm_gateway": {"record_dir": facts.gateway_dir,
                        **(summary or {"error": ending.gateway_error or "no totals"})},
    }
    if usage is not None and summary:
        meta["llm_usage"] = {k: summary.get(k) for k in ("prompt_tokens", "completion_tokens", "cached_tokens",
                                                         "cost_usd", "calls", "failed", "refused")}
    meta["grader"] = {"restarts": ending.grader_restarts, "lost": collected.grader_lost}
    meta["sandbox"] = {"mode": facts.sandbox, "network": facts.network, "warning": facts.sandbox_warning}
    meta.update(harness_hashes=facts.harness_hashes, store_dir=facts.store_dir, hidden_dir=facts.hidden_dir,
                benchmark_options=facts.benchmark_options, refusals=state.get("refusals", []),
                tmp_dir=facts.tmp_dir, watch_dir=facts.watch_dir,
                variants=[str(p) for p in _known_variants(facts.base_model, home)], watch=dict(ending.watch),
                orchestrator=dict(ending.orchestrator))
    run_dir = Path(facts.workspace) if facts.workspace else home / "runs" / facts.task / facts.run_id
    return RunResult(facts.run_id, row.record(), state["submissions"], state.get("baseline"), test,
                     dict(ending.outcome), run_dir, meta)


def _known_variants(spec: str, home: Path) -> list[Path]:
    try:
        return cached_instruct_variants(spec, home)
    except Exception:  # a cache that cannot be listed only means no variant at hand
        return []


# -- record and audit -------------------------------------------------------------------------------------
def record(result: RunResult, benchmark: Benchmark, home: Path, *, audit: bool, audit_budget_s: float,
           say: Say) -> None:
    """Recorded from the grader's store first, before any file the agent wrote is read; then audited (each
    audit step bounded, none able to lose the run) and recorded again with the audit's flags."""
    from autorl.audit import audit_run, failed_flag, pending_flag

    if audit:
        result.audit = [pending_flag().to_dict()]
    record_run(result, home)
    if not audit:
        return
    say("auditing the run")
    try:
        result.audit = [f.to_dict() for f in audit_run(result.to_dict(), benchmark=benchmark,
                                                        budget_s=audit_budget_s)]
    except Exception as exc:
        result.meta["post_run_errors"] = [f"audit: {type(exc).__name__}: {str(exc)[:200]}"]
        result.audit = [failed_flag(exc).to_dict()]
    record_run(result, home)


def finish(facts: RunFacts, collected: Collected, ending: Ending, benchmark: Benchmark, home: Path, *,
           audit: bool, audit_budget_s: float, say: Say) -> RunResult:
    """The run's record built (:func:`build_result`), recorded and audited (:func:`record`)."""
    result = build_result(facts, collected, ending, home)
    with contextlib.suppress(OSError):  # a workspace that is gone still gets its result.json (when it can)
        result.run_dir.mkdir(parents=True, exist_ok=True)
    # the audit needs the hidden data: a run recovered without its grader's configuration is recorded as it is
    record(result, benchmark, home, audit=audit and bool(facts.hidden_dir), audit_budget_s=audit_budget_s, say=say)
    return result
