"""Hidden items in what the agent wrote: an n-gram index of the hidden items and the overlap flags.

Dev items in the agent's files prove a leak, since dev items are never public, unless the benchmark
declares ``dev_public``; test items are a strong flag. The evidence is file paths and hidden item ids,
never the items' text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from autorl.audit.budget import Budget
from autorl.audit.flags import CRITICAL, HIGH, Flag
from autorl.audit.scan import HARNESS_FILES, Source, Text, agent_texts

if TYPE_CHECKING:
    from autorl.scoring import Item

STANDARD_N = 13
SHORT_N = 8
_WORD = re.compile(r"[a-z0-9]+")
_CHUNK = 4 * 2**20


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _item_text(item: Item) -> str:
    parts = [str(v) for v in item.input.values()]
    return " ".join(parts)


class NgramIndex:
    """n-grams of hidden items: 13-grams for long items, 8-grams for short ones, the whole item for tiny ones."""

    def __init__(self, items: Iterable[tuple[str, Item]]) -> None:
        self.grams: dict[int, dict[tuple[str, ...], set[str]]] = {}
        for split, item in items:
            toks = _tokens(_item_text(item))
            if not toks:
                continue
            n = STANDARD_N if len(toks) >= STANDARD_N + 2 else min(SHORT_N, len(toks))
            table = self.grams.setdefault(n, {})
            for i in range(len(toks) - n + 1):
                table.setdefault(tuple(toks[i : i + n]), set()).add(f"{split}:{item.id}")

    def matches(self, text: str) -> set[str]:
        """``split:item_id`` of every hidden item one of whose n-grams is in ``text``."""
        toks = _tokens(text)
        hits: set[str] = set()
        for n, table in self.grams.items():
            for i in range(len(toks) - n + 1):
                found = table.get(tuple(toks[i : i + n]))
                if found:
                    hits |= found
        return hits


def _chunks(text: str) -> Iterator[str]:
    """Pieces of at most ~4 MiB that overlap, so that an n-gram across a cut is still seen whole."""
    if len(text) <= _CHUNK:
        yield text
        return
    start = 0
    while start < len(text):
        end = min(len(text), start + _CHUNK)
        yield text[start:end]
        if end == len(text):
            return
        start = end - 4096


def overlap_flags(
    per_split: dict[str, dict[str, set[str]]], hidden: dict[str, list[Item]], dev_public: bool = False
) -> list[Flag]:
    """``dev_public``: the benchmark's dev split is by nature in public data (GSM8K's train split), so dev
    items in the agent's files prove that it holds that public data, not that the hidden split leaked."""
    flags = []
    for split, found in per_split.items():
        if not found:
            continue
        files = sorted({f for fs in found.values() for f in fs})
        total = len(hidden[split])
        if split == "dev" and dev_public:
            flags.append(
                Flag(
                    "dev-items-in-workspace",
                    HIGH,
                    f"{len(found)} of {total} hidden dev items appear in {len(files)} file(s) the agent "
                    "wrote; this benchmark's dev items are part of its public train data, so this proves "
                    "the agent holds (or fetched) that public data, not that the hidden split leaked: "
                    "check whether it trained on them",
                    files + [f"dev item {i}" for i in sorted(found)],
                )
            )
        elif split == "dev":
            flags.append(
                Flag(
                    "dev-items-in-workspace",
                    CRITICAL,
                    f"{len(found)} of {total} hidden dev items appear in {len(files)} file(s) the agent "
                    "wrote; dev items are never public, so this is a leak",
                    files + [f"dev item {i}" for i in sorted(found)],
                )
            )
        else:
            flags.append(
                Flag(
                    f"{split}-items-in-workspace",
                    HIGH,
                    f"{len(found)} of {total} hidden {split} items appear in {len(files)} file(s) the agent "
                    "wrote (public benchmarks can appear in corpora: check the files)",
                    files + [f"{split} item {i}" for i in sorted(found)],
                )
            )
    return flags


def check_overlap(
    workspace: Path,
    hidden: dict[str, list[Item]],
    dev_public: bool = False,
    *,
    sources: Sequence[Source] | None = None,
    budget: Budget | None = None,
) -> list[Flag]:
    """Hidden items in what the agent wrote (by default its workspace, the harness's own files aside)."""
    budget = budget or Budget(None)
    index = NgramIndex((split, item) for split, items in hidden.items() for item in items)
    per_split: dict[str, dict[str, set[str]]] = {s: {} for s in hidden}
    for text in agent_texts(sources or [Source(workspace, skip_top=HARNESS_FILES)], budget):
        match_hidden(index, text, per_split)
    return overlap_flags(per_split, hidden, dev_public)


def match_hidden(index: NgramIndex, text: Text, per_split: dict[str, dict[str, set[str]]]) -> None:
    """Add where ``text`` came from to ``per_split[split][item_id]`` for each hidden item it holds."""
    for piece in _chunks(text.text):
        for hit in index.matches(piece):
            split, item_id = hit.split(":", 1)
            per_split.setdefault(split, {}).setdefault(item_id, set()).add(text.where)
