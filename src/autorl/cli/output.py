"""How the command line prints: JSON, rich tables, markdown tables and the numbers in their cells."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import typer

from autorl.display import fmt_p

__all__ = ["console", "fmt", "fmt_p", "json_stdout", "markdown", "print_json", "table"]

#: the real standard output while a ``--json`` command runs (its fd 1 then goes to stderr)
_json_fd: int | None = None


def print_json(data: Any) -> None:
    text = json.dumps(data, indent=2, default=str) + "\n"
    if _json_fd is None:
        typer.echo(text, nl=False)
        return
    view = memoryview(text.encode())
    while view:
        view = view[os.write(_json_fd, view):]


@contextlib.contextmanager
def json_stdout(args: Sequence[str]) -> Iterator[None]:
    """With ``--json`` (or ``--format json``) among ``args``: while the command runs, whatever writes to fd 1 (a library's logs, a
    subprocess's output) goes to stderr, and :func:`print_json` alone writes to the real standard output, so the
    output is one JSON document."""
    global _json_fd
    wants = "--json" in args or "--format=json" in args or any(
        a == "--format" and b == "json" for a, b in itertools.pairwise(args))
    if not wants or _json_fd is not None:
        yield
        return
    with contextlib.suppress(ValueError, OSError):
        sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    _json_fd = saved
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, OSError):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        _json_fd = None


def console() -> Any:
    """A console as wide as the terminal, or wide enough for a pipe (rich would cut a table to 80 columns)."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200)


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], caption: str | None = None,
          out: Any = None, keep: Sequence[str] = ()) -> None:
    """A rich table on ``out`` (default: a console as wide as ``COLUMNS`` or the terminal).

    The columns named in ``keep`` (an id a user copies into the next command) are never cut or wrapped: the
    others fold to make room.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    # a table with an id to keep drops the frame and shares padding: more room for the cells
    shown = (Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
             if keep else Table(title=title, caption=caption))
    for c in columns:
        if c in keep:
            shown.add_column(c, no_wrap=True, min_width=max([len(c), *(len(r[columns.index(c)]) for r in rows)]))
        else:
            shown.add_column(c, overflow="fold")
    for r in rows:
        shown.add_row(*r)
    (out or Console()).print(shown)


def markdown(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A markdown table (a ``|`` inside a cell escaped)."""
    typer.echo("| " + " | ".join(columns) + " |")
    typer.echo("|" + "|".join(" --- " for _ in columns) + "|")
    for r in rows:
        typer.echo("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")


def fmt(v: Any, digits: int = 2) -> str:
    """A cell: ``-`` for nothing, floats to ``digits`` decimals, lists as ``[a, b]``."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(fmt(x, digits) for x in v) + "]"
    return str(v)


