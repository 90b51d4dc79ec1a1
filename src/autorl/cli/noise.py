"""``autorl noise``: the noise floor of an evaluation (one checkpoint scored N times)."""

from __future__ import annotations

import typer

from autorl.cli.options import parse_pairs
from autorl.cli.output import print_json


def noise_cmd(
    task: str = typer.Option(..., "--task", help="Benchmark name."),
    model: str = typer.Option(..., "--model", help="Checkpoint: local dir, hub id or autorl:tiny."),
    repeats: int = typer.Option(20, "--repeats", help="How many times to score it (2 or more)."),
    split: str = typer.Option("dev", "--split", help="dev or test."),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N items."),
    backend: str | None = typer.Option(None, "--backend", help="Inference backend."),
    benchmark_option: list[str] = typer.Option([], "--benchmark-option",
                                               help="KEY=VALUE for the benchmark (repeatable; JSON values)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON record."),
) -> None:
    """Score one checkpoint N times (each repeat its own sampling seed) and report the spread: the floor under
    which an improvement is not told apart from noise. Kept under AUTORL_HOME/noise/ for study reports."""
    from autorl.noise import noise_floor
    from autorl.resources import autorl_home

    record = noise_floor(task, model, repeats, home=autorl_home(), split=split, limit=limit, backend=backend,
                         benchmark_options=parse_pairs(benchmark_option, "--benchmark-option"),
                         say=lambda line: typer.echo(line, err=True))
    if as_json:
        print_json(record)
        return
    how = "greedy" if record["greedy"] else "sampled"
    same = "every repeat gave the same item scores (deterministic)" if record["deterministic"] else \
        "repeats differ"
    typer.echo(f"{task}/{split} {model}: {record['repeats']} repeats ({how}); mean {record['mean']:.2f}, "
               f"sd {record['sd']:.2f}, range {record['range']:.2f} [{record['min']:.2f}, {record['max']:.2f}]; "
               f"{same}")
