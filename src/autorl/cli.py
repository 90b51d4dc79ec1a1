"""The ``autorl`` command line: a thin layer over the library. Heavy imports stay inside commands.

About 500 lines: one short function per command (flags, one library call, printing), a dozen commands in one
file so that ``autorl --help`` and this file list the same things; no command computes what the library does.
(``autorl sweep``'s group is :mod:`autorl.sweep.cli`.)"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import typer

from autorl.errors import AutorlError, UsageError

app = typer.Typer(
    name="autorl",
    help="Measure whether a large model, as an ML engineer, can post-train a small model past its baseline.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
list_app = typer.Typer(help="List what is installed.", no_args_is_help=True)
grader_app = typer.Typer(help="The grading service.", no_args_is_help=True)
app.add_typer(list_app, name="list")
app.add_typer(grader_app, name="grader")


def _version(value: bool) -> None:
    if value:
        from autorl import __version__

        typer.echo(f"autorl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """autorl: runs, evaluations, results."""


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


@app.command()
def plugins() -> None:
    """Show installed plugins and what each registers (JSON)."""
    from autorl.registry import plugin_summary

    _print_json(plugin_summary())


def _table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*r)
    Console().print(table)


@list_app.command("benchmarks")
def list_benchmarks(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Benchmarks (tasks) that `autorl run --task` accepts."""
    from autorl.registry import benchmark_summary

    rows = benchmark_summary()
    if as_json:
        _print_json(rows)
        return
    _table("benchmarks", ["name", "version", "distribution", "splits"],
           [[r["name"], str(r["version"]), r["distribution"], ",".join(r["splits"])] for r in rows])


@list_app.command("agents")
def list_agents(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Agents that `autorl run --agent` accepts (a folder with config.yaml works too)."""
    from autorl.registry import agent_summary

    rows = agent_summary()
    if as_json:
        _print_json(rows)
        return
    _table("agents", ["name", "distribution", "ready", "description"],
           [[r["name"], r["distribution"], "yes" if r["ready"] else f"no: {r['status']}", r["description"]] for r in rows])


@list_app.command("backends")
def list_backends(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Inference backends that `--backend` accepts, and whether each can run here."""
    from autorl.registry import backend_summary

    rows = backend_summary()
    if as_json:
        _print_json(rows)
        return
    _table("backends", ["name", "distribution", "available"],
           [[r["name"], r["distribution"], "yes" if r["available"] else "no"] for r in rows])


def _parse_options(pairs: list[str]) -> dict[str, Any]:
    """``--benchmark-option KEY=VALUE``: JSON values (numbers, true/false, lists) or plain strings."""
    options: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--benchmark-option takes KEY=VALUE, got {pair!r}")
        try:
            options[name] = json.loads(value)
        except ValueError:
            options[name] = value
    return options


def _parse_env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--agent-env takes NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x, digits) for x in v) + "]"
    return str(v)


@app.command("run")
def run_cmd(
    agent: str = typer.Option(..., "--agent", help="Agent name, or a folder with config.yaml + start.sh."),
    task: str = typer.Option(..., "--task", help="Benchmark name."),
    model: str = typer.Option(..., "--model", help="Local dir, hub id (org/name[@rev]) or autorl:tiny."),
    timeout: float = typer.Option(..., "--timeout", help="The agent's time budget in seconds."),
    port: int | None = typer.Option(None, "--port", help="Grader port (default: a free one)."),
    backend: str | None = typer.Option(None, "--backend", help="Inference backend (default: vllm if usable, else hf)."),
    gpus: str | None = typer.Option(None, "--gpus", help="e.g. agent=0-2,grader=3"),
    runs_dir: Path | None = typer.Option(None, "--runs-dir", help="Where workspaces go (default AUTORL_HOME/runs)."),
    seed: int = typer.Option(0, "--seed", help="Recorded; passed to the agent as AUTORL_SEED."),
    agent_env: list[str] = typer.Option([], "--agent-env", help="NAME=VALUE for the agent (repeatable)."),
    limit: int | None = typer.Option(None, "--limit", help="Evaluate only the first N items per split."),
    benchmark_option: list[str] = typer.Option([], "--benchmark-option",
                                               help="KEY=VALUE for the benchmark (repeatable; JSON values)."),
    sandbox: str = typer.Option("auto", "--sandbox",
                                help="auto (bwrap where it works, else none with a warning), bwrap or none."),
    network: str = typer.Option("on", "--network", help="on, or off: the agent reaches only the grader (bwrap)."),
    no_audit: bool = typer.Option(False, "--no-audit", help="Skip the cheat audit at the end (autorl audit runs it)."),
    audit_budget: float = typer.Option(900.0, "--audit-budget", help="The audit's time budget in seconds."),
    llm_budget_usd: float | None = typer.Option(None, "--llm-budget-usd",
                                                help="The LLM gateway refuses the agent's model calls past this cost."),
    llm_budget_tokens: int | None = typer.Option(None, "--llm-budget-tokens",
                                                 help="The same, in prompt + completion tokens."),
    llm_prices: Path | None = typer.Option(None, "--llm-prices",
                                           help="YAML/JSON price table (model: {input, output, cached_input} USD/M)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Run an agent on a task and record baseline, scores and improvement."""
    from autorl.runner import run

    result = run(agent, task, model, timeout, port=port, backend=backend, gpus=gpus, runs_dir=runs_dir,
                 seed=seed, agent_env=_parse_env(agent_env), limit=limit, sandbox=sandbox, network=network,
                 benchmark_options=_parse_options(benchmark_option), audit=not no_audit, audit_budget_s=audit_budget,
                 llm_budget_usd=llm_budget_usd, llm_budget_tokens=llm_budget_tokens, llm_prices=llm_prices)
    if as_json:
        _print_json(result.row)
        return
    r = result.row
    _table(f"run {r['run_id']}", ["", "test (the result)", f"dev (best of {r['dev_k']}, optimistic)"], [
        ["baseline", _fmt(r["baseline"]), _fmt(r["dev_baseline"])],
        ["score", _fmt(r["best_score"]), _fmt(r["dev_best"])],
        ["improvement", _fmt(r["improvement"]), _fmt(r["dev_improvement"])],
        ["improvement 95% CI", _fmt(r["improvement_ci95"]), _fmt(r["dev_improvement_ci95"])],
        ["p-value", _fmt_p(r["p_value"]), "-"],
    ])
    typer.echo(f"submissions: {r['submissions']}  success: {r['success']}  ({r['end_reason']})  "
               f"duration: {r['duration_s']:.0f} s  sandbox: {r['sandbox']}\nworkspace: {r['workspace']}")
    if r["best_score"] is None:
        typer.echo("no test score: this run has no result (the dev figures are the agent's feedback, not a result)")
    for flag in result.audit:
        typer.echo(f"audit flag: {flag['name']} ({flag['severity']}): {flag['detail']}")


@app.command("eval")
def eval_cmd(
    task: str = typer.Option(..., "--task", help="Benchmark name."),
    model: str = typer.Option(..., "--model", help="Checkpoint: local dir, hub id or autorl:tiny."),
    split: str = typer.Option("dev", "--split", help="dev or test."),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N items."),
    backend: str | None = typer.Option(None, "--backend", help="Inference backend."),
    base_model: str | None = typer.Option(None, "--base-model", help="Base model, when --model is a LoRA adapter."),
    per_item: Path | None = typer.Option(None, "--per-item", help="Where to write per-item records (JSONL)."),
    benchmark_option: list[str] = typer.Option([], "--benchmark-option",
                                               help="KEY=VALUE for the benchmark (repeatable; JSON values)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON record."),
) -> None:
    """Evaluate a checkpoint through the same path the grader uses."""
    from autorl.checkpoint_eval import evaluate
    from autorl.resources import autorl_home

    if limit is not None and limit <= 0:
        raise UsageError("--limit must be positive")
    options = _parse_options(benchmark_option)
    bar: Any = None  # the progress bar, started once the first items are scored
    job: Any = None

    def progress_cb(done: int, total: int) -> None:
        nonlocal bar, job
        if bar is None:
            from rich.progress import Progress

            bar = Progress(transient=True)
            bar.start()
            job = bar.add_task(f"{task}/{split}", total=None)
        bar.update(job, completed=done, total=total)

    try:
        record = evaluate(task, model, split=split, limit=limit, backend=backend, base_model=base_model,
                          benchmark_options=options, per_item_path=per_item, per_item_dir=autorl_home() / "evals",
                          progress=progress_cb if sys.stderr.isatty() and not as_json else None)
    finally:
        if bar is not None:
            bar.stop()
    if as_json:
        _print_json(record.to_dict(items=False))
        return
    typer.echo(f"{task}/{split}: {record.score:.2f} (n={record.n}, stderr {record.stderr:.2f}, "
               f"95% CI {record.ci95[0]:.2f}-{record.ci95[1]:.2f}); config {record.config_hash}; "
               f"per-item records {record.per_item_path}")


@app.command()
def results(
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    fmt: str = typer.Option("table", "--format", help="table, csv, json or markdown."),
    task: str | None = typer.Option(None, "--task", help="Only this task."),
    ingest: list[Path] = typer.Option([], "--ingest", help="Add result.json files from other machines (repeatable)."),
) -> None:
    """List recorded runs."""
    from autorl.ledger import Ledger
    from autorl.resources import autorl_home
    from autorl.results import ingest_files, write_csv

    fmt = "json" if as_json else fmt
    if fmt not in ("table", "csv", "json", "markdown"):
        raise UsageError(f"--format must be table, csv, json or markdown, not {fmt!r}")
    home = autorl_home()
    ledger = Ledger(home / "autorl.db")
    try:
        ingest_files(ingest, home, ledger=ledger)
        rows = ledger.rows(task=task)
        from autorl.recover import in_flight

        flying = [r for r in in_flight(ledger) if task is None or r["task"] == task]
    finally:
        ledger.close()
    if fmt in ("table", "markdown"):  # runs not recorded yet: live, or lost with the command that records them
        for r in flying:
            typer.echo(f"{r['status']}: run {r['run_id']} ({r['task']}, {r['agent']}; {r['detail']})"
                       + (f"; record it with: {r['recover']}" if r.get("recover") else ""), err=True)
    if fmt == "json":
        _print_json(rows)
    elif fmt == "csv":
        write_csv(rows, sys.stdout, lineterminator="\n")
    elif fmt == "markdown":
        typer.echo("| " + " | ".join(RESULT_COLUMNS) + " |")
        typer.echo("|" + "|".join(" --- " for _ in RESULT_COLUMNS) + "|")
        for r in rows:
            typer.echo("| " + " | ".join(c.replace("|", "\\|") for c in _result_cells(r)) + " |")
    else:
        _table("runs (score, improvement, CI: held-out test; dev: best of k on dev, optimistic)",
               list(RESULT_COLUMNS), [_result_cells(r) for r in rows])


#: the columns of `autorl results` (table and markdown): the headline is the test split
RESULT_COLUMNS = ("run_id", "task", "agent", "base_model", "baseline", "score", "improvement", "95% CI", "p",
                  "dev best (k)", "dev improvement", "submissions", "success", "sandbox", "audit")


def _fmt_p(p: Any) -> str:
    if isinstance(p, int | float) and 0 <= p < 0.001:
        return "<0.001"
    return _fmt(p, 3)


def _result_cells(r: dict[str, Any]) -> list[str]:
    dev_best = "-" if r.get("dev_best") is None else f"{_fmt(r['dev_best'])} ({r.get('dev_k')})"
    return [str(r["run_id"]), str(r["task"]), str(r["agent"]), str(r["base_model"]), _fmt(r.get("baseline")),
            _fmt(r.get("best_score")), _fmt(r.get("improvement")), _fmt(r.get("improvement_ci95")),
            _fmt_p(r.get("p_value")), dev_best, _fmt(r.get("dev_improvement")), str(r.get("submissions")),
            str(r.get("success")), str(r.get("sandbox") or "-"), ", ".join(r.get("audit_flags") or []) or "clean"]


@app.command("ui")
def ui(
    port: int = typer.Option(8501, "--port", help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0 to share it)."),
) -> None:
    """The results dashboard: runs, run timelines, agent comparisons (works offline)."""
    import uvicorn

    from autorl.resources import autorl_home
    from autorl.ui import create_app

    if not 0 < port < 65536:
        raise UsageError(f"--port must be between 1 and 65535, not {port}")
    db = autorl_home() / "autorl.db"
    typer.echo(f"autorl ui: http://{host}:{port}/ over {db}", err=True)
    try:
        # requests must name this address (or a loopback name) in Host: DNS rebinding gets a 421
        uvicorn.run(create_app(db, hosts=[host]), host=host, port=port, log_level="warning")
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@app.command()
def audit(
    run_id: str = typer.Argument(..., help="The run to audit."),
    flag: str | None = typer.Argument(None, help="With --override: the flag decided on."),
    override: bool = typer.Option(False, "--override", help="Record a human decision on a flag instead."),
    reason: str = typer.Option("", "--reason", help="Why (required with --override)."),
    variants: list[Path] = typer.Option([], "--variant", help="A local post-trained variant of the base model (repeatable)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Check a run for contamination and rule-breaking (or record --override RUN_ID FLAG --reason ...)."""
    import getpass

    from autorl.audit import reaudit
    from autorl.ledger import Ledger
    from autorl.registry import get_benchmark
    from autorl.resources import autorl_home

    home = autorl_home()
    ledger = Ledger(home / "autorl.db")
    try:
        result = ledger.run(run_id)
        if result is None:
            raise UsageError(f"no run {run_id!r} in {home / 'autorl.db'} (see `autorl results`)")
        if override:
            if not flag:
                raise UsageError("--override needs the flag: autorl audit --override RUN_ID FLAG --reason ...")
            ledger.override(run_id, flag, reason, getpass.getuser())
        else:
            bench = get_benchmark(result["row"]["task"])(result.get("meta", {}).get("benchmark_options") or {})
            reaudit(result, benchmark=bench, home=home, ledger=ledger, variants=variants)
        flags = ledger.audit(run_id)
    finally:
        ledger.close()
    if as_json:
        _print_json(flags)
        return
    if not flags:
        typer.echo(f"run {run_id}: no audit flags")
        return
    _table(f"audit of run {run_id}", ["flag", "severity", "detail", "evidence", "decision"],
           [[f["name"], f["severity"], f["detail"], "\n".join(f["evidence"][:5]) + (" ..." if len(f["evidence"]) > 5 else ""),
             "; ".join(o["reason"] for o in f["overrides"])] for f in flags])


@app.command()
def submit(
    path: str = typer.Argument(..., help="Checkpoint directory inside $OUTPUT_DIR."),
    url: str | None = typer.Option(None, "--url", help="Grader URL (default $GRADING_SERVER_URL)."),
    token: str | None = typer.Option(None, "--token", help="Token (default $AUTORL_TOKEN)."),
    wait: bool = typer.Option(True, "--wait/--no-wait", help="Wait for the score."),
) -> None:
    """Submit a checkpoint to the grader and print its record (JSON)."""
    from autorl.grader.client import GraderClient

    p = Path(path).expanduser()
    with GraderClient(url, token) as client:
        _print_json(client.submit(str(p.resolve()) if p.exists() else path, wait=wait))


@grader_app.command("serve")
def grader_serve(
    task: str = typer.Option(..., "--task", help="Benchmark name."),
    workspace: Path = typer.Option(..., "--workspace", help="The workspace whose output/ holds submissions."),
    port: int | None = typer.Option(None, "--port", help="Port on 127.0.0.1 (default: a free one)."),
    base_model: str | None = typer.Option(None, "--base-model", help="Base model, for the baseline and LoRA."),
    backend: str | None = typer.Option(None, "--backend", help="Inference backend."),
    store_dir: Path | None = typer.Option(None, "--store-dir", help="Grader storage (default under AUTORL_HOME)."),
) -> None:
    """Run a grader standalone; prints its URL and tokens."""
    import hashlib

    from autorl.grader.config import GraderConfig
    from autorl.grader.server import free_port, serve
    from autorl.registry import default_backend, get_benchmark
    from autorl.resources import autorl_home, prepare_data, resolve_model

    benchmark = get_benchmark(task)()
    ws = workspace.expanduser().resolve()
    if not ws.is_dir():
        raise UsageError(f"workspace {workspace} is not a directory")
    (ws / "output").mkdir(exist_ok=True)
    data = prepare_data(benchmark)
    base = resolve_model(base_model) if base_model else None
    home = autorl_home()
    store = store_dir or home / "grader" / f"standalone-{hashlib.sha256(str(ws).encode()).hexdigest()[:12]}"
    config = GraderConfig.for_run(task=task, workspace=ws, output_dir=ws / "output", store_dir=store, data=data,
                                  base=base, backend=backend or default_backend(), home=home)
    port = port or free_port()
    typer.echo(f"GRADING_SERVER_URL=http://127.0.0.1:{port}\nAUTORL_TOKEN={config.agent_token}\n"
               f"AUTORL_ADMIN_TOKEN={config.admin_token}\nstore: {store}", err=False)
    sys.stdout.flush()
    serve(config, port)


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Report what is installed and ready, and what to do for each missing piece."""
    from autorl.doctor import checks

    rows = checks()
    if as_json:
        _print_json([c.to_dict() for c in rows])
        return
    _table("autorl doctor", ["", "check", "status", "to do"],
           [["ok" if c.ok else "--", c.name, c.detail, c.fix] for c in rows])


@app.command()
def recover(
    run_id: str | None = typer.Argument(None, help="The lost run's id (see `autorl doctor`)."),
    every: bool = typer.Option(False, "--all", help="Every run whose orchestrator is gone."),
    eval_timeout: float = typer.Option(3600.0, "--eval-timeout", help="Seconds to wait for evaluations in flight."),
    no_test: bool = typer.Option(False, "--no-test", help="Do not score the best submission on the test split."),
    no_audit: bool = typer.Option(False, "--no-audit", help="Do not run the audit."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Record runs whose orchestrator died (killed, preempted, node lost) from their grader's store."""
    from autorl.recover import recover as recover_run
    from autorl.recover import recover_all
    from autorl.resources import autorl_home

    if (run_id is None) == (not every):
        raise UsageError("give a run id or --all (not both)")
    options: dict[str, Any] = {"eval_timeout": eval_timeout, "final_test": not no_test, "audit": not no_audit}
    home = autorl_home()
    done = recover_all(home=home, **options) if every else [recover_run(str(run_id), home=home, **options)]
    if as_json:
        _print_json([d.to_dict() for d in done])
        return
    if not done:
        typer.echo("no lost run to recover")
    for d in done:
        typer.echo(f"run {d.run_id}: {d.action}: {d.row.get('submissions')} submissions, test score "
                   f"{_fmt(d.row.get('test_score'))}; {d.row.get('end_reason')}")


@app.command("new")
def new(
    kind: str = typer.Argument(..., help="benchmark or agent"),
    name: str = typer.Argument(..., help="Plugin name, e.g. my-bench (package autorl-my-bench)."),
    directory: Path = typer.Option(Path("."), "--dir", help="Where to create the package folder."),
) -> None:
    """Scaffold a plugin package (`autorl new benchmark NAME`, `autorl new agent NAME`) that installs,
    is discovered and passes its own tests unchanged."""
    from autorl.scaffold import next_steps, scaffold

    root = scaffold(kind, name, directory)
    typer.echo(f"created {root}\nnext: {next_steps(root)}")


from autorl.sweep.cli import sweep_app  # noqa: E402 - typer only; each command imports what it needs

app.add_typer(sweep_app, name="sweep")


def _warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None) -> str:
    return f"warning: {message}\n"


def main(argv: list[str] | None = None) -> None:
    """Entry point: plugin commands, then the app; user mistakes become one line and exit code 2."""
    warnings.formatwarning = _warning_line  # type: ignore[assignment]
    try:
        from autorl.plugins import get_plugin_manager

        get_plugin_manager().hook.register_commands(cli=app)
        app(args=argv, standalone_mode=False)
    except AutorlError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        # usage errors of the (vendored or standalone) click underneath typer
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            sys.exit(code)
        raise
    sys.exit(0)
