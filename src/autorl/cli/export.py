"""``autorl export``: autorl tasks as other harnesses' tasks (``harbor``), recorded runs as standard eval records
(``eee``, Every Eval Ever) and tracking runs (``mlflow``). Heavy imports stay inside the commands."""

from __future__ import annotations

from pathlib import Path

import typer

from autorl.cli.options import parse_pairs
from autorl.cli.output import print_json
from autorl.errors import UsageError

export_app = typer.Typer(
    help="Export tasks to other harnesses (Harbor), runs to Every Eval Ever and MLflow.", no_args_is_help=True
)


@export_app.command("harbor")
def harbor(
    out: Path = typer.Option(..., "--out", help="Folder for the task directories (one per task, created)."),
    task: str | None = typer.Option(None, "--task", help="Benchmark name (see `autorl list benchmarks`)."),
    model: str | None = typer.Option(None, "--model", help="Base model: local dir, hub id[@revision] or autorl:tiny."),
    timeout: float | None = typer.Option(None, "--timeout", help="The agent's time budget in seconds."),
    study: Path | None = typer.Option(
        None,
        "--study",
        help="A study's spec (sweep.toml): one task per distinct "
        "task, model and budget (agents and seeds are Harbor's -a and -k).",
    ),
    limit: int | None = typer.Option(None, "--limit", help="Score the first N test items only."),
    backend: str | None = typer.Option(
        None, "--backend", help="The verifier's inference backend: hf (default) or vllm."
    ),
    gpus: int | None = typer.Option(None, "--gpus", help="GPUs for the agent's environment (default 0)."),
    verifier_gpus: int | None = typer.Option(
        None, "--verifier-gpus", help="GPUs for the verifier (default: 1 when --gpus is 1 or more, else 0)."
    ),
    network: str | None = typer.Option(None, "--network", help="The agent's network: on (default) or off."),
    benchmark_option: list[str] = typer.Option([], "--benchmark-option", help="KEY=VALUE (JSON value), repeatable."),
    reward: str = typer.Option(
        "beat-baseline",
        "--reward",
        help="Harbor's reward: beat-baseline (1 when the "
        "improvement's 95% interval is above 0) or score (the test score, 0-1).",
    ),
    verifier_timeout: float = typer.Option(
        3600.0, "--verifier-timeout", help="Seconds for the verifier (it scores the base model and the checkpoint)."
    ),
    image: str | None = typer.Option(
        None,
        "--image",
        help="Base image of both environments (default python:3.12-slim; pin a digest for `harbor lint --select ALL`).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the task directories as JSON."),
) -> None:
    """Write Harbor task directories whose verifier scores the agent's final checkpoint with autorl's grader on
    hidden items only the verifier's environment holds (`harbor run -p OUT -a AGENT`)."""
    from autorl.export.harbor import export
    from autorl.export.harbor_cells import DEFAULT_IMAGE, Scoring, TaskCell, study_cells

    single = (task, model, timeout)
    if study is not None:
        if any(v is not None for v in (*single, limit, backend, gpus, network)) or benchmark_option:
            raise UsageError(
                "--study takes the tasks, models, budgets and their options from the spec: leave out "
                "--task, --model, --timeout, --limit, --backend, --gpus, --network, --benchmark-option"
            )
        cells = study_cells(study)
    elif any(v is None for v in single):
        raise UsageError("give --task, --model and --timeout (or --study SPEC)")
    else:
        assert task is not None and model is not None and timeout is not None
        cells = [
            TaskCell(
                task=task,
                model=model,
                timeout=timeout,
                limit=limit,
                backend=backend or "hf",
                gpus=gpus or 0,
                network=network or "on",
                benchmark_options=parse_pairs(benchmark_option, "--benchmark-option"),
            )
        ]
    scoring = Scoring(
        reward=reward, verifier_timeout=verifier_timeout, verifier_gpus=verifier_gpus, image=image or DEFAULT_IMAGE
    )
    paths = export(out, cells, scoring, log=_say)
    _print_each(
        [str(p) for p in paths],
        as_json,
        f"run them with: harbor run -p {out} -a AGENT (harbor lint {out}/* checks them)",
    )


def _say(message: str) -> None:
    typer.echo(message, err=True)


def _print_each(lines: list[str], as_json: bool, hint: str | None = None) -> None:
    """What an export made, one a line (or a JSON list), then what to do with it on stderr."""
    if as_json:
        print_json(lines)
        return
    for line in lines:
        typer.echo(line)
    if hint:
        _say(hint)


#: the RUN|STUDY argument of the run exports
TARGET = typer.Argument(..., metavar="RUN|STUDY", help="A run id (or the start of one), or a study's name.")


@export_app.command("eee")
def eee(
    target: str = TARGET,
    out: Path = typer.Option(..., "--out", help="Folder for the records (data/<task>/<developer>/<model>/...)."),
    organization: str = typer.Option(
        "autorl", "--organization", help="Who ran the evaluation (the records' source organization)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the files written as JSON."),
) -> None:
    """Write Every Eval Ever records of a run or a study.

    The base model's and the checkpoint's test scores (aggregate) and their items (per-instance), as `every_eval_ever
    validate` checks them. They hold the hidden test items: publish them only where the items may be public."""
    from autorl.export.eee import export_eee
    from autorl.export.recorded import select

    paths = export_eee(select(target), out, organization=organization, log=_say)
    _print_each(
        [str(p) for p in paths], as_json, f"check them with: every_eval_ever validate '{out}/data/*/*/*/*.json*'"
    )


@export_app.command("mlflow")
def mlflow(
    target: str = TARGET,
    tracking_uri: str = typer.Option(
        ...,
        "--tracking-uri",
        help="The MLflow store: http(s)://server or "
        "sqlite:///file.db (artifacts then go to ./mlruns, as MLflow puts them).",
    ),
    experiment: str = typer.Option("autorl", "--experiment", help="The MLflow experiment (created when missing)."),
    as_json: bool = typer.Option(False, "--json", help="Print the MLflow run ids as JSON."),
) -> None:
    """Log a run, or each run of a study under a parent run, to MLflow.

    Params, metrics with the dev trajectory over steps, the card and the trajectory figure as artifacts."""
    from autorl.export.mlflow import export_mlflow
    from autorl.export.recorded import select

    _print_each(export_mlflow(select(target), tracking_uri, experiment=experiment, log=_say), as_json)
