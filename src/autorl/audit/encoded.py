"""Text the agent wrote in an encoded form, decoded: base64 and hex runs (``\\x41`` escapes too) that decode to
readable text, and lines in rot13. The audit's checks read these beside the text itself, and the judge is shown
them, so that test items or a cheating snippet hidden in an encoding are read as what they say.

Cheap by construction, since every text the audit reads goes through here: candidates are found by plain
substring searches (runs of base64 characters by translating the text's bytes, rot13 by words that only rot13
text holds), never by a regular expression over the whole text; each decoded run and the decoded total per
text are capped, and a decoding that is not mostly printable text is dropped (a checksum, an identifier or an
embedded image decodes to bytes, not to text).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from autorl.audit.scan import Text

#: the longest encoded run decoded, and the decoded characters taken from one text in all
MAX_RUN = 1 << 20
MAX_DECODED = 4 << 20
#: the shortest decoded text worth reading
MIN_DECODED = 12

# base64 characters (both alphabets) marked x, every other byte a space: a run is a substring search away
_MARK = bytes(
    ord("x") if chr(b) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-" else ord(" ")
    for b in range(256)
)
_HEX_DIGITS = b"0123456789abcdefABCDEF"
_MIN_RUN = 24
_ESCAPED_HEX = re.compile(r"(?:\\x[0-9a-fA-F]{2}){12,}")
# words common in English and in what a cheat would say ("the", "and", ... "split"), and as they read in rot13
_WORDS = (
    "the",
    "and",
    "of",
    "to",
    "is",
    "it",
    "into",
    "for",
    "with",
    "this",
    "from",
    "test",
    "data",
    "train",
    "answer",
    "question",
    "ignore",
    "previous",
    "instructions",
    "clean",
    "auditor",
    "judge",
    "verdict",
    "copy",
    "split",
)
_ENGLISH = re.compile(r"\b(?:" + "|".join(_WORDS) + r")\b", re.I)
_ROT13_WORDS = tuple(codecs.encode(w, "rot13") for w in _WORDS)
_ROT13_HINT = re.compile(r"\b(?:" + "|".join(_ROT13_WORDS) + r")\b", re.I)
#: what rot13 text almost always holds and other text almost never: " gur " is " the ", " naq " is " and "
_ROT13_NEEDLES = (" gur ", " naq ", " gb ", " bs ", " vf ")
_LINE = 4096


@dataclass(frozen=True)
class Decoded:
    """One decoded run: ``how`` it was encoded, where it lies in the text (characters ``start`` to ``end``) and
    what it says."""

    how: str
    start: int
    end: int
    text: str

    def where(self, where: str) -> str:
        """The location of this run inside the text found at ``where``."""
        return f"{where} ({self.how} at char {self.start}, decoded)"


def _readable(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < MIN_DECODED:
        return None
    printable = sum(c.isprintable() or c in "\t\n\r" for c in text)
    letters = sum(c.isalpha() for c in text)
    return text if printable >= 0.95 * len(text) and letters >= 0.3 * len(text) else None


def _b64(run: str) -> bytes | None:
    padded = run.rstrip("=") + "=" * (-len(run.rstrip("=")) % 4)
    try:
        if "-" in run or "_" in run:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded)
    except (binascii.Error, ValueError):
        return None


def _hex(run: str) -> bytes | None:
    try:
        return bytes.fromhex(run.replace("\\x", ""))
    except ValueError:
        return None


def around(lower: str, needles: Sequence[str], radius: int) -> list[tuple[int, int]]:
    """The stretches of ``lower`` (a lowercased text) around each occurrence of a needle: its line, or ``radius``
    characters either side in a longer line; overlapping stretches merged. Plain substring searches only."""
    spans = []
    for needle in needles:
        at = lower.find(needle)
        while at >= 0:
            start = max(lower.rfind("\n", max(0, at - radius), at) + 1, at - radius, 0)
            nl = lower.find("\n", at + len(needle), at + len(needle) + radius)
            end = min(len(lower) if nl < 0 else nl, at + len(needle) + radius)
            spans.append((start, end))
            at = lower.find(needle, end)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _rot13_lines(text: str) -> Iterator[Decoded]:
    """Lines (or, in a long line, the stretch around the hint) that read as English once rot13 is undone."""
    for start, end in around(text.lower(), _ROT13_NEEDLES, _LINE // 2):
        span = text[start:end]
        hints = len(_ROT13_HINT.findall(span))
        if hints >= 3 and hints > 2 * len(_ENGLISH.findall(span)):
            yield Decoded("rot13", start, end, codecs.decode(span, "rot13"))


def _encoded_runs(text: str) -> Iterator[tuple[str, int, int, bytes]]:
    """(how, start, end, decoded bytes) of each base64 or hex run of ``text`` that decodes (characters)."""
    data = text.encode("utf-8", errors="replace")
    ascii_only = len(data) == len(text)
    marked = data.translate(_MARK)
    needle = b"x" * _MIN_RUN
    at = marked.find(needle)
    while at >= 0:
        end = marked.find(b" ", at + _MIN_RUN)
        end = len(data) if end < 0 else end
        while end < len(data) and end - at < MAX_RUN and data[end : end + 1] == b"=":  # base64 padding
            end += 1
        run = data[at:end]
        if end - at <= MAX_RUN:
            hexadecimal = not run.translate(None, _HEX_DIGITS) and len(run) % 2 == 0
            decoded = _hex(run.decode()) if hexadecimal else _b64(run.decode())
            if decoded:
                start = at if ascii_only else len(data[:at].decode("utf-8", errors="replace"))
                yield "hex" if hexadecimal else "base64", start, start + len(run), decoded
        at = marked.find(needle, end)
    if "\\x" in text:
        for m in _ESCAPED_HEX.finditer(text):
            decoded = _hex(m.group())
            if decoded:
                yield "hex", m.start(), m.end(), decoded


def decoded_runs(text: str) -> Iterator[Decoded]:
    """The encoded runs of ``text`` that decode to readable text, at most :data:`MAX_DECODED` characters."""
    taken = 0
    for how, start, end, data in _encoded_runs(text):
        readable = _readable(data)
        if readable is None:
            continue
        taken += len(readable)
        if taken > MAX_DECODED:
            return
        yield Decoded(how, start, end, readable)
    for run in _rot13_lines(text):
        taken += len(run.text)
        if taken > MAX_DECODED:
            return
        yield run


def with_decoded(text: Text) -> list[Text]:
    """``text`` and each readable encoded run in it as a text of its own (located inside ``text``)."""
    return [text, *(Text(run.where(text.where), text.name, run.text) for run in decoded_runs(text.text))]
