"""The ``autorl`` application: every command, in the order ``autorl --help`` shows them, and user mistakes turned
into one line."""

from __future__ import annotations

import sys
import warnings
from typing import Any

import typer

import autorl.cli.export as export
import autorl.cli.grading as grading
import autorl.cli.installed as installed
import autorl.cli.items as items
import autorl.cli.noise as noise
import autorl.cli.records as records
import autorl.cli.runs as runs
import autorl.cli.selftest as selftest
import autorl.cli.sweep as sweep
from autorl.cli.output import json_stdout
from autorl.errors import AutorlError

__all__ = ["app", "command", "main"]

app = typer.Typer(
    name="autorl",
    help="Measure whether a large model, as an ML engineer, can post-train a small model past its baseline.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        from autorl.version import __version__

        typer.echo(f"autorl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """autorl: runs, evaluations, results."""


app.command()(installed.plugins)
app.command("run")(runs.run_cmd)
app.command("eval")(grading.eval_cmd)
app.command()(records.results)
app.command("items")(items.items_cmd)
app.command("ui")(records.ui)
app.command()(records.audit)
app.command()(grading.submit)
app.command()(installed.doctor)
app.command()(runs.recover)
app.command()(runs.clean)
app.command("new")(installed.new)
app.add_typer(installed.list_app, name="list")
app.add_typer(grading.grader_app, name="grader")
app.add_typer(sweep.sweep_app, name="sweep")
app.add_typer(export.export_app, name="export")
app.command()(selftest.selftest)
app.command("noise")(noise.noise_cmd)


def command(typer_app: typer.Typer) -> Any:
    """The click command of ``typer_app`` as ``autorl`` runs it: a flag's help shows no type (``--no-audit``, not
    ``--no-audit <bool>``: a flag takes no value)."""
    root = typer.main.get_command(typer_app)
    todo = [root]
    while todo:
        cmd = todo.pop()
        todo += list(getattr(cmd, "commands", {}).values())
        # --help too: the command makes it once, on first asking, and keeps it
        help_option = cmd.get_help_option(cmd.context_class(cmd))
        for param in [*cmd.params, *([help_option] if help_option is not None else [])]:
            if getattr(param, "is_flag", False):
                param.metavar = ""
    return root


def _warning_line(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    return f"warning: {message}\n"


def main(argv: list[str] | None = None) -> None:
    """Entry point: plugin commands, then the app; user mistakes become one line and exit code 2."""
    warnings.formatwarning = _warning_line  # type: ignore[assignment]
    try:
        from autorl.plugins.loader import get_plugin_manager

        get_plugin_manager().hook.register_commands(cli=app)
        with json_stdout(sys.argv[1:] if argv is None else argv):
            command(app).main(args=argv, standalone_mode=False)
    except AutorlError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        # usage errors of the (vendored or standalone) click underneath typer
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            sys.exit(code)
        raise
    sys.exit(0)
