"""``autorl.run()``: resources -> workspace -> grader -> baseline -> agent -> collect -> record."""

from __future__ import annotations

import contextlib
import datetime as dt
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autorl.agents.base import Agent, AgentContext
from autorl.agents.command import CommandAgent
from autorl.agents.process import agent_environment, run_agent
from autorl.errors import AutorlError, UsageError
from autorl.evaluation.run import write_json_atomic
from autorl.gpus import GpuAssignment, parse_gpus
from autorl.grader.client import GraderClient
from autorl.grader.process import GraderProcess, grader_log_path
from autorl.grader.server import free_port
from autorl.grader.config import GraderConfig
from autorl.ledger import Ledger
from autorl.registry import get_agent, get_backend, get_backends, get_benchmark
from autorl.resources import autorl_home, prepare_data, private_dir, resolve_model
from autorl.workspace import build_workspace

Log = Callable[[str], None]


@dataclass
class RunResult:
    """The outcome of one run; ``row`` is its ledger / results.csv row."""

    run_id: str
    row: dict[str, Any]
    submissions: list[dict[str, Any]]
    baseline: dict[str, Any] | None
    test: dict[str, Any] | None
    agent: dict[str, Any]
    run_dir: Path
    meta: dict[str, Any] = field(default_factory=dict)
    audit: list[dict[str, Any]] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return bool(self.row["success"])

    @property
    def baseline_score(self) -> float | None:
        return _float(self.row["baseline"])

    @property
    def best_score(self) -> float | None:
        return _float(self.row["best_score"])

    @property
    def improvement(self) -> float | None:
        return _float(self.row["improvement"])

    @property
    def improvement_ci95(self) -> list[float] | None:
        ci = self.row["improvement_ci95"]
        return None if ci is None else [float(x) for x in ci]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["run_dir"] = str(self.run_dir)
        return d


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def resolve_agent(spec: str) -> type[Agent]:
    """A registered agent name, or a folder with config.yaml + start script."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return CommandAgent.from_folder(path)
    if "/" in spec or spec.startswith("."):
        raise UsageError(f"agent folder {spec!r} does not exist")
    return get_agent(spec)


def default_backend() -> str:
    backends = get_backends()
    if "vllm" in backends and backends["vllm"].cls.available():
        return "vllm"
    return "hf"


def _new_run_id(parent: Path, agent: str) -> tuple[str, Path]:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    for k in range(1000):
        run_id = stamp if k == 0 else f"{stamp}-{k}"
        root = parent / f"{run_id}_{agent}"
        if not root.exists():
            return run_id, root
    raise AutorlError(f"cannot find a free run directory under {parent}")


def _describe(choice: Any) -> str:
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
        extra_read_only,
        hf_cache_dirs,
        model_bind_paths,
    )
    from autorl.sandbox.relay import UnixToTcp

    spec = SandboxSpec(
        workspace=root,
        read_only=[model, *model_bind_paths(model), Path(data.train_dir), *agent_paths, *extra_read_only()],
        hidden=[home, runs_root, *hf_cache_dirs(), Path.home()],
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
    started = time.time()
    home = autorl_home()
    bench_cls = get_benchmark(task)
    benchmark = bench_cls(dict(benchmark_options or {}))
    agent_cls = resolve_agent(agent)
    agent_obj = agent_cls({"env": dict(agent_env or {})})
    agent_obj.preflight()
    agent_obj.check_task(benchmark)
    from autorl.sandbox import choose

    sandbox_choice = choose(sandbox, network)
    sandbox_warning = sandbox_choice.warning
    if sandbox == "auto" and sandbox_choice.recorded_mode != "bwrap" and sandbox_warning:
        sandbox_warning += (f"; the run is recorded as sandbox {sandbox_choice.recorded_mode} and flagged by the "
                            "audit (--sandbox bwrap refuses to run without a sandbox)")
    if sandbox_warning:
        say(f"warning: {sandbox_warning}")
    backend_name = backend or default_backend()
    get_backend(backend_name)
    assignment = parse_gpus(gpus) if gpus else GpuAssignment()
    resolved = resolve_model(model)
    data = prepare_data(benchmark, home)
    runs_root = Path(runs_dir).expanduser() if runs_dir else home / "runs"
    run_id, root = _new_run_id(runs_root / task, agent_cls.name)
    store_dir = private_dir(home / "grader" / f"{task}_{run_id}_{agent_cls.name}")
    # the agent's /tmp and the record of the files it had, beside the grader's store: outside the workspace,
    # out of the agent's reach, and readable by the audit after the run
    agent_dir = private_dir(home / "grader" / f"{task}_{run_id}_{agent_cls.name}.agent")
    tmp_dir = private_dir(agent_dir / "tmp")
    watch_dir = private_dir(agent_dir / "watch")
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    ws = build_workspace(
        root, benchmark=benchmark, model=resolved, train_dir=data.train_dir, timeout_s=timeout, grader_url=url
    )
    from autorl.audit import harness_hashes

    harness = harness_hashes(root, benchmark)
    say(f"run {run_id}: {agent_cls.name} on {task} from {resolved.spec} ({timeout:.0f} s); workspace {root}")
    options = dict(backend_options or {})
    if assignment.shared and backend_name == "vllm":
        options.setdefault("gpu_memory_utilization", 0.25)  # bench/vllm_h200.md
    config = GraderConfig(
        task=task,
        workspace=str(root),
        output_dir=str(ws.output),
        store_dir=str(store_dir),
        hidden_dir=str(data.hidden_dir),
        base_model=str(resolved.path),
        base_model_name=resolved.spec,
        backend=backend_name,
        backend_options=options,
        benchmark_options=dict(benchmark_options or {}),
        eval_timeout=eval_timeout,
        workers=assignment.grader_workers(),
        baseline_cache_dir=str(private_dir(home / "baselines")),
        limit=limit,
    )
    grader = GraderProcess(config, store_dir / "config.json", port, grader_log_path(store_dir))
    gateway = _start_gateway(home / "gateway" / f"{task}_{run_id}_{agent_cls.name}", llm_budget_usd,
                             llm_budget_tokens, llm_prices)
    stack = contextlib.ExitStack()
    live = Ledger(home / "autorl.db")
    live.start_run({"run_id": run_id, "task": task, "agent": agent_cls.name, "base_model": resolved.spec,
                    "workspace": str(root), "store_dir": str(store_dir), "started": started, "timeout_s": timeout,
                    "deadline": None, "seed": seed, "sandbox": sandbox_choice.recorded_mode})
    stack.callback(live.close)
    try:
        grader.wait_ready()
        gateway.wait_ready()
        say(f"grader at {url}; evaluating the baseline")
        base = grader.admin.baseline(timeout=eval_timeout)
        say(f"baseline: {base['score']:.2f} (n={base['n']}, 95% CI {base['ci95'][0]:.2f}-{base['ci95'][1]:.2f})")
        deadline = time.time() + timeout
        grader.admin.set_deadline(deadline)
        live.update_live(run_id, deadline=deadline, agent_started=deadline - timeout)
        ctx_env = {
            "TASK": task,
            "BASE_MODEL": resolved.name,
            "WORKSPACE": str(root),
            "MODEL_PATH": str(ws.model(resolved.name)),
            "DATA_PATH": str(ws.data),
            "OUTPUT_DIR": str(ws.output),
            "GRADING_SERVER_URL": url,
            "AUTORL_TOKEN": config.agent_token,
            "AUTORL_DEADLINE": f"{deadline:.3f}",
            "AUTORL_SEED": str(seed),
            "AUTORL_PYTHON": sys.executable,
            **assignment.agent_env(),
        }
        ctx = AgentContext(
            task, resolved.name, root, ws.model(resolved.name), ws.data, ws.output, url, config.agent_token,
            deadline, root, ctx_env,
        )
        from autorl.gateway.upstreams import scrub

        # the agent reaches models only through the gateway: no upstream key, the run's token instead
        env = scrub(agent_environment(ctx_env, agent_obj.environment(ctx)), gateway.url, gateway.config.token)
        argv = agent_obj.command(ctx)
        if sandbox_choice.mode == "bwrap":
            argv = _sandboxed(argv, sandbox_choice, stack, root=root, env=env, home=home, runs_root=runs_root,
                              model=resolved.path, data=data, store_dir=store_dir, benchmark=benchmark, port=port,
                              gpus=assignment.agent_has_gpus, agent_paths=agent_obj.sandbox_paths(), tmp_dir=tmp_dir,
                              relay_ports=[int(gateway.url.rsplit(":", 1)[1])])
        say(f"agent {agent_cls.name} started ({_describe(sandbox_choice)}); log {ws.agent_log}")
        from autorl.watch import Watcher, interval_from_env

        sources = [("", root)] + ([("/tmp/", tmp_dir)] if sandbox_choice.mode == "bwrap" else [])
        watcher = Watcher(sources, watch_dir, interval_from_env()).start()
        try:
            outcome = run_agent(argv, cwd=root, env=env, log_path=ws.agent_log, deadline=deadline, grace_s=grace_s)
        finally:
            watcher.stop()
        say(f"agent {outcome.reason} after {outcome.duration_s:.0f} s; finishing evaluations in flight")
        gateway.close()  # the agent is done: no more model calls
        _wait_for_evaluations(grader.admin, eval_timeout)
        grader.admin.close_run()
        state = grader.admin.state()
        test = None
        if final_test and state["best"] is not None:
            say(f"scoring the best submission ({state['best']['submission_id']}) on the hidden test split")
            test = grader.admin.evaluate_test()
    except BaseException:
        live.end_run(run_id)  # nothing will be recorded for it
        raise
    finally:
        stack.close()
        gateway.stop()
        grader.stop()
    # 1. the result, from the grader's store only, recorded before any file the agent wrote is read
    result = _result(
        run_id=run_id, started=started, task=task, agent=agent_cls.name, model=resolved, root=root, seed=seed,
        state=state, test=test, outcome=asdict(outcome), backend=backend_name, limit=limit, config=config,
        sandbox=sandbox_choice.recorded_mode,
    )
    result.meta["agent_started"] = deadline - timeout
    result.meta["deadline"] = deadline
    result.meta["timeout_s"] = timeout
    _gateway_usage(result, gateway)
    result.meta["sandbox"] = {"mode": sandbox_choice.recorded_mode, "network": sandbox_choice.network,
                              "warning": sandbox_warning}
    result.meta.update(harness_hashes=harness, store_dir=str(store_dir), hidden_dir=str(data.hidden_dir),
                       benchmark_options=dict(benchmark_options or {}), refusals=state.get("refusals", []),
                       tmp_dir=str(tmp_dir) if sandbox_choice.mode == "bwrap" else None, watch_dir=str(watch_dir),
                       variants=[str(p) for p in _known_variants(resolved.spec, home)],
                       watch={"passes": watcher.passes, "entries": watcher.entries,
                              "copied_bytes": watcher.copied_bytes})
    if audit:
        from autorl.audit import pending_flag

        result.audit = [pending_flag().to_dict()]
    _record(result, root, home)
    # 2. then what the agent wrote: each step bounded, and none can lose the run
    post_errors: list[str] = []
    if audit:
        from autorl.audit import audit_run

        say("auditing the run")
        try:
            result.audit = [f.to_dict() for f in audit_run(result.to_dict(), benchmark=benchmark,
                                                            budget_s=audit_budget_s)]
        except Exception as exc:
            post_errors.append(f"audit: {type(exc).__name__}: {str(exc)[:200]}")
            from autorl.audit import failed_flag

            result.audit = [failed_flag(exc).to_dict()]
    if post_errors:
        result.meta["post_run_errors"] = post_errors
    _record(result, root, home)
    return result


def _known_variants(spec: str, home: Path) -> list[Path]:
    try:
        from autorl.resources import cached_instruct_variants

        return cached_instruct_variants(spec, home)
    except Exception:  # a cache that cannot be listed only means no variant at hand
        return []


def _record(result: RunResult, root: Path, home: Path) -> None:
    """result.json in the run directory, the ledger row and results.csv (each write whole or not at all)."""
    data = result.to_dict()
    write_json_atomic(root / "result.json", data)
    ledger = Ledger(home / "autorl.db")
    try:
        ledger.ingest(data)
        ledger.export_csv(home / "results.csv")
    finally:
        ledger.close()


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


#: the gateway's totals: its own counts from the upstreams' usage fields, not the agent's word
GATEWAY_USAGE_SOURCE = "gateway"


def _gateway_usage(result: RunResult, gateway: Any) -> None:
    """Token and cost columns from the gateway's totals (none when the agent made no model call)."""
    summary = gateway.summary
    result.meta["llm_gateway"] = {"record_dir": gateway.config.record_dir,
                                  **(summary or {"error": gateway.error or "no totals"})}
    if not summary or not (summary.get("calls") or summary.get("refused")):
        return
    result.meta["llm_usage"] = {k: summary[k] for k in ("prompt_tokens", "completion_tokens", "cached_tokens",
                                                        "cost_usd", "calls", "failed", "refused")}
    result.row.update(llm_tokens=int(summary["tokens"]), llm_cost_usd=float(summary["cost_usd"]),
                      llm_usage_source=GATEWAY_USAGE_SOURCE)


def _result(
    *, run_id: str, started: float, task: str, agent: str, model: Any, root: Path, seed: int,
    state: dict[str, Any], test: dict[str, Any] | None, outcome: dict[str, Any], backend: str,
    limit: int | None, config: GraderConfig, sandbox: str,
) -> RunResult:
    from autorl import __version__

    subs = state["submissions"]
    best = state["best"]
    best_sub = next((s for s in subs if best and s["submission_id"] == best["submission_id"]), None)
    dev_baseline = state["baseline_score"]
    scored = [s for s in subs if s["status"] == "done" and s.get("score") is not None]
    crashed = not outcome["timed_out"] and outcome["exit_code"] != 0
    # the headline: the dev-selected checkpoint scored once on the test split, paired against the test
    # baseline; a run without that score has no headline (never its dev figure in its place)
    tested = test is not None and test.get("status") == "done" and test.get("score") is not None
    head = test if tested and test is not None else {}
    if crashed:
        end_reason = f"agent {outcome['reason']}"
    elif not scored:
        end_reason = "no scored submission"
    elif not tested:
        end_reason = "no test score" + (f" ({test['error']})" if test and test.get("error") else "")
    else:
        end_reason = "timeout" if outcome["timed_out"] else "agent finished"
    row = {
        "run_id": run_id,
        "timestamp": dt.datetime.fromtimestamp(started, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "task": task,
        "agent": agent,
        "base_model": model.spec,
        "baseline": head.get("baseline_score"),
        "best_score": head.get("score"),
        "improvement": head.get("improvement"),
        "improvement_ci95": head.get("improvement_ci95"),
        "p_value": head.get("p_value"),
        "best_submission": best["submission_id"] if best else None,
        "submissions": len(subs),
        "duration_s": round(time.time() - started, 1),
        "success": bool(scored) and not crashed and tested and head.get("improvement") is not None,
        "workspace": str(root),
        "test_baseline": head.get("baseline_score"),
        "test_score": head.get("score"),
        "test_improvement": head.get("improvement"),
        "test_improvement_ci95": head.get("improvement_ci95"),
        "dev_baseline": dev_baseline,
        "dev_best": best["score"] if best else None,
        "dev_improvement": (best["score"] - dev_baseline) if best and dev_baseline is not None else None,
        "dev_improvement_ci95": best_sub["improvement_ci95"] if best_sub else None,
        "dev_k": len(scored),
        "end_reason": end_reason,
        "seed": seed,
        "config_hash": (state.get("baseline") or {}).get("config_hash"),
        "sandbox": sandbox,
        "llm_tokens": None,
        "llm_cost_usd": None,
        "llm_usage_source": None,
    }
    meta = {
        "autorl_version": __version__,
        "backend": backend,
        "model_path": str(model.path),
        "model_source": model.source,
        "model_revision": model.revision,
        "limit": limit,
        "eval_config": (state.get("baseline") or {}).get("config"),
        "python": sys.version.split()[0],
    }
    return RunResult(run_id, row, subs, state.get("baseline"), test, outcome, root, meta)

