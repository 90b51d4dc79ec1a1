"""A run's items, the base model's answer beside the checkpoint's: the per-item records the grader's evaluation
worker writes into the run's store (``items/<tag>-<split>.jsonl``, ``baseline`` the base model and ``sub<N>``
submission N; :func:`per_item_path`), paired by item id.

The files are the grader's, outside the agent's workspace, but they hold what the models wrote (and a hostile
checkpoint writes what it likes): they are read through :mod:`autorl.untrusted` (no link followed, sizes capped,
lines that are not records skipped and counted), each field checked for its type, and text kept as text for
the reader to escape.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from autorl import untrusted
from autorl.errors import UsageError

__all__ = [
    "MAX_FILE",
    "ItemPair",
    "ItemRecord",
    "RunItems",
    "pair_records",
    "per_item_path",
    "read_item_records",
    "read_run_items",
    "selected_submission",
]

#: the most of one per-item file read (10k items with long answers are far below)
MAX_FILE = 256 * 2**20
#: the longest line kept (one item: its answers, and an episode's whole trajectory)
MAX_LINE = 16 * 2**20
SPLITS = ("dev", "test")
BASE = "baseline"


def per_item_path(store_dir: Path, tag: str, split: str) -> Path:
    """Where the grader keeps the per-item records of one evaluation: ``tag`` is ``baseline`` or ``sub<N>``."""
    return Path(store_dir) / "items" / f"{tag}-{split}.jsonl"


class ItemRow(TypedDict):
    """One item of a run, both sides flat (:meth:`ItemPair.to_dict`): a row of ``autorl items`` and
    :func:`autorl.items`."""

    item_id: str
    #: ``win``, ``loss``, ``same`` or ``unpaired``
    outcome: str
    change: float | None
    prompt: str | None
    reference: str | None
    base_score: float | None
    score: float | None
    base_answer: str | None
    answer: str | None
    base_error: str | None
    error: str | None
    base_answers: list[str]
    answers: list[str]


@dataclass(frozen=True)
class ItemRecord:
    """One item of one evaluation as its per-item record holds it (``score`` in [0, 1]; None where unreadable)."""

    id: str
    score: float | None
    answers: tuple[str, ...] = ()
    error: str | None = None
    prompt: str | None = None
    reference: str | None = None
    output_tokens: int | None = None
    #: an episode's turns as (observation, action)
    trajectory: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> ItemRecord | None:
        """The record of one JSON line, or None when it names no item."""
        ident = raw.get("id")
        if isinstance(ident, bool) or not isinstance(ident, str | int):
            return None
        extra = _dict(raw.get("extra"))
        steps = extra.get("trajectory")
        completions = raw.get("completions")
        tokens = extra.get("output_tokens")
        return cls(
            id=str(ident),
            score=_score(raw.get("score")),
            answers=tuple(_text(a) or "" for a in completions if a is not None)
            if isinstance(completions, list)
            else (),
            error=_text(raw.get("error")),
            prompt=_text(raw.get("prompt")),
            reference=_text(raw.get("reference")),
            output_tokens=tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else None,
            trajectory=tuple(
                (_text(s.get("observation")) or "", _text(s.get("action")) or "")
                for s in (steps if isinstance(steps, list) else [])
                if isinstance(s, dict)
            ),
        )


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _score(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok and 0.0 <= value <= 1.0 else None


def _text(value: Any) -> str | None:
    """A field as text: a string as it is, another value as JSON (a structured reference), None as None."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class ItemPair:
    """One item: the base model's record beside the checkpoint's (either None where its file lacks the item)."""

    id: str
    base: ItemRecord | None
    checkpoint: ItemRecord | None

    @property
    def prompt(self) -> str | None:
        return next((r.prompt for r in (self.checkpoint, self.base) if r is not None and r.prompt is not None), None)

    @property
    def reference(self) -> str | None:
        return next(
            (r.reference for r in (self.checkpoint, self.base) if r is not None and r.reference is not None), None
        )

    @property
    def change(self) -> float | None:
        """The checkpoint's score minus the base's (None unless both were scored)."""
        if self.base is None or self.checkpoint is None or self.base.score is None or self.checkpoint.score is None:
            return None
        return self.checkpoint.score - self.base.score

    @property
    def outcome(self) -> str:
        """``win`` (the checkpoint scores higher), ``loss`` (lower), ``same``, or ``unpaired`` (one side only)."""
        change = self.change
        if change is None:
            return "unpaired"
        return "win" if change > 0 else "loss" if change < 0 else "same"

    def to_dict(self) -> ItemRow:
        """The item as one flat record (every answer, the first of each side as ``base_answer`` / ``answer``)."""
        base, ckpt = self.base, self.checkpoint
        return {
            "item_id": self.id,
            "outcome": self.outcome,
            "change": self.change,
            "prompt": self.prompt,
            "reference": self.reference,
            "base_score": base.score if base else None,
            "score": ckpt.score if ckpt else None,
            "base_answer": base.answers[0] if base and base.answers else None,
            "answer": ckpt.answers[0] if ckpt and ckpt.answers else None,
            "base_error": base.error if base else None,
            "error": ckpt.error if ckpt else None,
            "base_answers": list(base.answers) if base else [],
            "answers": list(ckpt.answers) if ckpt else [],
        }


#: the order :meth:`RunItems.ordered` shows items in: the flipped ones first
_RANK = {"win": 0, "loss": 1, "same": 2, "unpaired": 2}


@dataclass(frozen=True)
class RunItems:
    """A run's items on one split: the checkpoint (``submission``) against the base model, in the benchmark's
    order, with what could not be read (``notes``)."""

    run_id: str
    split: str
    submission: int
    items: list[ItemPair]
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counts = {"items": len(self.items), "win": 0, "loss": 0, "same": 0, "unpaired": 0}
        for pair in self.items:
            counts[pair.outcome] += 1
        return counts

    def means(self) -> tuple[float | None, float | None]:
        """The base's and the checkpoint's mean item score over the items both scored (a share, 0-1)."""
        both = [p for p in self.items if p.change is not None]
        if not both:
            return None, None
        base = sum(p.base.score for p in both if p.base and p.base.score is not None) / len(both)
        ckpt = sum(p.checkpoint.score for p in both if p.checkpoint and p.checkpoint.score is not None) / len(both)
        return base, ckpt

    def ordered(self, flipped: bool = False) -> list[ItemPair]:
        """Wins first (the largest gain first), then losses (the largest drop first), then the rest in the
        benchmark's order; with ``flipped``, the wins and losses only."""
        shown = [p for p in self.items if not flipped or p.outcome in ("win", "loss")]
        return sorted(shown, key=lambda p: (_RANK[p.outcome], -abs(p.change or 0.0)))


def read_item_records(store_dir: Path, tag: str, split: str, notes: list[str] | None = None) -> list[ItemRecord] | None:
    """The per-item records of one evaluation in the run's store, in the benchmark's order; None when the file
    is not there. What was skipped (lines that are not records, a file past :data:`MAX_FILE`, a file that is not
    a regular one or is reached through a link: none of its records) goes to ``notes``."""
    relpath = per_item_path(Path("."), tag, split)
    stats = untrusted.JsonlStats()
    try:
        raw = list(untrusted.iter_jsonl(Path(store_dir), relpath, limit=MAX_FILE, max_line=MAX_LINE, stats=stats))
    except untrusted.UntrustedFileError as exc:
        if "does not exist" in str(exc):
            return None
        if notes is not None:
            notes.append(f"{relpath} not read: {exc}")
        return []
    records = [r for r in (ItemRecord.parse(line) for line in raw) if r is not None]
    skipped = stats.bad_lines + len(raw) - len(records)
    if notes is not None and skipped:
        notes.append(f"{relpath}: {skipped} line(s) that are not item records skipped")
    if notes is not None and stats.truncated:
        notes.append(f"{relpath} is larger than {MAX_FILE >> 20} MiB: the items past it are not shown")
    return records


def selected_submission(result: Mapping[str, Any], split: str) -> int | None:
    """The submission a run's headline is about: the one scored on test, else the best on dev."""
    test, row = _dict(result.get("test")), _dict(result.get("row"))
    for value in ((test.get("submission_id") if split == "test" else None), row.get("best_submission")):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def read_run_items(result: Mapping[str, Any], split: str = "test", submission: int | None = None) -> RunItems:
    """A recorded run's items on ``split`` (``test``: the headline's), the checkpoint (``submission``, default the
    headline's) against the base model, from the run's grader store; a one-line :class:`UsageError` when there
    is nothing to show (no store on this machine, no such evaluation)."""
    row = result.get("row") or {}
    run_id = str(row.get("run_id") or result.get("run_id"))
    if split not in SPLITS:
        raise UsageError(f"--split must be dev or test, not {split!r}")
    store = (result.get("meta") or {}).get("store_dir")
    if not store:
        raise UsageError(f"run {run_id} recorded no grader store: its items are not kept")
    store_dir = Path(str(store))
    if not store_dir.is_dir():
        raise UsageError(
            f"run {run_id}: its grader's store {store_dir} is not on this machine (a study's runs "
            "keep a copy in the study's folder: ingest that run's result.json from there)"
        )
    chosen = selected_submission(result, split) if submission is None else submission
    if chosen is None:
        raise UsageError(f"run {run_id} has no scored submission: no items to compare with the base model")
    notes: list[str] = []
    ckpt = read_item_records(store_dir, f"sub{chosen}", split, notes)
    base = read_item_records(store_dir, BASE, split, notes)
    if ckpt is None:
        why = (
            "was never scored on test (only the headline's submission is, and with the peers' figure every "
            "distinct one)"
            if split == "test"
            else "has no dev evaluation"
        )
        raise UsageError(f"run {run_id}: submission {chosen} {why}; no per-item records in {store_dir / 'items'}")
    if base is None:
        notes.append(
            f"the base model's {split} items are not in the store (a baseline reused from an older "
            "cache, or set by hand): its answers are not shown"
        )
    return RunItems(run_id, split, chosen, pair_records(base or [], ckpt), notes)


def pair_records(base: Sequence[ItemRecord], checkpoint: Sequence[ItemRecord]) -> list[ItemPair]:
    """Items paired by id, in the checkpoint's order, then any item only the base has."""
    by_id = {r.id: r for r in base}
    pairs = [ItemPair(r.id, by_id.get(r.id), r) for r in checkpoint]
    seen = {r.id for r in checkpoint}
    return pairs + [ItemPair(r.id, r, None) for r in base if r.id not in seen]
