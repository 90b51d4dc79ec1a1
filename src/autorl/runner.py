"""``autorl.run()``, step by step as DESIGN section 2 tells it: resolve -> acquire -> workspace -> grader ->
baseline -> agent -> collect -> record. Each step is a function below; what one step makes for the next is a
small frozen dataclass (:class:`_Plan`, :class:`_Assets`, :class:`_Place`, :class:`_Services`,
:class:`_AgentRun`, :class:`_Collected`). The row and its recording are :mod:`autorl.results`'. :func:`collect`
and :func:`record` also finish a run whose orchestrator died (:mod:`autorl.recover`); every process a run starts
ends with it (:mod:`autorl.lease`).

Longer than most modules (about 560 lines) on purpose: the eight steps and the state they hand on read top to
bottom in one file, the way a run happens; each step is short and the helpers beside it serve it only.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.agents.base import Agent, AgentContext
from autorl.agents.process import AgentOutcome, agent_environment, run_agent
from autorl.errors import AutorlError, GraderError, UsageError
from autorl.gpus import GpuAssignment, parse_gpus
from autorl.grader.client import GraderClient
from autorl.grader.config import GraderConfig
from autorl.grader.process import GraderProcess, grader_log_path
from autorl.grader.server import free_port
from autorl.ledger import Ledger
from autorl.registry import default_backend, get_backend, get_benchmark, resolve_agent
from autorl.resources import (
    BenchmarkData,
    ResolvedModel,
    autorl_home,
    prepare_data,
    private_dir,
    resolve_model,
)
from autorl.results import RunResult, record_run, run_row
from autorl.version import __version__
from autorl.workspace import Workspace, build_workspace

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.sandbox import SandboxChoice

__all__ = ["GATEWAY_USAGE_SOURCE", "RunResult", "collect", "record", "run"]

Log = Callable[[str], None]

#: the gateway's totals: its own counts from the upstreams' usage fields, not the agent's word
GATEWAY_USAGE_SOURCE = "gateway"


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
    limit: int | None = None,
    audit: bool = True,
    sandbox: str = "auto",
    network: str = "on",
    audit_budget_s: float = 900.0,
    log: Log | None = None,
    llm_budget_usd: float | None = None,
    llm_budget_tokens: int | None = None,
    llm_prices: Path | str | None = None,
) -> RunResult:
    """Run one agent on one task from one base model, and record the result.

    Args:
        agent: a registered agent name, or a folder with ``config.yaml`` + start script.
        task: a registered benchmark name.
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
    """
    say: Log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    if timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if audit_budget_s <= 0:
        raise UsageError("--audit-budget must be a positive number of seconds")
    started = time.time()
    home = autorl_home()
    from autorl.gateway.agent_env import operator_variables

    agent_env = operator_variables(agent_credentials, agent_env or {})
    plan = _resolve(agent, task, backend, gpus, sandbox, network, agent_env, benchmark_options, backend_options,
                    say)
    assets = _acquire(plan, model, home)
    place = _workspace(plan, assets, home, runs_dir, port, timeout, say)
    services = _start_grader(plan, assets, place, home, eval_timeout, limit, llm_budget_usd, llm_budget_tokens,
                             llm_prices)
    live = Ledger(home / "autorl.db")
    live.start_run({"run_id": place.run_id, "task": task, "agent": plan.agent_name, "base_model": assets.model.spec,
                    "workspace": str(place.root), "store_dir": str(place.store_dir), "started": started,
                    "timeout_s": timeout, "deadline": None, "seed": seed, "sandbox": plan.sandbox.recorded_mode,
                    "limit": limit, "harness_hashes": place.harness})
    stack = contextlib.ExitStack()
    stack.callback(live.close)
    try:
        deadline = _baseline(services, eval_timeout, timeout, say)
        live.update_live(place.run_id, deadline=deadline, agent_started=deadline - timeout)
        agent_run = _run_the_agent(plan, assets, place, services, stack, home, deadline, seed, grace_s, say)
        collected = _collect(services, place, plan.task, eval_timeout, final_test, say)
    except BaseException:
        live.end_run(place.run_id)  # nothing will be recorded for it
        raise
    finally:
        stack.close()
        services.gateway.stop()
        services.grader.stop()
    result = _result(plan, assets, place, services, agent_run, collected, home, started=started, seed=seed, limit=limit,
                     timeout=timeout)
    record(result, plan.benchmark, home, audit=audit, audit_budget_s=audit_budget_s, say=say)
    return result


# -- 1. resolve -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Plan:
    """What the run's names resolve to: benchmark, agent, backend, GPUs, sandbox."""

    task: str
    benchmark: Benchmark
    benchmark_options: dict[str, Any]
    agent: Agent
    agent_name: str
    backend: str
    backend_options: dict[str, Any]
    gpus: GpuAssignment
    sandbox: SandboxChoice
    sandbox_warning: str | None


def _resolve(agent: str, task: str, backend: str | None, gpus: str | None, sandbox: str, network: str,
             agent_env: Mapping[str, str] | None, benchmark_options: Mapping[str, Any] | None,
             backend_options: Mapping[str, Any] | None, say: Log) -> _Plan:
    """Benchmark, agent, backend, GPUs and sandbox from their names (unknown: one line with close matches)."""
    from autorl.sandbox import choose

    bench_options = dict(benchmark_options or {})
    benchmark = get_benchmark(task)(bench_options)
    agent_cls = resolve_agent(agent)
    agent_obj = agent_cls({"env": dict(agent_env or {})})
    agent_obj.preflight()
    agent_obj.check_task(benchmark)
    choice = choose(sandbox, network)
    warning = choice.warning
    if sandbox == "auto" and choice.recorded_mode != "bwrap" and warning:
        warning += (f"; the run is recorded as sandbox {choice.recorded_mode} and flagged by the audit "
                    "(--sandbox bwrap refuses to run without a sandbox)")
    if warning:
        say(f"warning: {warning}")
    backend_name = backend or default_backend()
    get_backend(backend_name)
    assignment = parse_gpus(gpus) if gpus else GpuAssignment()
    options = dict(backend_options or {})
    if assignment.shared:
        # the grader's idle engine gives the shared GPU back to the agent between evaluations
        options.setdefault("sleep_when_idle", True)
        if backend_name == "vllm":
            options.setdefault("gpu_memory_utilization", 0.25)  # bench/vllm_h200.md
    return _Plan(task=task, benchmark=benchmark, benchmark_options=bench_options, agent=agent_obj,
                 agent_name=agent_cls.name, backend=backend_name, backend_options=options, gpus=assignment,
                 sandbox=choice, sandbox_warning=warning)


# -- 2. acquire -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Assets:
    """The base model's files and the benchmark's data (training data for the agent, hidden for the grader)."""

    model: ResolvedModel
    data: BenchmarkData


def _acquire(plan: _Plan, model: str, home: Path) -> _Assets:
    """The base model (local, built-in or from the hub) and the benchmark's data (the plugin's, idempotent)."""
    resolved = resolve_model(model)
    return _Assets(resolved, prepare_data(plan.benchmark, home))


# -- 3. workspace -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Place:
    """Where the run lives: its workspace, the grader's store and the agent's private folders, the port."""

    run_id: str
    root: Path
    workspace: Workspace
    runs_root: Path
    store_dir: Path
    tmp_dir: Path
    watch_dir: Path
    port: int
    harness: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _workspace(plan: _Plan, assets: _Assets, home: Path, runs_dir: Path | str | None, port: int | None, timeout: float,
               say: Log) -> _Place:
    """``<runs>/<task>/<run_id>_<agent>/`` built, the grader's store and the agent's folders made private."""
    from autorl.audit import harness_hashes

    model, data = assets.model, assets.data
    runs_root = Path(runs_dir).expanduser() if runs_dir else home / "runs"
    run_id, root = _new_run_id(runs_root / plan.task, plan.agent_name, home)
    name = f"{plan.task}_{run_id}_{plan.agent_name}"
    store_dir = private_dir(home / "grader" / name)
    # the agent's /tmp and the record of the files it had, beside the grader's store: outside the workspace,
    # out of the agent's reach, and readable by the audit after the run
    agent_dir = private_dir(home / "grader" / f"{name}.agent")
    port = port or free_port()
    ws = build_workspace(root, benchmark=plan.benchmark, model=model, train_dir=data.train_dir, timeout_s=timeout,
                         grader_url=f"http://127.0.0.1:{port}")
    say(f"run {run_id}: {plan.agent_name} on {plan.task} from {model.spec} ({timeout:.0f} s); workspace {root}")
    return _Place(run_id=run_id, root=root, workspace=ws, runs_root=runs_root, store_dir=store_dir,
                  tmp_dir=private_dir(agent_dir / "tmp"), watch_dir=private_dir(agent_dir / "watch"), port=port,
                  harness=harness_hashes(root, plan.benchmark))


def _new_run_id(parent: Path, agent: str, home: Path) -> tuple[str, Path]:
    """A run id unique in this home (the ledger's key, the grader store's name) and a workspace directory,
    both claimed atomically: runs started in the same second (a study's slots) each get their own."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    claims = private_dir(home / "grader" / ".run-ids")
    for k in range(1000):
        run_id = stamp if k == 0 else f"{stamp}-{k}"
        root = parent / f"{run_id}_{agent}"
        if root.exists():
            continue
        try:
            (claims / run_id).mkdir()
        except FileExistsError:
            continue
        try:
            root.mkdir(parents=True)
        except FileExistsError:
            continue
        return run_id, root
    raise AutorlError(f"cannot find a free run directory under {parent}")


# -- 4. grader (and the LLM gateway) ----------------------------------------------------------------------
@dataclass(frozen=True)
class _Services:
    """The run's grader and LLM gateway, each in its own process."""

    config: GraderConfig
    grader: GraderProcess
    gateway: Any  # autorl.gateway.GatewayProcess (imported lazily)


def _start_grader(plan: _Plan, assets: _Assets, place: _Place, home: Path, eval_timeout: float, limit: int | None,
                  llm_budget_usd: float | None, llm_budget_tokens: int | None,
                  llm_prices: Path | str | None) -> _Services:
    """The grader on the run's port with its own tokens, and the LLM gateway on a free one."""
    model, data = assets.model, assets.data
    config = GraderConfig.for_run(task=plan.task, workspace=place.root, output_dir=place.workspace.output,
                                  store_dir=place.store_dir, data=data, base=model, backend=plan.backend, home=home,
                                  backend_options=plan.backend_options, benchmark_options=plan.benchmark_options,
                                  eval_timeout=eval_timeout, workers=plan.gpus.grader_workers(), limit=limit)
    grader = GraderProcess(config, place.store_dir / "config.json", place.port, grader_log_path(place.store_dir))
    try:
        gateway = _start_gateway(home / "gateway" / f"{plan.task}_{place.run_id}_{plan.agent_name}",
                                 llm_budget_usd, llm_budget_tokens, llm_prices)
    except BaseException:
        grader.stop()
        raise
    return _Services(config, grader, gateway)


def _start_gateway(folder: Path, budget_usd: float | None, budget_tokens: int | None,
                   prices: Path | str | None) -> Any:
    """The run's LLM gateway, in its own process, on a free port of 127.0.0.1 (see :mod:`autorl.gateway`)."""
    import os

    from autorl.gateway import GatewayProcess, load_prices, new_config, upstreams_from_env

    if budget_usd is not None and not 0 < budget_usd < float("inf"):
        raise UsageError("--llm-budget-usd must be a positive number of US dollars")
    if budget_tokens is not None and budget_tokens <= 0:
        raise UsageError("--llm-budget-tokens must be a positive number of tokens")
    prices = prices or os.environ.get("AUTORL_LLM_PRICES") or None
    load_prices(prices)  # a bad table stops the run here, in one line
    upstreams_from_env()  # and so does a bad upstreams file
    folder = private_dir(folder)
    config = new_config(folder, budget_usd=budget_usd, budget_tokens=budget_tokens,
                        prices_path=str(Path(prices).expanduser().resolve()) if prices else None,
                        timeout_s=float(os.environ.get("AUTORL_LLM_TIMEOUT_S", "600")))
    return GatewayProcess(config, folder / "config.json", free_port(), folder / "gateway.log")



# -- 5. baseline ------------------------------------------------------------------------------------------
def _baseline(services: _Services, eval_timeout: float, timeout: float, say: Log) -> float:
    """The base model scored by the grader exactly as submissions will be; returns the agent's deadline."""
    services.grader.wait_ready()
    services.gateway.wait_ready()
    grader = services.grader
    say(f"grader at {grader.url}; evaluating the baseline")
    base = grader.surviving(lambda: grader.admin.baseline(timeout=eval_timeout))
    say(f"baseline: {base['score']:.2f} (n={base['n']}, 95% CI {base['ci95'][0]:.2f}-{base['ci95'][1]:.2f})")
    deadline = time.time() + timeout
    grader.surviving(lambda: grader.admin.set_deadline(deadline))
    return deadline


# -- 6. agent ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _AgentRun:
    """How the agent's process ended, and what the watcher of its files saw."""

    deadline: float
    outcome: AgentOutcome
    watch: dict[str, int]


def _context(plan: _Plan, assets: _Assets, place: _Place, services: _Services, deadline: float, seed: int) -> AgentContext:
    """The agent's run context; :class:`AgentContext` builds the environment contract from it."""
    model = assets.model
    ws = place.workspace
    return AgentContext(
        task=plan.task, base_model=model.name, workspace=place.root, model_path=ws.model(model.name),
        data_path=ws.data, output_dir=ws.output, grader_url=place.url, token=services.config.agent_token,
        deadline=deadline, run_dir=place.root,
        env={"AUTORL_SEED": str(seed), "AUTORL_PYTHON": sys.executable, **plan.gpus.agent_env()},
    )


def _run_the_agent(plan: _Plan, assets: _Assets, place: _Place, services: _Services, stack: contextlib.ExitStack, home: Path,
                   deadline: float, seed: int, grace_s: float, say: Log) -> _AgentRun:
    """The agent in its process group (sandboxed where chosen) until it exits or the deadline passes."""
    from autorl.gateway.agent_env import scrub
    from autorl.watch import Watcher, interval_from_env

    model, data = assets.model, assets.data
    ctx = _context(plan, assets, place, services, deadline, seed)
    gateway = services.gateway
    # the agent reaches models only through the gateway: no upstream key, the run's token instead
    env = scrub(agent_environment(ctx.env, plan.agent.environment(ctx)), gateway.url, gateway.config.token)
    argv = plan.agent.command(ctx)
    bwrap = plan.sandbox.mode == "bwrap"
    if bwrap:
        argv = _sandboxed(argv, plan.sandbox, stack, root=place.root, env=env, home=home, runs_root=place.runs_root,
                          model=model.path, data=data, store_dir=place.store_dir, benchmark=plan.benchmark,
                          port=place.port, gpus=plan.gpus.agent_has_gpus, agent_paths=plan.agent.sandbox_paths(),
                          tmp_dir=place.tmp_dir, relay_ports=[int(gateway.url.rsplit(":", 1)[1])])
    from autorl.lease import guarded

    argv = guarded(argv)  # the agent (and its sandbox) ends with this process, however this process ends
    log_path = place.workspace.agent_log
    say(f"agent {plan.agent_name} started ({_describe(plan.sandbox)}); log {log_path}")
    sources = [("", place.root)] + ([("/tmp/", place.tmp_dir)] if bwrap else [])
    watcher = Watcher(sources, place.watch_dir, interval_from_env()).start()
    from autorl.progress import SubmissionPrinter

    # each submission's dev score as it lands, read from the grader (whichever process serves it now)
    printer = SubmissionPrinter(lambda: services.grader.admin.state(), deadline, say).start()
    try:
        outcome = run_agent(argv, cwd=place.root, env=env, log_path=log_path, deadline=deadline, grace_s=grace_s)
    finally:
        printer.stop()
        watcher.stop()
    say(f"agent {outcome.reason} after {outcome.duration_s:.0f} s; finishing evaluations in flight")
    gateway.close()  # the agent is done: no more model calls
    return _AgentRun(deadline, outcome, {"passes": watcher.passes, "entries": watcher.entries,
                                         "copied_bytes": watcher.copied_bytes})


def _describe(choice: SandboxChoice) -> str:
    if choice.mode == "none":
        return "no sandbox"
    return f"bwrap sandbox, network {choice.network}"


def _sandboxed(argv: list[str], choice: Any, stack: contextlib.ExitStack, *, root: Path, env: Mapping[str, str],
               home: Path, runs_root: Path, model: Path, data: Any, store_dir: Path, benchmark: Any, port: int,
               gpus: bool, agent_paths: list[Path], tmp_dir: Path, relay_ports: list[int] | None = None) -> list[str]:
    """The agent's command under bubblewrap: evaluation data, storage, caches and secrets absent."""
    from autorl.sandbox import (
        SOCKET_NAME,
        SandboxSpec,
        bwrap_argv,
        extra_hidden,
        extra_read_only,
        hf_cache_dirs,
        model_bind_paths,
    )
    from autorl.sandbox.relay import UnixToTcp

    spec = SandboxSpec(
        workspace=root,
        read_only=[model, *model_bind_paths(model), Path(data.train_dir), *agent_paths, *extra_read_only()],
        hidden=[home, runs_root, *hf_cache_dirs(), Path.home(), *extra_hidden()],
        always_hidden=[store_dir, Path(data.hidden_dir), home / "baselines", home / "autorl.db",
                       *benchmark.hidden_paths()],
        network=choice.network == "on",
        grader_port=port,
        gpus=gpus,
        tmp_dir=tmp_dir,
        slirp=choice.slirp,
        relay_ports=list(relay_ports or []),
    )
    if not spec.network:
        sock_dir = Path(tempfile.mkdtemp(prefix="autorl-grader-"))
        stack.callback(shutil.rmtree, sock_dir, True)
        relay = UnixToTcp(sock_dir / SOCKET_NAME, port)
        relay.start()
        stack.callback(relay.stop)
        from autorl.sandbox.relay import socket_name_for

        for extra_port in spec.relay_ports:
            extra = UnixToTcp(sock_dir / socket_name_for(extra_port), extra_port)
            extra.start()
            stack.callback(extra.stop)
        spec.socket_dir = sock_dir
    return bwrap_argv(spec, argv, executable=choice.executable, environ_path=env.get("PATH", ""))



# -- 7. collect -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Collected:
    """The grader's state once the run is closed, and the best submission's test evaluation; when the grader
    was lost for good (it died more often than it is started again), why, and the state read from its store."""

    state: dict[str, Any]
    test: dict[str, Any] | None
    grader_lost: str | None = None


def _collect(services: _Services, place: _Place, task: str, eval_timeout: float, final_test: bool,
             say: Log) -> _Collected:
    """:func:`collect` from the run's grader; from its store file when the grader is gone for good."""
    grader = services.grader
    try:
        return _Collected(*grader.surviving(lambda: collect(grader.admin, eval_timeout, final_test, say)))
    except GraderError:
        if services.grader.alive:
            raise
    from autorl.recover import state_from_store

    lost = services.grader.error or "the grader is gone"
    say(f"warning: {lost}; the run is recorded from the grader's store")
    return _Collected(state_from_store(place.store_dir / "grader.db", task), None, lost)


def collect(admin: GraderClient, eval_timeout: float, final_test: bool,
            say: Log) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """From the grader's own store only: evaluations in flight finished (up to ``eval_timeout`` s), the run
    closed, the best on dev scored once on the test split. Returns the grader's state and that test evaluation
    (``autorl recover`` collects a lost run with it too)."""
    _wait_for_evaluations(admin, eval_timeout)
    admin.close_run()
    state = admin.state()
    test = None
    if final_test and state["best"] is not None:
        say(f"scoring the best submission ({state['best']['submission_id']}) on the hidden test split")
        test = admin.evaluate_test()
    return state, test


def _wait_for_evaluations(admin: GraderClient, timeout: float) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while True:
        state = admin.state()
        counts = state["counts"]
        if not counts.get("queued") and not counts.get("running") and not counts.get("pending"):
            return state
        if time.monotonic() > end:
            return state
        time.sleep(0.5)



# -- 8. record --------------------------------------------------------------------------------------------
def _result(plan: _Plan, assets: _Assets, place: _Place, services: _Services, agent_run: _AgentRun, collected: _Collected,
            home: Path, *, started: float, seed: int, limit: int | None, timeout: float) -> RunResult:
    """The run's record: its row from the grader's state (:func:`autorl.results.run_row`) and its conditions."""
    model, data = assets.model, assets.data
    state, test = collected.state, collected.test
    gateway = services.gateway
    summary = gateway.summary
    usage = None
    if summary and (summary.get("calls") or summary.get("refused")):
        usage = {"tokens": int(summary["tokens"]), "cost_usd": float(summary["cost_usd"]),
                 "source": GATEWAY_USAGE_SOURCE}
    outcome = asdict(agent_run.outcome)
    row = run_row(run_id=place.run_id, started=started, finished=time.time(), task=plan.task, agent=plan.agent_name,
                  base_model=model.spec, workspace=str(place.root), seed=seed, sandbox=plan.sandbox.recorded_mode,
                  state=state, test=test, outcome=outcome, llm_usage=usage)
    if collected.grader_lost:
        row.end_reason = f"grader lost ({collected.grader_lost}); recorded from its store"
    bwrap = plan.sandbox.mode == "bwrap"
    meta: dict[str, Any] = {
        "autorl_version": __version__,
        "backend": plan.backend,
        "model_path": str(model.path),
        "model_source": model.source,
        "model_revision": model.revision,
        "limit": limit,
        "eval_config": (state.get("baseline") or {}).get("config"),
        "python": sys.version.split()[0],
        "agent_started": agent_run.deadline - timeout,
        "deadline": agent_run.deadline,
        "timeout_s": timeout,
        "llm_gateway": {"record_dir": gateway.config.record_dir,
                        **(summary or {"error": gateway.error or "no totals"})},
    }
    if usage is not None:
        meta["llm_usage"] = {k: summary[k] for k in ("prompt_tokens", "completion_tokens", "cached_tokens",
                                                     "cost_usd", "calls", "failed", "refused")}
    meta["grader"] = {"restarts": services.grader.restarts, "lost": collected.grader_lost}
    meta["sandbox"] = {"mode": plan.sandbox.recorded_mode, "network": plan.sandbox.network,
                       "warning": plan.sandbox_warning}
    meta.update(harness_hashes=place.harness, store_dir=str(place.store_dir), hidden_dir=str(data.hidden_dir),
                benchmark_options=plan.benchmark_options, refusals=state.get("refusals", []),
                tmp_dir=str(place.tmp_dir) if bwrap else None, watch_dir=str(place.watch_dir),
                variants=[str(p) for p in _known_variants(model.spec, home)], watch=agent_run.watch)
    return RunResult(place.run_id, row.record(), state["submissions"], state.get("baseline"), test, outcome,
                     place.root, meta)


def _known_variants(spec: str, home: Path) -> list[Path]:
    try:
        from autorl.resources import cached_instruct_variants

        return cached_instruct_variants(spec, home)
    except Exception:  # a cache that cannot be listed only means no variant at hand
        return []


def record(result: RunResult, benchmark: Benchmark, home: Path, *, audit: bool, audit_budget_s: float,
           say: Log) -> None:
    """Recorded from the grader's store first, before any file the agent wrote is read; then audited (each
    audit step bounded, none able to lose the run) and recorded again with the audit's flags (``autorl
    recover`` records a lost run with it too)."""
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
