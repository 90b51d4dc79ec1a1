"""``autorl run``, ``results``, ``recover``, ``audit`` and ``ui``: a run, and what is recorded of runs."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

import autorl.cli.options as opt
from autorl.cli.output import echo, fmt, fmt_p, markdown, print_json, table
from autorl.errors import UsageError
from autorl.record.display import fmt_ci, fmt_signed, short_ids, short_path
from autorl.record.schema import FlagRecord, LedgerRow, RowRecord


def run_cmd(
    agent: str = typer.Option(..., "--agent", help="Agent name, or a folder with config.yaml + start.sh."),
    task: str = opt.TASK,
    model: str = typer.Option(..., "--model", help="Local dir, hub id (org/name[@rev]) or autorl:tiny."),
    timeout: float = typer.Option(..., "--timeout", help="The agent's time budget in seconds."),
    port: int | None = typer.Option(None, "--port", help="Grader port (default: a free one)."),
    backend: str | None = opt.BACKEND,
    gpus: str | None = typer.Option(None, "--gpus", help="e.g. agent=0-2,grader=3"),
    runs_dir: Path | None = typer.Option(None, "--runs-dir", help="Where workspaces go (default AUTORL_HOME/runs)."),
    seed: int = typer.Option(0, "--seed", help="Recorded; passed to the agent as AUTORL_SEED."),
    agent_env: list[str] = typer.Option([], "--agent-env", help="NAME=VALUE for the agent (repeatable)."),
    agent_credential: list[str] = typer.Option(
        [], "--agent-credential", help="Pass this variable of your environment to the agent (repeatable; never a "
                                       "model API key: the LLM gateway holds those)."),
    limit: int | None = typer.Option(None, "--limit", help="Evaluate only the first N items per split."),
    benchmark_option: list[str] = opt.BENCHMARK_OPTIONS,
    sandbox: str = typer.Option("auto", "--sandbox",
                                help="auto (bwrap where it works, else none with a warning), bwrap or none."),
    network: str = typer.Option("on", "--network", help="on, or off: the agent reaches only the grader (bwrap)."),
    no_audit: bool = typer.Option(False, "--no-audit", help="Skip the cheat audit at the end (autorl audit runs it)."),
    off_target: list[str] = typer.Option([], "--off-target",
                                         help="After the run, score the selected checkpoint and the base on this "
                                              "benchmark too (repeatable): the change elsewhere, flagged when it "
                                              "is significantly negative."),
    no_test_all: bool = typer.Option(False, "--no-test-all",
                                     help="Skip scoring every distinct submission on test (the optimistic "
                                          "best-of-k peer figure; the headline is unchanged)."),
    audit_budget: float = typer.Option(900.0, "--audit-budget", help="The audit's time budget in seconds."),
    no_decoys: bool = typer.Option(False, "--no-decoys",
                                   help="Plant no decoys (leaked-looking answers and tokens whose use is recorded)."),
    llm_budget_usd: float | None = typer.Option(None, "--llm-budget-usd",
                                                help="The LLM gateway refuses the agent's model calls past this cost."),
    llm_budget_tokens: int | None = typer.Option(None, "--llm-budget-tokens",
                                                 help="The same, in prompt + completion tokens."),
    llm_prices: Path | None = typer.Option(None, "--llm-prices",
                                           help="YAML/JSON price table (model: {input, output, cached_input} USD/M)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    audit_judge: str | None = typer.Option(None, "--audit-judge", help="Also ask this judge model after the audit."),
    audit_judge_samples: int = typer.Option(1, "--audit-judge-samples", help="Judge samples (a majority decides)."),
    keep: str = typer.Option("best", "--keep",
                             help="Checkpoints kept once scored, by the grader and in the agent's output: best "
                                  "(dev-best and test-best), selected (the dev-best, the grader's copy), all."),
    output_quota: float | None = typer.Option(None, "--output-quota",
                                              help="GiB the agent's workspace and /tmp may hold when it submits "
                                                   "(default 8x the base model's weights, at least 4; 0: none)."),
) -> None:
    """Run an agent on a task and record baseline, scores and improvement."""
    from autorl.runs.runner import run

    result = run(agent, task, model, timeout, port=port, backend=backend, gpus=gpus, runs_dir=runs_dir, seed=seed,
                 agent_env=opt.parse_pairs(agent_env, "--agent-env", json_values=False, key="NAME"),
                 agent_credentials=agent_credential, limit=limit,
                 sandbox=sandbox, network=network,
                 benchmark_options=opt.parse_pairs(benchmark_option, "--benchmark-option"), audit=not no_audit,
                 audit_budget_s=audit_budget, llm_budget_usd=llm_budget_usd, llm_budget_tokens=llm_budget_tokens,
                 llm_prices=llm_prices, audit_judge=audit_judge, audit_judge_samples=audit_judge_samples,
                 decoys=not no_decoys, test_all=not no_test_all, off_target=off_target, keep=keep,
                 output_quota_gb=output_quota)
    if as_json:
        print_json(result.row)
    else:
        _print_run(result.row, result.audit, result.meta)
    if result.meta.get("interrupted"):  # recorded; the shell still learns the run was interrupted
        from autorl.runs.interrupt import exit_code

        sys.exit(exit_code(str(result.meta["interrupted"])))


def _print_run(r: RowRecord, audit: Sequence[FlagRecord], meta: dict[str, Any]) -> None:
    table(f"run {r['run_id']}", ["", "test (the result)", f"dev (best of {r['dev_k']}, optimistic)"], [
        ["baseline", fmt(r["baseline"]), fmt(r["dev_baseline"])],
        ["score", fmt(r["best_score"]), fmt(r["dev_best"])],
        ["improvement", fmt(r["improvement"]), fmt(r["dev_improvement"])],
        ["improvement 95% CI", fmt(r["improvement_ci95"]), fmt(r["dev_improvement_ci95"])],
        ["p-value", fmt_p(r["p_value"]), "-"],
    ])
    yes = {True: "yes", False: "no"}
    prepared = meta.get("prepare_s")
    echo(f"submissions: {r['submissions']}; finished with a test score: {yes[bool(r['success'])]}; "
         f"beat baseline: {yes[bool(r.get('beat_baseline'))]} ({r['end_reason']})")
    echo(f"duration: {r['duration_s']:.0f} s"
         + (f" (preparing the model and data took {prepared:.0f} s before it)" if prepared else "")
         + f"; sandbox: {r['sandbox']}")
    echo(f"workspace: {r['workspace']}", whole_words=True)
    if r["best_score"] is None:
        echo("no test score: this run has no result (the dev figures are the agent's feedback, not a result)")
    for entry in r.get("off_target") or []:
        if entry.get("error"):
            echo(f"off-target {entry.get('task')}: not scored ({entry['error']})")
        else:
            echo(f"off-target {entry.get('task')} ({entry.get('split', 'test')}): base {fmt(entry.get('base'))}, "
                 f"selected {fmt(entry.get('selected'))}, change {fmt_signed(entry.get('change'))} "
                 f"{fmt_ci(entry.get('ci95'))}" + (": regressed" if entry.get("regressed") else ""))
    for flag in audit:
        echo(f"audit flag: {flag['name']} ({flag['severity']}): {flag['detail']}")


#: the columns of `autorl results` (table and markdown): the headline is the test split
RESULT_COLUMNS = ("run_id", "task", "agent", "base_model", "baseline", "score", "improvement", "95% CI", "p",
                  "dev best (k)", "dev improvement", "submissions", "test-scored", "beat baseline", "sandbox", "audit")


#: the compact default of `autorl results`: what a researcher scans for, readable at 80 columns
COMPACT_COLUMNS = ("run id", "task", "agent", "model", "test change [95% CI]", "p", "k", "status")


def _status(r: LedgerRow) -> str:
    # beat baseline, no clear change, below baseline or no test score: never "ok" for a run at -18 points
    from autorl.record.display import outcome

    return outcome(r) + (" (flagged)" if r.get("audit_flags") else "")


def _compact_cells(r: LedgerRow, ids: dict[str, str]) -> list[str]:
    ci = fmt_ci(r.get("improvement_ci95"))
    improvement = "-" if r.get("improvement") is None else f"{fmt_signed(r.get('improvement'))} {ci}"
    return [ids.get(str(r["run_id"]), str(r["run_id"])), str(r["task"]), str(r["agent"]),
            short_path(str(r["base_model"])), improvement, fmt_p(r.get("p_value")), str(r.get("dev_k") or 0),
            _status(r)]


def _result_cells(r: LedgerRow, ids: dict[str, str] | None = None) -> list[str]:
    # markdown (a file, ``ids`` None) keeps every id and path whole; a screen gets them short
    dev_best = "-" if r.get("dev_best") is None else f"{fmt(r['dev_best'])} ({r.get('dev_k')})"
    model = str(r["base_model"]) if ids is None else short_path(str(r["base_model"]))
    return [(ids or {}).get(str(r["run_id"]), str(r["run_id"])), str(r["task"]), str(r["agent"]),
            model, fmt(r.get("baseline")), fmt(r.get("best_score")), fmt(r.get("improvement")),
            fmt(r.get("improvement_ci95")), fmt_p(r.get("p_value")), dev_best, fmt(r.get("dev_improvement")),
            str(r.get("submissions")), "yes" if r.get("success") else "no",
            "yes" if r.get("beat_baseline") else "no", str(r.get("sandbox") or "-"),
            ", ".join(r.get("audit_flags") or []) or "clean"]


def results(
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    fmt_name: str = typer.Option("table", "--format", help="table, csv, json or markdown."),
    task: str | None = typer.Option(None, "--task", help="Only this task."),
    ingest: list[Path] = typer.Option([], "--ingest", help="Add result.json files from other machines (repeatable)."),
    wide: bool = typer.Option(False, "--wide", help="Every column, not only the compact 80-column table."),
) -> None:
    """List recorded runs."""
    from autorl.record.ledger import Ledger, ingest_files, write_csv
    from autorl.resources import autorl_home
    from autorl.runs.liveness import in_flight

    form = "json" if as_json else fmt_name
    if form not in ("table", "csv", "json", "markdown"):
        raise UsageError(f"--format must be table, csv, json or markdown, not {form!r}")
    home = autorl_home()
    ledger = Ledger(home / "autorl.db")
    try:
        ingest_files(ingest, home, ledger=ledger)
        rows = ledger.rows(task=task)
        flying = [r for r in in_flight(ledger) if task is None or r["task"] == task]
        ids = short_ids(ledger.ids())  # unique among every run the ledger knows: `audit ID` finds each
    finally:
        ledger.close()
    if form in ("table", "markdown"):  # runs not recorded yet: live, or lost with the command that records them
        for r in flying:
            echo(f"{r['status']}: run {ids.get(r['run_id'], r['run_id'])} ({r['task']}, {r['agent']}; {r['detail']})"
                 + (f"; record it with: {r['recover']}" if r.get("recover") else ""), err=True)
    if not rows and form in ("table", "markdown"):
        echo("no runs yet" + (f" for task {task!r}" if task else "") + f" in {home / 'autorl.db'}", whole_words=True)
        return
    if form == "json":
        print_json(rows)
    elif form == "csv":
        write_csv(rows, sys.stdout, lineterminator="\n")
    elif form == "markdown":
        markdown(RESULT_COLUMNS, [_result_cells(r) for r in rows])
    else:
        shortened = any(ids.get(str(r["run_id"]), "") != r["run_id"] for r in rows)
        note = "run ids shortened: commands taking a run id accept them" if shortened else ""
        if wide:
            table("runs (score, improvement, CI: held-out test; dev: best of k on dev, optimistic)",
                  RESULT_COLUMNS, [_result_cells(r, ids) for r in rows], caption=note or None, records=1)
        else:
            table("runs (held-out test; k: dev submissions scored)", COMPACT_COLUMNS,
                  [_compact_cells(r, ids) for r in rows], keep=("run id", "p", "k"), records=1,
                  caption="; ".join(c for c in ("--wide: every column", note) if c))


def recover(
    run_id: str | None = typer.Argument(None, help="The lost run's id (see `autorl doctor`)."),
    every: bool = typer.Option(False, "--all", help="Every run whose orchestrator is gone."),
    eval_timeout: float = typer.Option(3600.0, "--eval-timeout", help="Seconds to wait for evaluations in flight."),
    no_test: bool = typer.Option(False, "--no-test", help="Do not score the best submission on the test split."),
    no_audit: bool = typer.Option(False, "--no-audit", help="Do not run the audit."),
    as_json: bool = opt.JSON_OUTPUT,
) -> None:
    """Record runs whose orchestrator died (killed, preempted, node lost) from their grader's store."""
    from autorl.resources import autorl_home
    from autorl.runs.recover import recover as recover_run
    from autorl.runs.recover import recover_all

    if (run_id is None) == (not every):
        raise UsageError("give a run id or --all (not both)")
    options: dict[str, Any] = {"eval_timeout": eval_timeout, "final_test": not no_test, "audit": not no_audit}
    home = autorl_home()
    done = recover_all(home=home, **options) if every else [recover_run(str(run_id), home=home, **options)]
    if as_json:
        print_json([d.to_dict() for d in done])
        return
    if not done:
        typer.echo("no lost run to recover")
    for d in done:
        typer.echo(f"run {d.run_id}: {d.action}: {d.row.get('submissions')} submissions, test score "
                   f"{fmt(d.row.get('test_score'))}; {d.row.get('end_reason')}")


def audit(
    run_id: str = typer.Argument(..., help="The run to audit."),
    flag: str | None = typer.Argument(None, help="With --override: the flag decided on."),
    override: bool = typer.Option(False, "--override", help="Record a human decision on a flag instead."),
    reason: str = typer.Option("", "--reason", help="Why (required with --override)."),
    variants: list[Path] = typer.Option([], "--variant", help="A local post-trained variant of the base model (repeatable)."),
    as_json: bool = opt.JSON_OUTPUT,
    judge: str | None = typer.Option(None, "--judge", help="Also ask this judge model (through a gateway of its own)."),
    judge_samples: int = typer.Option(1, "--judge-samples", help="Judge samples; a flag needs a majority."),
    judge_budget_usd: float | None = typer.Option(None, "--judge-budget-usd", help="The judge's own LLM budget."),
    judge_budget_tokens: int | None = typer.Option(None, "--judge-budget-tokens", help="The judge's own token budget."),
    judge_budget_s: float = typer.Option(900.0, "--judge-budget-s", help="The judge's time budget in seconds."),
) -> None:
    """Check a run for contamination and rule-breaking (or record --override RUN_ID FLAG --reason ...)."""
    import getpass

    from autorl.audit import reaudit
    from autorl.plugins.registry import get_benchmark, resolve_task
    from autorl.record.ledger import Ledger
    from autorl.resources import autorl_home

    home = autorl_home()
    ledger = Ledger(home / "autorl.db")
    try:
        run_id = ledger.find(run_id) or run_id  # a short id as the tables show it
        result = ledger.run(run_id)
        if result is None:
            raise UsageError(f"no run {run_id!r} in {home / 'autorl.db'} (see `autorl results`)")
        if override:
            if not flag:
                raise UsageError("--override needs the flag: autorl audit --override RUN_ID FLAG --reason ...")
            ledger.override(run_id, flag, reason, getpass.getuser())
        else:
            meta = result.get("meta") or {}
            if meta.get("task_source"):  # a task given as a folder: taken again, as the run took it
                resolve_task(str(meta["task_source"]))
            bench = get_benchmark(result["row"]["task"])(meta.get("benchmark_options") or {})
            extra = []
            if judge is not None:
                from autorl.runs.judging import ask_judge

                judged = ask_judge(result, home, judge, samples=judge_samples, budget_usd=judge_budget_usd,
                                   budget_tokens=judge_budget_tokens, budget_s=judge_budget_s)
                extra = judged.flags
                result["row"] = {**result["row"], **judged.columns()}
            reaudit(result, benchmark=bench, home=home, ledger=ledger, variants=variants, extra=extra)
        flags = ledger.audit(run_id)
    finally:
        ledger.close()
    if as_json:
        print_json(flags)
        return
    if not flags:
        typer.echo(f"run {run_id}: no audit flags")
        return
    table(f"audit of run {run_id}", ["flag", "severity", "detail", "evidence", "decision"],
          [[f["name"], f["severity"], f["detail"], "\n".join(f["evidence"][:5]) + (" ..." if len(f["evidence"]) > 5 else ""),
            "; ".join(o["reason"] for o in f["overrides"])] for f in flags])


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
    # the port is taken before the URL is printed: a busy one is an error, never a URL that serves nothing
    sock = _listen(host, port)
    echo(f"autorl ui: http://{host}:{port}/ over {db}", err=True)
    # requests must name this address (or a loopback name) in Host: DNS rebinding gets a 421
    server = uvicorn.Server(uvicorn.Config(create_app(db, hosts=[host]), log_level="warning"))
    with sock:
        server.run(sockets=[sock])


def _listen(host: str, port: int) -> Any:
    """A socket listening on ``host:port`` (for the dashboard), or a one-line error saying why there is none."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def clean(
    run_ids: list[str] = typer.Argument(None, help="Runs to clean (default: every recorded run)."),
    keep: str = typer.Option("selected", "--keep", help="What stays: selected (the dev-best, the grader's copy) "
                                                        "or best (also the test-best, and the agent's copies)."),
    older_than: float | None = typer.Option(None, "--older-than", help="Only runs recorded at least DAYS ago."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be deleted; delete nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print what was done as JSON."),
) -> None:
    """Delete the checkpoints of recorded runs that their keep policy no longer needs (the records stay)."""
    from autorl.resources import autorl_home
    from autorl.runs.clean import clean_runs

    done = clean_runs(autorl_home(), run_ids or (), older_than_days=older_than, policy=keep, dry_run=dry_run)
    if as_json:
        print_json(done)
        return
    verb = "would free" if dry_run else "freed"
    for d in done:
        echo(f"{d['run_id']}: {verb} {d['freed_bytes'] / 2**30:.2f} GiB ({len(d['pruned'])} checkpoints)"
             + (f"; {d['note']}" if d.get("note") else ""))
    total = sum(int(d["freed_bytes"]) for d in done)
    echo(f"{len(done)} runs: {verb} {total / 2**30:.2f} GiB")
