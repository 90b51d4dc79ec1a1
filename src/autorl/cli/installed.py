"""``autorl plugins``, ``list``, ``doctor`` and ``new``: what is installed, whether it is ready, and a new
plugin package."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

import autorl.cli.options as opt
from autorl.cli.output import echo, echo_command, print_json, table

list_app = typer.Typer(help="List what is installed.", no_args_is_help=True)


def plugins() -> None:
    """Show installed plugins and what each registers (JSON)."""
    from autorl.plugins.registry import plugin_summary

    print_json(plugin_summary())


def _listing(
    rows: list[dict[str, Any]],
    as_json: bool,
    title: str,
    columns: list[str],
    cells: Callable[[dict[str, Any]], list[str]],
) -> None:
    """What a ``list`` command shows: the rows as JSON, or a table of their cells."""
    if as_json:
        print_json(rows)
    else:
        table(title, columns, [cells(r) for r in rows])


@list_app.command("benchmarks")
def list_benchmarks(as_json: bool = opt.JSON_OUTPUT) -> None:
    """Benchmarks (tasks) that `autorl run --task` accepts (also `autorl list tasks`)."""
    from autorl.plugins.registry import benchmark_summary

    _listing(
        benchmark_summary(),
        as_json,
        "benchmarks (tasks)",
        ["name", "version", "distribution", "splits"],
        lambda r: [r["name"], str(r["version"]), r["distribution"], ",".join(r["splits"])],
    )


# the flags say --task, the plugins say benchmark: both names list the same
list_app.command("tasks", help="Tasks (benchmarks) that `autorl run --task` accepts: `autorl list benchmarks`.")(
    list_benchmarks
)


@list_app.command("agents")
def list_agents(as_json: bool = opt.JSON_OUTPUT) -> None:
    """Agents that `autorl run --agent` accepts (a folder with config.yaml works too)."""
    from autorl.plugins.registry import agent_summary

    _listing(
        agent_summary(),
        as_json,
        "agents",
        ["name", "distribution", "ready", "description"],
        lambda r: [r["name"], r["distribution"], "yes" if r["ready"] else f"no: {r['status']}", r["description"]],
    )


@list_app.command("backends")
def list_backends(as_json: bool = opt.JSON_OUTPUT) -> None:
    """Inference backends that `--backend` accepts, and whether each can run here."""
    from autorl.plugins.registry import backend_summary

    _listing(
        backend_summary(),
        as_json,
        "backends",
        ["name", "distribution", "available"],
        lambda r: [r["name"], r["distribution"], "yes" if r["available"] else "no"],
    )


def doctor(as_json: bool = opt.JSON_OUTPUT) -> None:
    """Report what is installed and ready, and what to do for each missing piece."""
    from autorl.cli.doctor import checks

    rows = checks()
    if as_json:
        print_json([c.to_dict() for c in rows])
        return
    # a command to copy, or a long fix: printed below the table, a command wrapped where the shell takes a
    # continuation (in a cell it would break at the column's width, its lines no longer the command)
    long = [c for c in rows if c.fix and (c.command or len(c.fix) > 24)]
    table(
        "autorl doctor",
        ["", "check", "status", "to do"],
        [
            ["ok" if c.ok else "--", c.name, c.detail, f"see [{long.index(c) + 1}] below" if c in long else c.fix]
            for c in rows
        ],
    )
    for n, c in enumerate(long, 1):
        echo(f"[{n}] {c.name}:")
        if c.command:
            echo_command(c.fix)
        else:
            echo("    " + c.fix)


def new(
    kind: str = typer.Argument(..., help="benchmark or agent"),
    name: str = typer.Argument(..., help="Plugin name, e.g. my-bench (package autorl-my-bench)."),
    directory: Path = typer.Option(Path("."), "--dir", help="Where to create the package folder."),
) -> None:
    """Scaffold a plugin package (`autorl new benchmark NAME`, `autorl new agent NAME`) that installs,
    is discovered and passes its own tests unchanged."""
    from autorl.cli.scaffold import next_steps, scaffold

    root = scaffold(kind, name, directory)
    typer.echo(f"created {root}\nnext: {next_steps(root)}")
