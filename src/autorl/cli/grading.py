"""``autorl eval``, ``submit`` and ``grader serve``: a checkpoint scored as the grader scores it, a submission to
a grader, and a grader on its own."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

import autorl.cli.options as opt
from autorl.cli.output import echo, print_json
from autorl.errors import UsageError

grader_app = typer.Typer(help="The grading service.", no_args_is_help=True)


def eval_cmd(
    task: str = opt.TASK,
    model: str = opt.CHECKPOINT,
    split: str = opt.SPLIT,
    limit: int | None = opt.LIMIT,
    backend: str | None = opt.BACKEND,
    base_model: str | None = typer.Option(None, "--base-model", help="Base model, when --model is a LoRA adapter."),
    per_item: Path | None = typer.Option(None, "--per-item", help="Where to write per-item records (JSONL)."),
    benchmark_option: list[str] = opt.BENCHMARK_OPTIONS,
    as_json: bool = opt.JSON_RECORD,
) -> None:
    """Evaluate a checkpoint through the same path the grader uses."""
    from autorl.evaluation.checkpoint import evaluate
    from autorl.resources import autorl_home

    if limit is not None and limit <= 0:
        raise UsageError("--limit must be positive")
    options = opt.parse_pairs(benchmark_option, "--benchmark-option")
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
        record = evaluate(
            task,
            model,
            split=split,
            limit=limit,
            backend=backend,
            base_model=base_model,
            benchmark_options=options,
            per_item_path=per_item,
            per_item_dir=autorl_home() / "evals",
            progress=progress_cb if sys.stderr.isatty() and not as_json else None,
        )
    finally:
        if bar is not None:
            bar.stop()
    if as_json:
        print_json(record.to_dict(items=False))
        return
    echo(
        f"{record.benchmark}/{split}: {record.score:.2f} (n={record.n}, stderr {record.stderr:.2f}, "
        f"95% CI {record.ci95[0]:.2f}-{record.ci95[1]:.2f}); config {record.config_hash}"
    )
    echo(f"per-item records: {record.per_item_path}", whole_words=True)


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
        print_json(client.submit(str(p.resolve()) if p.exists() else path, wait=wait))


@grader_app.command("serve")
def grader_serve(
    task: str = opt.TASK,
    workspace: Path = typer.Option(..., "--workspace", help="The workspace whose output/ holds submissions."),
    port: int | None = typer.Option(None, "--port", help="Port on 127.0.0.1 (default: a free one)."),
    base_model: str | None = typer.Option(None, "--base-model", help="Base model, for the baseline and LoRA."),
    backend: str | None = opt.BACKEND,
    store_dir: Path | None = typer.Option(None, "--store-dir", help="Grader storage (default under AUTORL_HOME)."),
) -> None:
    """Run a grader standalone; prints its URL and tokens."""
    import hashlib

    from autorl.grader.config import GraderConfig
    from autorl.grader.server import serve
    from autorl.plugins.registry import default_backend, get_benchmark
    from autorl.procs.group import free_port
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
    config = GraderConfig.for_run(
        task=task,
        workspace=ws,
        output_dir=ws / "output",
        store_dir=store,
        data=data,
        base=base,
        backend=backend or default_backend(),
        home=home,
    )
    port = port or free_port()
    typer.echo(
        f"GRADING_SERVER_URL=http://127.0.0.1:{port}\nAUTORL_TOKEN={config.agent_token}\n"
        f"AUTORL_ADMIN_TOKEN={config.admin_token}\nstore: {store}",
        err=False,
    )
    sys.stdout.flush()
    serve(config, port)
