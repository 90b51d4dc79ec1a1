"""Whether an occurrence of a decoy's canary in a text lies inside a copy of the decoy, not in data of the
agent's own: a verbatim copy of one of its lines (as the file holds it, or quoted in JSON with or without
``ensure_ascii``; cut short where a text ends: a partial capture, ``head``), or one of its records written again
(a JSON object holding exactly a record's values, or a pair of an indented JSON file; a CSV row holding them,
quoted or not), as the text holds it or quoted in JSON (an index of the files an agent found).

A copy is told from the decoy's ``lines`` kept in the run's record: every line that holds the canary. A record
from before kept the first 400 only; one that holds that many may have lost some, and then, as for a record
that kept none, no copy can be told from data of the agent's own: the canary is never more than a read there.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping
from typing import Any

from autorl.decoys._plant import Decoy

__all__ = ["LEGACY_MAX_LINES", "Copies"]

#: the lines a decoy's record kept before it kept them all
LEGACY_MAX_LINES = 400
#: characters of a line before and after the canary that index the decoy's lines (a copy is then compared whole)
_BEFORE, _AFTER = 12, 8
#: an escape sequence cut short at the end of a text
_CUT_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{0,3})?$")
#: what closes a JSON object cut short inside a string value, after a value, or inside a key
_CLOSERS = ('"}', "}", '": ""}', ': ""}', ' ""}')


def _variants(line: str, canary: str) -> list[tuple[str, int]]:
    """``line`` as a copy may hold it (itself, JSON-escaped with and without ``ensure_ascii``), with each offset
    of ``canary`` in it."""
    out = []
    for form in dict.fromkeys((line, json.dumps(line, ensure_ascii=False)[1:-1], json.dumps(line)[1:-1])):
        start = form.find(canary)
        while start >= 0:
            out.append((form, start))
            start = form.find(canary, start + 1)
    return out


def _record_values(line: str) -> tuple[str, ...] | None:
    """The values of the record a decoy's line holds (a JSON object, or a CSV row), as sorted text: what a copy
    keeps whatever its format, key order or spacing."""
    text = line.strip().rstrip(",")
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        return _values(obj)
    return _row_values(text)


def _values(obj: Mapping[str, Any]) -> tuple[str, ...] | None:
    if any(isinstance(v, dict | list) for v in obj.values()):
        return None
    return tuple(sorted(str(v) for v in obj.values()))


def _row_fields(line: str) -> list[str]:
    try:
        return next(csv.reader([line]), [])
    except csv.Error:
        return []


def _row_values(line: str) -> tuple[str, ...] | None:
    fields = _row_fields(line)
    return tuple(sorted(fields)) if len(fields) > 1 else None


def _quote_edge(text: str, lo: int, hi: int, backward: bool) -> int:
    """The nearest ``"`` that ends a JSON string (not one escaped inside it) between ``lo`` and ``hi``, looking
    from ``hi`` back (``backward``) or from ``lo`` on; -1 if none."""
    at = text.rfind('"', lo, hi) if backward else text.find('"', lo, hi)
    while at > 0 and text[at - 1] == "\\":
        at = text.rfind('"', lo, at) if backward else text.find('"', at + 1, hi)
    return at


def _pair_values(pair: str) -> list[str]:
    """The text values of a ``"key": value`` line of an indented JSON file."""
    try:
        obj = json.loads("{" + pair + "}")
    except ValueError:
        return []
    return [v for v in obj.values() if isinstance(v, str)] if isinstance(obj, dict) else []


def _unescaped(text: str, i: int, reach: int) -> tuple[str, int, bool] | None:
    """The lines around ``i`` of a text quoted in JSON (a file's text as a JSON string: its lines end in
    ``\\n``), unquoted, where ``i`` lies in them and whether the text ends in them (a partial capture); None
    where the text around ``i`` is no such quote."""
    lo, hi = max(0, i - reach), min(len(text), i + reach)
    if "\\" not in text[lo:hi]:
        return None
    nl, quote = text.rfind("\\n", lo, i), _quote_edge(text, lo, i, backward=True)
    start = max(nl + 2 if nl >= 0 else -1, quote + 1 if quote >= 0 else -1)
    nl, quote = text.find("\\n", i, hi), _quote_edge(text, i, hi, backward=False)
    end = min(x for x in (nl, quote, hi) if x >= 0)
    if start < 0:
        return None
    tail = text[i:end]
    cut = end == len(text)
    if cut:  # an escape cut short where the capture ends
        tail = _CUT_ESCAPE.sub("", tail)
    try:
        before = json.loads(f'"{text[start:i]}"')
        return before + json.loads(f'"{tail}"'), len(before), cut
    except ValueError:
        return None


class Copies:
    """One decoy's lines holding its canary, and :meth:`is_copy`: whether an occurrence of the canary in a text
    is a copy of the decoy (see the module's text)."""

    def __init__(self, decoy: Decoy) -> None:
        self.canary = decoy.canary
        self.known = bool(decoy.lines) and (decoy.all_lines or len(decoy.lines) < LEGACY_MAX_LINES)
        forms = [v for line in decoy.lines for v in _variants(line, decoy.canary)]
        self.width = max((len(form) for form, _ in forms), default=0) + 1
        self.records = {v for v in map(_record_values, decoy.lines) if v is not None}
        self.pairs = {line.strip().rstrip(",") for line in decoy.lines}  # an indented JSON file's "key": value
        # the values of those pairs holding the canary: what a row written again of such a file keeps of them
        self.paired = {v for pair in self.pairs for v in _pair_values(pair) if self.canary in v}
        # forms by the characters before the canary, then by those after it
        self.framed: dict[str, dict[str, list[tuple[str, int]]]] = {}
        end = len(self.canary)
        for form, at in forms:
            before, after = form[max(0, at - _BEFORE) : at], form[at + end : at + end + _AFTER]
            self.framed.setdefault(before, {}).setdefault(after, []).append((form, at))

    def is_copy(self, text: str, i: int) -> bool:
        """Whether the occurrence of the canary at ``i`` in ``text`` is a copy of the decoy."""
        if not self.known:  # a record without (all) the decoy's lines: no telling, so never more than a read
            return True
        # the text's line around the occurrence, no wider than the longest line it could be a copy of
        low, high = max(0, i - self.width), i + self.width
        start = text.rfind("\n", low, i) + 1 or low
        end = text.find("\n", i, high)
        line = text[start : min(len(text), high) if end < 0 else end]
        p = i - start
        q = p + len(self.canary)
        cut = len(line) - q < _AFTER  # the line ends soon after the canary: any form it is the start of
        for before in {line[max(0, p - n) : p] for n in range(_BEFORE + 1)}:
            by_after = self.framed.get(before)
            if not by_after:
                continue
            if cut:
                candidates = [f for forms in by_after.values() for f in forms]
            else:
                candidates = [f for n in range(_AFTER + 1) for f in by_after.get(line[q : q + n], ())]
            for form, at in candidates:
                k, m = min(p, at), min(len(line) - p, len(form) - at)
                if line[p - k : p + m] == form[at - k : at + m]:
                    return True
        return self._is_record_copy(text, i)

    def _is_record_copy(self, text: str, i: int) -> bool:
        """Whether the canary at ``i`` lies in a record holding exactly one of the decoy's records (a flat JSON
        object, a CSV row), as the text holds it or quoted in JSON; in a record cut short where the text ends (a
        partial capture), whether what it holds is the start of one of them."""
        if not self.records and not self.pairs:
            return False
        reach = 4 * self.width + 256
        if self._record_at(text, i, reach, True):
            return True
        quoted = _unescaped(text, i, reach)
        return quoted is not None and self._record_at(quoted[0], quoted[1], reach, quoted[2])

    def _record_at(self, text: str, i: int, reach: int, open_end: bool) -> bool:
        """``open_end``: the end of ``text`` may cut a record short (a capture ends there)."""
        ends = len(text) <= i + reach  # the text ends within reach: its last line or record ends there
        # a CSV row: the whole line around the canary, within reach
        start, end = text.rfind("\n", max(0, i - reach), i), text.find("\n", i, i + reach)
        line = (
            text[start + 1 : len(text) if end < 0 else end] if (start >= 0 or i < reach) and (end >= 0 or ends) else ""
        )
        if line and not line.lstrip().startswith(("{", "[")):  # a JSON line is no row, whatever its commas
            fields = _row_fields(line)
            if sum(1 for f in fields if f) > 1 and (
                tuple(sorted(fields)) in self.records or any(f in self.paired for f in fields)
            ):
                return True
            if (
                end < 0
                and open_end
                and fields
                and (self._starts_record(fields) or any(p.startswith(fields[-1]) for p in self.paired))
            ):
                return True
        # a JSON object
        start, end = text.rfind("{", max(0, i - reach), i), text.find("}", i, i + reach)
        if start < 0:
            return False
        if end < 0:
            return ends and open_end and self._cut_object(text[start:])
        try:
            obj = json.loads(text[start : end + 1])
        except ValueError:
            return False
        if not isinstance(obj, dict):
            return False
        if _values(obj) in self.records:
            return True
        return self._paired(obj, cut=False)

    def _paired(self, obj: dict[str, Any], cut: bool) -> bool:
        """A record of an indented JSON file: the pair that holds the canary is one of the file's lines (``cut``:
        the object's last pair may be the start of one)."""
        last = next(reversed(obj))
        for k, v in obj.items():
            if isinstance(v, str) and self.canary in v:
                forms = (f"{json.dumps(k)}: {json.dumps(v)}", f"{json.dumps(k)}:{json.dumps(v)}")
                if any(f in self.pairs for f in forms) or (
                    cut and k == last and any(p.startswith(f[:-1]) for p in self.pairs for f in forms)
                ):
                    return True
        return False

    def _cut_object(self, head: str) -> bool:
        """Whether ``head``, a JSON object cut short by the end of the text, is the start of one of the records."""
        head = _CUT_ESCAPE.sub("", head).rstrip().rstrip(",")
        for closer in _CLOSERS:
            try:
                obj = json.loads(head + closer)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj and not any(isinstance(v, dict | list) for v in obj.values()):
                return self._starts_record([str(v) for v in obj.values()]) or self._paired(obj, cut=True)
        return False

    def _starts_record(self, values: list[str]) -> bool:
        """Whether ``values`` (the last one cut short) are those of one of the records so far."""
        *whole, last = values
        return any(
            all(v in record for v in whole) and any(r.startswith(last) for r in record) for record in self.records
        )
