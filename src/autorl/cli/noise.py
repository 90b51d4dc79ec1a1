"""``autorl noise``: the noise floor of an evaluation (one checkpoint scored N times)."""

from __future__ import annotations

import typer

import autorl.cli.options as opt
from autorl.cli.output import echo, print_json
from autorl.record.display import short_path


def noise_cmd(
    task: str = opt.TASK,
    model: str = opt.CHECKPOINT,
    repeats: int = typer.Option(20, "--repeats", help="How many times to score it (2 or more)."),
    split: str = opt.SPLIT,
    limit: int | None = opt.LIMIT,
    backend: str | None = opt.BACKEND,
    benchmark_option: list[str] = opt.BENCHMARK_OPTIONS,
    as_json: bool = opt.JSON_RECORD,
) -> None:
    """Score one checkpoint N times (each repeat its own sampling seed) and report the spread: the floor under
    which an improvement is not told apart from noise. Kept under AUTORL_HOME/noise/ for study reports."""
    from autorl.evaluation.noise import noise_floor
    from autorl.resources import autorl_home

    record = noise_floor(
        task,
        model,
        repeats,
        home=autorl_home(),
        split=split,
        limit=limit,
        backend=backend,
        benchmark_options=opt.parse_pairs(benchmark_option, "--benchmark-option"),
        say=lambda line: echo(line, err=True),
    )
    if as_json:
        print_json(record)
        return
    how = "greedy" if record["greedy"] else "sampled"
    same = "every repeat gave the same item scores (deterministic)" if record["deterministic"] else "repeats differ"
    echo(
        f"{task}/{split} {short_path(model)}: {record['repeats']} repeats ({how}); mean {record['mean']:.2f}, "
        f"sd {record['sd']:.2f}, range {record['range']:.2f} [{record['min']:.2f}, {record['max']:.2f}]; {same}"
    )
