"""``autorl items``: a run's items, the base model's answer and score beside the checkpoint's, flipped items first."""

from __future__ import annotations

import shutil
import unicodedata
from typing import Any

import typer

import autorl.cli.options as opt
from autorl.cli.output import print_json

#: the width of the labels before an item's texts (``  checkpoint  ``)
_LABEL = 14


def items_cmd(
    run: str = typer.Argument(..., metavar="RUN", help="A run id, or the start of one (see `autorl results`)."),
    split: str = typer.Option("test", "--split", help="test (the headline's items) or dev."),
    flipped: bool = typer.Option(False, "--flipped", help="Only the items whose score changed (wins, losses)."),
    submission: int | None = typer.Option(
        None, "--submission", help="Compare this submission instead of the headline's."
    ),
    as_json: bool = opt.JSON_OUTPUT,
) -> None:
    """A run's items, the base model beside the checkpoint, wins then losses first.

    Each item's prompt, reference, and both models' answers and scores, read from the grader's own per-item
    records."""
    from autorl.grader.items import read_run_items
    from autorl.record.ledger import Ledger
    from autorl.resources import autorl_home

    ledger = Ledger(autorl_home() / "autorl.db")
    try:
        result = ledger.run(ledger.resolve(run))
    finally:
        ledger.close()
    assert result is not None
    found = read_run_items(result, split, submission)
    shown = found.ordered(flipped)
    counts = found.counts()
    base_mean, mean = found.means()
    row = result.get("row") or {}
    if as_json:
        print_json(
            {
                "run_id": found.run_id,
                "task": row.get("task"),
                "agent": row.get("agent"),
                "split": split,
                "submission": found.submission,
                "counts": counts,
                "base_mean": base_mean,
                "mean": mean,
                "notes": found.notes,
                "items": [p.to_dict() for p in shown],
            }
        )
        return
    width = max(40, shutil.get_terminal_size((80, 24)).columns)
    echo = typer.echo
    echo(
        _clip(
            f"run {found.run_id} · {row.get('task')} · {row.get('agent')} · {split}: submission "
            f"{found.submission} vs the base model",
            width,
        )
    )
    means = "" if mean is None or base_mean is None else f" · score {100 * base_mean:.1f} → {100 * mean:.1f}"
    echo(
        _clip(
            f"{counts['items']} items: {counts['win']} wins, {counts['loss']} losses, {counts['same']} "
            f"unchanged" + (f", {counts['unpaired']} unpaired" if counts["unpaired"] else "") + means,
            width,
        )
    )
    for note in found.notes:
        echo(_clip(f"note: {note}", width), err=True)
    if not shown:
        echo("no flipped items" if flipped else "no items")
    for pair in shown:
        echo("")
        echo(
            _clip(
                f"{pair.outcome:<8} {_one_line(pair.id)}   {_score(_side(pair, 'base'))} → "
                f"{_score(_side(pair, 'checkpoint'))}",
                width,
            )
        )
        for label, text in _texts(pair):
            echo(_clip(f"  {label:<{_LABEL - 2}}", _LABEL) + _clip(_one_line(text), width - _LABEL))


def _side(pair: Any, name: str) -> float | None:
    record = getattr(pair, name)
    return record.score if record is not None else None


def _texts(pair: Any) -> list[tuple[str, str]]:
    out = [("prompt", pair.prompt or "-"), ("reference", pair.reference or "-")]
    for label, record in (("base", pair.base), ("checkpoint", pair.checkpoint)):
        if record is None:
            out.append((label, "(not evaluated on this item)"))
            continue
        more = f"   (+{len(record.answers) - 1} more samples)" if len(record.answers) > 1 else ""
        out.append((label, (record.answers[0] if record.answers and record.answers[0] else "(empty)") + more))
        if record.error:
            out.append((f"{label} error", record.error))
    return out


def _score(value: float | None) -> str:
    return "-" if value is None else f"{round(value, 3):g}"


def _one_line(text: str) -> str:
    """Model text as one line a terminal shows as written: newlines as ⏎, tabs as spaces, and every other
    control or format character (an escape sequence, a bidirectional override) as its code, never sent raw."""
    out = []
    for c in text:
        if c == "\n":
            out.append("⏎")
        elif c == "\t":
            out.append(" ")
        elif unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp"):
            out.append(f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


def _clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` terminal cells (wide characters count twice), ``…`` where cut."""
    from rich.cells import cell_len, set_cell_size

    if cell_len(text) <= width:
        return text
    return set_cell_size(text, width - 1).rstrip() + "…"
