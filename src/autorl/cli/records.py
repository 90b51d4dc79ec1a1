"""``autorl results``, ``audit`` and ``ui``: what is recorded of runs, as tables, audit flags and the dashboard."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

import autorl.cli.options as opt
from autorl.cli.output import echo, fmt, fmt_p, markdown, print_json, table
from autorl.errors import UsageError
from autorl.record.display import fmt_ci, fmt_signed, short_ids, short_path
from autorl.record.schema import LedgerRow

#: the columns of `autorl results` (table and markdown): the headline is the test split
RESULT_COLUMNS = (
    "run_id",
    "task",
    "agent",
    "base_model",
    "baseline",
    "score",
    "improvement",
    "95% CI",
    "p",
    "dev best (k)",
    "dev improvement",
    "submissions",
    "test-scored",
    "beat baseline",
    "sandbox",
    "audit",
)


#: the compact default of `autorl results`: what a researcher scans for, readable at 80 columns
COMPACT_COLUMNS = ("run id", "task", "agent", "model", "test change [95% CI]", "p", "k", "status")


def _status(r: LedgerRow) -> str:
    # beat baseline, no clear change, below baseline or no test score: never "ok" for a run at -18 points
    from autorl.record.display import outcome

    return outcome(r) + (" (flagged)" if r.get("audit_flags") else "")


def _compact_cells(r: LedgerRow, ids: dict[str, str]) -> list[str]:
    ci = fmt_ci(r.get("improvement_ci95"))
    improvement = "-" if r.get("improvement") is None else f"{fmt_signed(r.get('improvement'))} {ci}"
    return [
        ids.get(str(r["run_id"]), str(r["run_id"])),
        str(r["task"]),
        str(r["agent"]),
        short_path(str(r["base_model"])),
        improvement,
        fmt_p(r.get("p_value")),
        str(r.get("dev_k") or 0),
        _status(r),
    ]


def _result_cells(r: LedgerRow, ids: dict[str, str] | None = None) -> list[str]:
    # markdown (a file, ``ids`` None) keeps every id and path whole; a screen gets them short
    dev_best = "-" if r.get("dev_best") is None else f"{fmt(r['dev_best'])} ({r.get('dev_k')})"
    model = str(r["base_model"]) if ids is None else short_path(str(r["base_model"]))
    return [
        (ids or {}).get(str(r["run_id"]), str(r["run_id"])),
        str(r["task"]),
        str(r["agent"]),
        model,
        fmt(r.get("baseline")),
        fmt(r.get("best_score")),
        fmt(r.get("improvement")),
        fmt(r.get("improvement_ci95")),
        fmt_p(r.get("p_value")),
        dev_best,
        fmt(r.get("dev_improvement")),
        str(r.get("submissions")),
        "yes" if r.get("success") else "no",
        "yes" if r.get("beat_baseline") else "no",
        str(r.get("sandbox") or "-"),
        ", ".join(r.get("audit_flags") or []) or "clean",
    ]


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
            echo(
                f"{r['status']}: run {ids.get(r['run_id'], r['run_id'])} ({r['task']}, {r['agent']}; {r['detail']})"
                + (f"; record it with: {r['recover']}" if r.get("recover") else ""),
                err=True,
            )
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
            table(
                "runs (score, improvement, CI: held-out test; dev: best of k on dev, optimistic)",
                RESULT_COLUMNS,
                [_result_cells(r, ids) for r in rows],
                caption=note or None,
                records=1,
            )
        else:
            table(
                "runs (held-out test; k: dev submissions scored)",
                COMPACT_COLUMNS,
                [_compact_cells(r, ids) for r in rows],
                keep=("run id", "p", "k"),
                records=1,
                caption="; ".join(c for c in ("--wide: every column", note) if c),
            )


def audit(
    run_id: str = typer.Argument(..., help="The run to audit."),
    flag: str | None = typer.Argument(None, help="With --override: the flag decided on."),
    override: bool = typer.Option(False, "--override", help="Record a human decision on a flag instead."),
    reason: str = typer.Option("", "--reason", help="Why (required with --override)."),
    variants: list[Path] = typer.Option(
        [], "--variant", help="A local post-trained variant of the base model (repeatable)."
    ),
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

                judged = ask_judge(
                    result,
                    home,
                    judge,
                    samples=judge_samples,
                    budget_usd=judge_budget_usd,
                    budget_tokens=judge_budget_tokens,
                    budget_s=judge_budget_s,
                )
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
    table(
        f"audit of run {run_id}",
        ["flag", "severity", "detail", "evidence", "decision"],
        [
            [
                f["name"],
                f["severity"],
                f["detail"],
                "\n".join(f["evidence"][:5]) + (" ..." if len(f["evidence"]) > 5 else ""),
                "; ".join(o["reason"] for o in f["overrides"]),
            ]
            for f in flags
        ],
    )


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
