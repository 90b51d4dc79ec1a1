"""``autorl.run()``: the steps of a run in the order DESIGN section 2 tells them, each in its module of the run
wing (:mod:`autorl.runs`): resolve and acquire (:mod:`~autorl.runs.plan`), the workspace
(:mod:`~autorl.runs.place`), the grader, the gateway and the baseline (:mod:`~autorl.runs.services`), the agent
(:mod:`~autorl.runs.agent`), then the finish that ``autorl recover`` shares (:mod:`~autorl.runs.finish`). Every
process a run starts ends with it (:mod:`autorl.procs.lease`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from autorl.decoys import plant
from autorl.gateway.agent_env import operator_variables
from autorl.grader.keep import KEEP_WHILE_RUNNING_BYTES
from autorl.inference.gpu_share import visible_gpus, weights_bytes
from autorl.plugins.registry import resolve_task
from autorl.record.ledger import Ledger
from autorl.record.result import RunResult
from autorl.resources import usable_home
from autorl.runs.agent import AgentRun, check_agent_view, run_the_agent
from autorl.runs.collect import collect_from
from autorl.runs.facts import RunFacts
from autorl.runs.finish import Ending, finish
from autorl.runs.interrupt import Interrupted, interrupted_outcome, interruptible
from autorl.runs.offtarget import check_tasks, score_off_target, selected_snapshot
from autorl.runs.place import check_port, make_place
from autorl.runs.plan import acquire, output_quota, resolve, share_gpu
from autorl.runs.progress import Say, to_stderr
from autorl.runs.services import baseline, start_clock, start_services
from autorl.runs.spec import RunSpec
from autorl.runs.workspace import disk_rules

__all__ = ["RunResult", "RunSpec", "run", "run_spec"]


def run(
    agent: str,
    task: str,
    model: str,
    timeout: float,
    *,
    port: int | None = None,
    backend: str | None = None,
    gpus: str | None = None,
    runs_dir: Path | str | None = None,
    seed: int = 0,
    agent_env: Mapping[str, str] | None = None,
    agent_credentials: Sequence[str] = (),
    benchmark_options: Mapping[str, Any] | None = None,
    backend_options: Mapping[str, Any] | None = None,
    eval_timeout: float = 3600.0,
    grace_s: float = 10.0,
    final_test: bool = True,
    test_all: bool = True,
    off_target: Sequence[str] = (),
    limit: int | None = None,
    audit: bool = True,
    sandbox: str = "auto",
    network: str = "on",
    audit_budget_s: float = 900.0,
    log: Say | None = None,
    llm_budget_usd: float | None = None,
    llm_budget_tokens: int | None = None,
    llm_prices: Path | str | None = None,
    audit_judge: str | None = None,
    audit_judge_samples: int = 1,
    decoys: bool = True,
    keep: str = "best",
    output_quota_gb: float | None = None,
) -> RunResult:
    """Run one agent on one task from one base model, and record the result.

    Args:
        agent: a registered agent name, or a folder with ``config.yaml`` + start script.
        task: a registered benchmark name, or a local folder used without installing it: an rl-smith folder
            (with autorl-smith) or a plugin's source folder (recorded as the benchmark's name, the folder beside
            it).
        model: a local directory, a hub id (``org/name[@revision]``) or a built-in model (``autorl:tiny``).
        timeout: the agent's time budget in seconds, fixed when the agent starts.
        port: the grader's port (default: a free one).
        backend: the inference backend (default: vllm when usable, else hf).
        gpus: e.g. ``agent=0-2,grader=3``.
        runs_dir: where workspaces go (default ``AUTORL_HOME/runs``).
        seed: recorded, and given to the agent as ``AUTORL_SEED``.
        agent_env: variables for the agent on top of the contract (override its config's env_vars).
        agent_credentials: names of host variables passed on to the agent with their values (never an upstream's
            key, a credential variable or an ``AUTORL_*`` setting: refused before anything starts).
        limit: evaluate only the first N items of each split (quick checks; recorded).
        audit: run the deterministic cheat audit at the end (``autorl audit`` runs it later too).
        audit_budget_s: the audit's wall-clock budget (the run is recorded before it starts).
        sandbox: ``auto`` (bwrap where it works, else none with a warning), ``bwrap`` or ``none``.
        network: ``on``, or ``off`` (bwrap only: the agent reaches nothing but the grader and the LLM gateway).
        llm_budget_usd: the agent's model calls stop (the gateway refuses them) once they cost this much.
        llm_budget_tokens: the same, in prompt + completion tokens.
        llm_prices: a YAML/JSON price table overriding the gateway's (default ``AUTORL_LLM_PRICES``).
        audit_judge: a judge model that also audits the run (:mod:`autorl.runs.judging`), with
            ``audit_judge_samples`` samples.
        decoys: plant decoys in the workspace and record which the agent touched (:mod:`autorl.decoys`).
    """
    return run_spec(
        RunSpec.build(
            agent,
            task,
            model,
            timeout,
            port=port,
            backend=backend,
            gpus=gpus,
            runs_dir=runs_dir,
            seed=seed,
            agent_env=agent_env,
            agent_credentials=tuple(agent_credentials),
            benchmark_options=benchmark_options,
            backend_options=backend_options,
            eval_timeout=eval_timeout,
            grace_s=grace_s,
            final_test=final_test,
            test_all=test_all,
            off_target=tuple(off_target),
            limit=limit,
            audit=audit,
            sandbox=sandbox,
            network=network,
            audit_budget_s=audit_budget_s,
            llm_budget_usd=llm_budget_usd,
            llm_budget_tokens=llm_budget_tokens,
            llm_prices=llm_prices,
            audit_judge=audit_judge,
            audit_judge_samples=audit_judge_samples,
            decoys=decoys,
            keep=keep,
            output_quota_gb=output_quota_gb,
        ),
        log=log,
    )


def run_spec(spec: RunSpec, *, log: Say | None = None) -> RunResult:
    """Run ``spec`` (:class:`~autorl.runs.spec.RunSpec`, checked when it was built) and record the result: the
    steps of :func:`run`, each given the spec or the part of it it needs."""
    say = log or to_stderr
    check_port(spec.port)
    task_source = spec.task if Path(spec.task).expanduser().is_dir() else None
    task = resolve_task(spec.task)  # a name, or a local folder (an rl-smith folder, a plugin's source): its name
    home = usable_home()
    agent_env = operator_variables(spec.agent_credentials, spec.agent_env)
    plan = resolve(spec, task, agent_env, say)
    off_tasks = check_tasks(spec.off_target)  # an unknown off-target name stops the run before anything starts
    preparing = time.time()
    assets = acquire(plan, spec.model, home)
    check_agent_view(plan, assets, home, spec.runs_dir, agent_env)  # refused before anything starts
    # the run starts once its model and data are at hand: building the built-in model or a download is timed
    # apart (prepare_s), never part of the run's duration
    started = time.time()
    plan = share_gpu(plan, assets, say)
    quota = output_quota(spec.output_quota_gb, assets.model.path)
    place = make_place(plan, assets, home, spec, say, disk_rules(spec.keep, quota))
    planted = plant(place.root, task, place.url) if spec.decoys else None
    # the keep policy applies while the run goes where checkpoints are large enough to fill a disk (it then scores
    # each submission on test between submissions); a small model's copies go once the run is recorded
    disk = {
        "keep": spec.keep,
        "test_each": spec.final_test and spec.test_all,
        "keep_while_running": weights_bytes(assets.model.path) >= KEEP_WHILE_RUNNING_BYTES,
        "output_quota": quota,
        "agent_tmp": str(place.tmp_dir) if plan.sandbox.mode == "bwrap" else None,
    }
    services = start_services(
        plan, assets, place, home, spec, decoy_tokens=planted.tokens if planted else None, grader_options=disk
    )
    bwrap = plan.sandbox.mode == "bwrap"
    facts = RunFacts(
        run_id=place.run_id,
        task=task,
        agent=plan.agent_name,
        base_model=assets.model.spec,
        started=started,
        timeout_s=spec.timeout,
        workspace=str(place.root),
        store_dir=str(place.store_dir),
        seed=spec.seed,
        sandbox=plan.sandbox.recorded_mode,
        limit=spec.limit,
        harness_hashes=place.harness,
        backend=plan.backend,
        model_path=str(assets.model.path),
        model_source=assets.model.source,
        model_revision=assets.model.revision,
        hidden_dir=str(assets.data.hidden_dir),
        benchmark_options=plan.benchmark_options,
        network=plan.sandbox.network,
        sandbox_warning=plan.sandbox_warning,
        tmp_dir=str(place.tmp_dir) if bwrap else None,
        watch_dir=str(place.watch_dir),
        gateway_dir=str(place.gateway_dir),
        decoys=planted.to_dict() if planted else None,
        gpu_counts=plan.gpus.counts(len(visible_gpus())),
        gpu_budget=plan.gpu_budget,
        prepare_s=round(started - preparing, 1),
        task_source=str(Path(task_source).expanduser().resolve()) if task_source else None,
    )
    live = Ledger(home / "autorl.db")
    live.start_run(facts.to_dict())
    stack = contextlib.ExitStack()
    stack.callback(live.close)
    agent_run: AgentRun | None = None
    interrupted: Interrupted | None = None
    with interruptible() as guard:
        try:
            try:
                baseline(services, spec.eval_timeout, say)
                deadline = start_clock(services, spec.limits)
                facts = replace(facts, deadline=deadline, agent_started=deadline - spec.timeout)
                live.update_live(place.run_id, deadline=facts.deadline, agent_started=facts.agent_started)
                agent_run = run_the_agent(
                    plan, assets, place, services, stack, home, deadline, spec, say, decoys=planted
                )
            except Interrupted as exc:  # Ctrl-C, SIGTERM, SIGHUP: what was scored is recorded all the same
                interrupted = exc
                say(f"{exc}; finishing the run (another signal leaves it to `autorl recover`)")
            guard.finishing()
            collected = collect_from(
                services.grader, place.store_dir, task, spec.eval_timeout, spec.final_test, say, spec.test_all
            )
        except BaseException:
            live.end_run(place.run_id)  # nothing will be recorded for it
            raise
        finally:
            stack.close()
            services.stop()
        off = None
        if off_tasks and interrupted is None:
            best = collected.state.get("best")
            say(f"scoring the selected checkpoint and the base on off-target {', '.join(off_tasks)}")
            off = score_off_target(
                off_tasks,
                base_dir=assets.model.path,
                backend=plan.backend,
                selected=selected_snapshot(place.store_dir, best["submission_id"]) if best else None,
                backend_options=plan.backend_options,
                home=home,
                limit=spec.limit,
            )
        gateway = services.gateway
        ending = Ending(
            outcome=agent_run.outcome
            if agent_run
            else interrupted_outcome(interrupted.name if interrupted else "?", facts.agent_started),
            finished=time.time(),
            gateway=gateway.summary,
            gateway_error=gateway.error,
            grader_restarts=services.grader.restarts,
            decoys=agent_run.decoys if agent_run else None,
            configured_model=agent_run.configured_model if agent_run else None,
            off_target=off,
            end_reason=f"interrupted by {interrupted.name}" if interrupted else None,
        )
        if agent_run is not None:
            ending.watch.update(agent_run.watch)
        result = finish(
            facts,
            collected,
            ending,
            plan.benchmark,
            home,
            audit=spec.audit.enabled,
            audit_budget_s=spec.audit.budget_s,
            say=say,
            judge=spec.audit.judged,
        )
    if interrupted is not None:
        result.meta["interrupted"] = interrupted.name
    return result
