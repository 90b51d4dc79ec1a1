"""``autorl selftest``: the shipped red team against this install, one line per attack."""

from __future__ import annotations

import sys

import typer

from autorl.cli.output import echo, print_json


def selftest(
    task: list[str] = typer.Option(["arith"], "--task", help="Benchmark to attack (repeatable; default arith)."),
    sandbox: str = typer.Option("auto", "--sandbox", help="auto, bwrap or none, as autorl run takes it."),
    network: str | None = typer.Option(None, "--network", help="on or off (default: off where the sandbox can)."),
    model: str = typer.Option("autorl:tiny", "--model", help="The base model of the runs."),
    backend: str | None = typer.Option(None, "--backend", help="Inference backend of the runs."),
    timeout: float = typer.Option(60.0, "--timeout", help="The red team's time budget per run, in seconds."),
    limit: int = typer.Option(20, "--limit", help="Items evaluated per split in each run."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Attack this install through real runs; exit status 1 when any attack got through."""
    from autorl.selftest import THROUGH, run_selftest

    results = {}
    for name in task:
        results[name] = run_selftest(
            name,
            model=model,
            sandbox=sandbox,
            network=network,
            backend=backend,
            timeout=timeout,
            limit=limit,
            log=(lambda m: None) if as_json else (lambda m: echo(m, err=True)),
        )
    through = sum(v.status == THROUGH for verdicts in results.values() for v in verdicts)
    if as_json:
        print_json({"tasks": {n: [v.to_dict() for v in vs] for n, vs in results.items()}, "got_through": through})
    else:
        for name, verdicts in results.items():
            for verdict in verdicts:
                echo(f"{name:<10} {verdict.line()}")  # the evidence wraps under the line, indented
        typer.echo(f"{through} attack(s) got through" if through else "every attack held or was n/a")
    sys.exit(1 if through else 0)
