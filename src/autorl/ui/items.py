"""The run page's items: each item's prompt, reference, and the base model's and the checkpoint's answers and
scores, flipped items first, a page at a time (the server reads the grader's per-item records and sends one page,
so a split of 10k items is 200 small pages, never one giant table); and the same page as JSON.

The answers are model output (the checkpoint is the agent's work): every text is escaped and cut to
:data:`TEXT_LIMIT` characters, in a section framed as untrusted. The items are hidden ones: while a run on the
same task is in progress they are not served at all (:func:`withheld`).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from autorl.errors import UsageError
from autorl.grader.items import ItemPair, RunItems, per_item_path, read_run_items, selected_submission
from autorl.ui.shell import fmt, untrusted_section

__all__ = ["PER_PAGE", "TEXT_LIMIT", "ItemsPage", "items_page", "items_section", "withheld"]

#: items on one page
PER_PAGE = 50
#: the most characters of one text shown (a prompt, an answer); the rest is counted, not sent
TEXT_LIMIT = 2000


@dataclass(frozen=True)
class ItemsPage:
    """One page of a run's items (or why there are none: ``error``)."""

    split: str
    flipped: bool
    page: int
    pages: int
    found: RunItems | None
    shown: list[ItemPair]
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        found = self.found
        return {
            "split": self.split,
            "flipped": self.flipped,
            "page": self.page,
            "pages": self.pages,
            "per_page": PER_PAGE,
            "error": self.error,
            "submission": found.submission if found else None,
            "counts": found.counts() if found else None,
            "notes": found.notes if found else [],
            "items": [{k: _clipped(v) for k, v in p.to_dict().items()} for p in self.shown],
        }


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


class _Recent:
    """The last few runs' items read, each kept while its two files are unchanged (a store's per-item files are
    written once, whole): paging through 10k items reads and pairs them once, not at every page."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self.entries: OrderedDict[tuple[Any, ...], RunItems] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, result: Mapping[str, Any], split: str, submission: int | None) -> RunItems:
        chosen = selected_submission(result, split) if submission is None else submission
        store = Path(str((result.get("meta") or {}).get("store_dir") or ""))
        stamps = tuple(_stamp(per_item_path(store, tag, split)) for tag in ("baseline", f"sub{chosen}"))
        key = (str(store), split, chosen, stamps)
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
                return found
        found = read_run_items(result, split, submission)
        with self.lock:
            self.entries[key] = found
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        return found


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


_RECENT = _Recent()


def withheld(task: Any, live: Iterable[Mapping[str, Any]], now: float | None = None) -> str | None:
    """Why the items of a run on ``task`` are not shown now: a run on that task is in progress. Its agent must
    not read the task's hidden items, and a dashboard can be within its reach (a sandbox sharing the host's
    network, no sandbox, a dashboard listening on a public address)."""
    from autorl.runs.liveness import run_status

    for info in live:
        if info.get("task") == task and run_status(info, now).alive:
            return (
                f"the items are hidden while run {info.get('run_id')} on {task} is in progress: its agent must "
                "not see this task's hidden items, and this page may be within its reach"
            )
    return None


def items_page(result: Mapping[str, Any] | None, params: Mapping[str, str], hidden: str | None = None) -> ItemsPage:
    """The page ``params`` ask for (``split`` test|dev, ``page`` from 1, ``flipped`` 1 for wins and losses only,
    ``submission``) of a recorded run's items; none, saying why, where ``hidden`` (:func:`withheld`) says so."""
    split = params.get("split") or "test"
    split = split if split in ("dev", "test") else "test"
    flipped = params.get("flipped") == "1"
    page = max(1, _int(params.get("page"), 1))
    if hidden is not None:
        return ItemsPage(split, flipped, 1, 1, None, [], hidden)
    if result is None:
        return ItemsPage(
            split, flipped, 1, 1, None, [], "the run is not recorded yet: its items are shown once it ends"
        )
    submission = _int(params.get("submission"), 0) or None
    try:
        found = _RECENT.get(result, split, submission)
    except UsageError as exc:
        return ItemsPage(split, flipped, 1, 1, None, [], str(exc))
    ordered = found.ordered(flipped)
    pages = max(1, -(-len(ordered) // PER_PAGE))
    page = min(page, pages)
    return ItemsPage(split, flipped, page, pages, found, ordered[(page - 1) * PER_PAGE : page * PER_PAGE])


def _clipped(value: Any) -> Any:
    if isinstance(value, str) and len(value) > TEXT_LIMIT:
        return value[:TEXT_LIMIT] + f"… ({len(value) - TEXT_LIMIT} more characters)"
    if isinstance(value, list):
        return [_clipped(v) for v in value]
    return value


def _text(value: str | None, extra: str = "") -> str:
    if value is None:
        return "&ndash;"
    shown = escape(str(_clipped(value))) if value else "<span class='muted'>(empty)</span>"
    return shown + (f" <span class='muted'>{escape(extra)}</span>" if extra else "")


def _answer(pair: ItemPair, side: str) -> str:
    record = pair.base if side == "base" else pair.checkpoint
    if record is None:
        return "<span class='muted'>not evaluated</span>"
    more = f"(+{len(record.answers) - 1} more samples)" if len(record.answers) > 1 else ""
    error = f"<div class='warning'>{escape(str(_clipped(record.error)))}</div>" if record.error else ""
    return _text(record.answers[0] if record.answers else "", more) + error


def _score(pair: ItemPair, side: str) -> str:
    record = pair.base if side == "base" else pair.checkpoint
    return fmt(record.score if record is not None else None)


def _row(pair: ItemPair) -> str:
    """One item's row: its id, outcome and both scores, then its texts (each scrolls past a few lines)."""
    texts = (_text(pair.prompt), _text(pair.reference), _answer(pair, "base"), _answer(pair, "checkpoint"))
    return (
        f"<tr data-item='{escape(pair.id)}' class='outcome-{escape(pair.outcome)}'>"
        f"<td class='wrap'>{escape(pair.id)}</td><td>{escape(pair.outcome)}</td>"
        f"<td class='num'>{_score(pair, 'base')}</td><td class='num'>{_score(pair, 'checkpoint')}</td>"
        + "".join(f"<td class='txt'><div>{text}</div></td>" for text in texts)
        + "</tr>"
    )


def items_section(run_id: str, page: ItemsPage) -> str:
    """The run page's items section: the counts, links to the other split and to the flipped items only, one
    page of the table and the pager (the run page takes the section's parameters as ``items_<name>``)."""

    def link(label: str, **changes: Any) -> str:
        query = {"split": page.split, "flipped": "1" if page.flipped else "", "page": str(page.page), **changes}
        shown = {f"items_{k}": v for k, v in query.items() if v not in ("", None)}
        return f'<a href="/runs/{escape(quote(run_id, safe=""))}?{escape(urlencode(shown))}#items">{escape(label)}</a>'

    other = "dev" if page.split == "test" else "test"
    choose = (
        f"<p class='note'>{link(f'{other} split', split=other, page='1')} · "
        + (
            link("every item", flipped="", page="1")
            if page.flipped
            else link("flipped items only", flipped="1", page="1")
        )
        + "</p>"
    )
    head = f"<h2 id='items'>Items: the base model beside the checkpoint ({escape(page.split)} split)</h2>"
    found = page.found
    if found is None:
        return f"{head}{choose}<p class='note'>{escape(page.error or 'no items')}</p>"
    counts = found.counts()
    base_mean, mean = found.means()
    means = f" · score {100 * base_mean:.1f} → {100 * mean:.1f}" if base_mean is not None and mean is not None else ""
    summary = (
        f"<p id='items-counts'>{counts['items']} items: <b>{counts['win']}</b> wins, <b>{counts['loss']}</b> "
        f"losses, {counts['same']} unchanged"
        + (f", {counts['unpaired']} unpaired" if counts["unpaired"] else "")
        + f"{means}. Submission {found.submission} against the base model, from the grader's per-item "
        "records; wins (the checkpoint scores higher) first, then losses.</p>"
    )
    notes = "".join(f"<p class='note'>{escape(n)}</p>" for n in found.notes)
    rows = "".join(_row(p) for p in page.shown)
    table = (
        "<table class='items'><thead><tr><th>item</th><th>outcome</th><th>base</th><th>checkpoint</th>"
        "<th>prompt</th><th>reference</th><th>base answer</th><th>checkpoint answer</th></tr></thead><tbody>"
        + (rows or f"<tr><td colspan='8' class='muted'>{'no flipped items' if page.flipped else 'no items'}</td></tr>")
        + "</tbody></table>"
    )
    pager = ""
    if page.pages > 1:
        prev = link("« previous", page=str(page.page - 1)) if page.page > 1 else ""
        nxt = link("next »", page=str(page.page + 1)) if page.page < page.pages else ""
        pager = f"<p class='pager'>{prev} page {page.page} of {page.pages} {nxt}</p>"
    return (
        head
        + summary
        + choose
        + notes
        + untrusted_section("answers", table + pager, "the models' answers (the checkpoint is the agent's work)")
    )
