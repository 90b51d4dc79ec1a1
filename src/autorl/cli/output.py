"""How the command line prints: JSON, rich tables, markdown tables, lines wrapped to the screen, and the numbers in
their cells.

Everything but JSON, CSV and markdown (files for other programs) fits the width :func:`width` gives: ``COLUMNS``
where it is set, else the terminal's, else 80; tables fold their cells, lines wrap with an indent, a command to copy
wraps where the shell takes a ``\\`` continuation.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import typer

from autorl.record.display import fmt_p

__all__ = ["console", "echo", "echo_command", "fmt", "fmt_p", "json_stdout", "markdown", "print_json", "table", "width"]

#: the real standard output while a ``--json`` command runs (its fd 1 then goes to stderr)
_json_fd: int | None = None


def print_json(data: Any) -> None:
    text = json.dumps(data, indent=2, default=str) + "\n"
    if _json_fd is None:
        typer.echo(text, nl=False)
        return
    view = memoryview(text.encode())
    while view:
        view = view[os.write(_json_fd, view) :]


@contextlib.contextmanager
def json_stdout(args: Sequence[str]) -> Iterator[None]:
    """With ``--json`` (or ``--format json``) among ``args``: while the command runs, whatever writes to fd 1 (a library's logs, a
    subprocess's output) goes to stderr, and :func:`print_json` alone writes to the real standard output, so the
    output is one JSON document."""
    global _json_fd
    wants = (
        "--json" in args
        or "--format=json" in args
        or any(a == "--format" and b == "json" for a, b in itertools.pairwise(args))
    )
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


def console(*, stderr: bool = False) -> Any:
    """A console :func:`width` columns wide (rich's rule: ``COLUMNS``, else the terminal's width, else 80)."""
    from rich.console import Console

    return Console(stderr=stderr)


def width() -> int:
    """How wide the command line prints: ``COLUMNS`` where set, else the terminal's width, else 80."""
    return int(console().width)


def echo(text: str, *, indent: str = "    ", err: bool = False, whole_words: bool = False) -> None:
    """``text`` wrapped to :func:`width`, each line of it on its own, continuation lines indented by ``indent``.

    A word longer than a line is cut where the line ends, unless ``whole_words`` (a line that is there to give
    a path to copy): then it stands whole on a line of its own, the one thing that may be wider.
    """
    import textwrap

    size = max(width(), len(indent) + 20)
    for line in text.splitlines() or [""]:
        typer.echo(
            textwrap.fill(
                line, size, subsequent_indent=indent, break_on_hyphens=False, break_long_words=not whole_words
            )
            if len(line) > size
            else line,
            err=err,
        )


def echo_command(command: str, *, indent: str = "    ", err: bool = False) -> None:
    """A shell command to copy, indented by ``indent`` and wrapped to :func:`width` where the shell takes a
    ``\\`` continuation (at a space outside quotes), so that the lines pasted into a shell are the command."""
    size = max(width(), len(indent) + 20)
    lines, line = [], indent
    for word in _shell_words(command):
        if line.strip() and len(line) + 1 + len(word) + 2 > size:
            lines.append(line + " \\")
            line = indent * 2 + word
        else:
            line = f"{line} {word}" if line.strip() else line + word
    lines.append(line)
    for text in lines:
        typer.echo(text, err=err)


def _shell_words(command: str) -> list[str]:
    """``command`` split at the spaces outside quotes (each word as written, quotes kept)."""
    words, word, quote = [], "", ""
    for ch in command:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch.isspace():
            if word:
                words.append(word)
            word = ""
            continue
        word += ch
    if word:
        words.append(word)
    return words


def table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    caption: str | None = None,
    out: Any = None,
    keep: Sequence[str] = (),
    records: int = 0,
) -> None:
    """A rich table on ``out`` (default: a console :func:`width` columns wide), never wider than it.

    The columns named in ``keep`` (short figures a user scans down: a p-value, a count) are not wrapped while
    there is room; every other cell folds to make room. Shorten what does not fit before (long run ids:
    :func:`autorl.record.display.short_ids`). With ``records``, a table that would squeeze a column below
    :data:`NARROWEST` characters on this screen prints as one block per row instead, a ``column  value`` line
    each, under a heading made of the row's first ``records`` cells (psql's expanded display).
    """
    from rich import box
    from rich.table import Table

    screen = out or console()
    if records and _squeezed_width(columns, rows, keep) > screen.width:
        _records(screen, title, columns, rows, caption, records)
        return
    # a table with columns to keep drops the frame and shares padding: more room for the cells
    shown = (
        Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        if keep
        else Table(title=title, caption=caption)
    )
    for c in columns:
        if c in keep:
            shown.add_column(
                c, no_wrap=True, overflow="fold", min_width=max([len(c), *(len(r[columns.index(c)]) for r in rows)])
            )
        else:
            shown.add_column(c, overflow="fold")
    for r in rows:
        shown.add_row(*r)
    screen.print(shown)


#: the narrowest a folding column of a table with ``records`` may get before it prints as records instead
NARROWEST = 8


def _squeezed_width(columns: Sequence[str], rows: Sequence[Sequence[str]], keep: Sequence[str]) -> int:
    # the columns to keep at their widest, the others at NARROWEST (or less where all of it is narrower), and
    # the padding between them (a frame of a rule and a space either side when nothing is kept)
    widest = [
        max([len(c), *(len(line) for r in rows for line in str(r[i]).splitlines() or [""])])
        for i, c in enumerate(columns)
    ]
    cells = sum(w if c in keep else min(w, NARROWEST) for c, w in zip(columns, widest, strict=True))
    return cells + (2 * len(columns) if keep else 3 * len(columns) + 1)


def _records(
    screen: Any, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], caption: str | None, heading: int
) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    screen.print(Text(title, style="bold"), overflow="fold")
    for r in rows:
        block = Table(
            title=" · ".join(r[:heading]), title_justify="left", show_header=False, box=box.SIMPLE, pad_edge=False
        )
        block.add_column(no_wrap=True, style="dim")
        block.add_column(overflow="fold")
        for c, cell in zip(columns[heading:], r[heading:], strict=True):
            block.add_row(c, cell)
        screen.print(block)
    if caption:
        screen.print(Text(caption, style="dim"), overflow="fold")


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
