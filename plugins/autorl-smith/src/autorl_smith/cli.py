"""``autorl smith``: check an rl-smith folder (``validate``) and write one from a data source (``generate``)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from autorl_smith.generate import Chat

smith_app = typer.Typer(help="rl-smith benchmark folders: validate one, generate one from data.", no_args_is_help=True)


@smith_app.command("validate")
def validate_cmd(
    directories: list[Path] = typer.Argument(
        ..., help="rl-smith folders (config.yaml, eval.py, data/, description.md)."
    ),
    sample: int = typer.Option(8, "--sample", min=1, help="Hidden items whose scoring is checked."),
) -> None:
    """Check folders as grading would use them: config, scorer (references 1.0, wrong answers less), hidden
    items absent from what the agent gets, description. One line per problem; exit status 1 if there is any."""
    from autorl_smith.validate import validate

    failed = False
    for directory in directories:
        problems = validate(directory, sample) if directory.is_dir() else ["not a folder"]
        for problem in problems:
            typer.echo(f"{directory}: {problem}", err=True)
        if not problems:
            typer.echo(f"{directory}: ok")
        failed = failed or bool(problems)
    if failed:
        raise SystemExit(1)


@smith_app.command("generate")
def generate_cmd(
    source: str = typer.Argument(
        ..., help="A folder or file of jsonl/json/csv/parquet data, a git URL, or a hub dataset id (owner/name)."
    ),
    name: str = typer.Option(..., "--name", help="The benchmark's name: the task becomes smith-NAME."),
    model: str = typer.Option(
        "gpt-4o-mini",
        "--model",
        help="The driver model (an OpenAI-compatible name), reached through the LLM gateway with the operator's key.",
    ),
    rounds: int = typer.Option(
        3, "--rounds", min=1, help="Validation rounds: the driver repairs from the validator's messages."
    ),
    budget_tokens: int = typer.Option(200_000, "--budget-tokens", min=1, help="Tokens the driver may spend."),
    budget_usd: float | None = typer.Option(None, "--budget-usd", help="US dollars the driver may spend."),
    out: Path | None = typer.Option(None, "--out", help="Where to write the folder (default $SMITH_BENCH_DIR/NAME)."),
) -> None:
    """Write an rl-smith folder for SOURCE with a driver model: it sees samples, code writes the data; the
    folder is validated and repaired by the driver up to --rounds times, then discovered as smith-NAME."""
    import tempfile

    from autorl_smith.folder import bench_root
    from autorl_smith.generate import generate
    from autorl_smith.sources import fetch, load_rows

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):
        typer.echo(f"error: --name {name!r} must be letters, digits, '-' or '_'", err=True)
        raise SystemExit(1)
    target = (out or bench_root() / name).expanduser()
    if target.exists():
        typer.echo(f"error: {target} already exists", err=True)
        raise SystemExit(1)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="autorl-smith-") as scratch:
        train, evals = load_rows(fetch(source, Path(scratch)))
        with driver(Path(scratch) / "gateway", model, budget_tokens, budget_usd) as chat:
            problems = generate(train, evals, name, target, chat, rounds, say=lambda s: typer.echo(s, err=True))
    if problems:
        for problem in problems:
            typer.echo(f"{target}: {problem}", err=True)
        typer.echo(
            f"error: the folder is not valid after {rounds} round(s); the draft is "
            f"{target.parent / ('.' + target.name + '.draft')}",
            err=True,
        )
        raise SystemExit(1)
    typer.echo(
        f"{target}: ok; task smith-{name}"
        + ("" if target.parent == bench_root().expanduser() else f" with SMITH_BENCH_DIR={target.parent}")
    )


@contextlib.contextmanager
def driver(folder: Path, model: str, budget_tokens: int, budget_usd: float | None) -> Iterator[Chat]:
    """A chat function that reaches ``model`` through a gateway of its own (the operator's key, the budget)."""
    import httpx

    from autorl import UsageError
    from autorl.gateway import start_gateway

    gateway = start_gateway(folder, budget_usd, budget_tokens)
    try:
        gateway.wait_ready()
        client = httpx.Client(
            base_url=f"{gateway.url}/openai/v1",
            trust_env=False,
            timeout=900,
            headers={"Authorization": f"Bearer {gateway.config.token}"},
        )

        def chat(messages: list[dict[str, str]]) -> str:
            try:
                resp = client.post("/chat/completions", json={"model": model, "messages": messages})
            except httpx.HTTPError as exc:
                raise UsageError(f"the driver model did not answer: {type(exc).__name__}") from None
            if resp.status_code != 200:
                raise UsageError(f"the driver model's call failed ({resp.status_code}): {resp.text[:200]}")
            try:
                return str(resp.json()["choices"][0]["message"]["content"] or "")
            except (ValueError, KeyError, IndexError, TypeError):
                raise UsageError("the driver model's answer is not a chat completion") from None

        with client:
            yield chat
    finally:
        gateway.close()
        gateway.stop()
