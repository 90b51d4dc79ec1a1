"""``autorl smith``: check an rl-smith folder (``validate``) and write one from a data source (``generate``)."""

from __future__ import annotations

from pathlib import Path

import typer

smith_app = typer.Typer(help="rl-smith benchmark folders: validate one, generate one from data.", no_args_is_help=True)


@smith_app.command("validate")
def validate_cmd(
    directories: list[Path] = typer.Argument(..., help="rl-smith folders (config.yaml, eval.py, data/, "
                                             "description.md)."),
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

