"""Text the agent wrote in an encoded form, decoded: base64 and hex runs (``\\x41`` escapes too) that decode to
readable text, and lines in rot13. The audit's checks read these beside the text itself, and the judge is shown
them, so that test items or a cheating snippet hidden in an encoding are read as what they say.

Cheap by construction: each form is found by one regular expression over the text, each decoded run and the
decoded total per text are capped, and a decoding that is not mostly printable text is dropped (a checksum, an
identifier or an embedded image decodes to bytes, not to text).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass

from autorl.audit.scan import Text

#: the longest encoded run decoded, and the decoded characters taken from one text in all
MAX_RUN = 1 << 20
MAX_DECODED = 4 << 20
#: the shortest decoded text worth reading
MIN_DECODED = 12

_BASE64 = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}|[A-Za-z0-9_-]{24,}={0,2}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2}){12,}|(?:\\x[0-9a-fA-F]{2}){12,}")
# words common in English and in what a cheat would say ("the", "and", ... "split"), and as they read in rot13
_WORDS = ("the", "and", "of", "to", "is", "it", "into", "for", "with", "this", "from", "test", "data", "train",
          "answer", "question", "ignore", "previous", "instructions", "clean", "auditor", "judge", "verdict", "copy",
          "split")
_ENGLISH = re.compile(r"\b(?:" + "|".join(_WORDS) + r")\b", re.I)
_ROT13_HINT = re.compile(r"\b(?:" + "|".join(codecs.encode(w, "rot13") for w in _WORDS) + r")\b", re.I)
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


def _rot13_lines(text: str) -> Iterator[Decoded]:
    """Lines (or, in a long line, the stretch around the hint) that read as English once rot13 is undone."""
    last_end = -1
    for m in _ROT13_HINT.finditer(text):
        if m.start() < last_end:
            continue
        start = max(text.rfind("\n", 0, m.start()) + 1, m.start() - _LINE // 2)
        nl = text.find("\n", m.end())
        end = min(len(text) if nl < 0 else nl, m.end() + _LINE // 2)
        last_end = end
        span = text[start:end]
        hints = len(_ROT13_HINT.findall(span))
        if hints >= 3 and hints > 2 * len(_ENGLISH.findall(span)):
            yield Decoded("rot13", start, end, codecs.decode(span, "rot13"))


def decoded_runs(text: str) -> Iterator[Decoded]:
    """The encoded runs of ``text`` that decode to readable text, at most :data:`MAX_DECODED` characters."""
    taken = 0
    for how, pattern, decode in (("base64", _BASE64, _b64), ("hex", _HEX, _hex)):
        for m in pattern.finditer(text):
            if m.end() - m.start() > MAX_RUN:
                continue
            data = decode(m.group())
            readable = _readable(data) if data else None
            if readable is None:
                continue
            taken += len(readable)
            if taken > MAX_DECODED:
                return
            yield Decoded(how, m.start(), m.end(), readable)
    for run in _rot13_lines(text):
        taken += len(run.text)
        if taken > MAX_DECODED:
            return
        yield run


def with_decoded(text: Text) -> list[Text]:
    """``text`` and each readable encoded run in it as a text of its own (located inside ``text``)."""
    return [text, *(Text(run.where(text.where), text.name, run.text) for run in decoded_runs(text.text))]
