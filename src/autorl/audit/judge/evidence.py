"""What the judge reads of a run: every text the agent wrote, whole, as located pieces.

The texts are the agent's trajectory, logs, code and the data it built, its ``/tmp``, the copies the runner
kept of files deleted or changed before the end (all through :func:`autorl.audit.scan.agent_blobs`: no link
followed, archives opened), the gateway's record of the model calls and the submissions' metadata. Each text
is cut into pieces of at most ``part_chars`` characters at line ends, each piece naming the bytes of its file it
shows (``train.py [bytes 36000-72000]``); the printable runs of a binary file are its text; the encoded runs of a
text that decode to readable text are shown decoded beside it (:mod:`autorl.audit.encoded`); a piece whose text
was already gathered (the conversation each model call sends again, a copied file) is shown once. What gathering
itself could not take (a file over the scan limit's middle, an archive past its caps, an unreadable file,
evidence past the reading limit) is listed as :class:`Unshown`, never dropped silently.

Pieces are ordered so that no kind of evidence crowds out the others when the judge's budget runs short:
each kind (trajectory and logs, model calls, code, the rest) is shown in proportion to its share
(:data:`SHARES`), decoded runs first within their kind.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.audit.budget import AUDIT_BUDGET_S, Budget
from autorl.audit.encoded import decoded_runs
from autorl.audit.scan import HARNESS_FILES, Source, agent_blobs, seen_files
from autorl.audit.unpack import Blob
from autorl.decoys import as_planted

if TYPE_CHECKING:
    from autorl.record.schema import ResultRecord

#: characters of evidence in one judge call (the rest of the prompt is small): no piece is longer
CONTEXT_CHARS = 60_000
#: text held for the judge in all; what lies past it is listed as not shown
EVIDENCE_BYTES = 64 * 2**20
#: formats whose binary content is weights, arrays or images: only their long printable runs are shown (random
#: numbers almost never make one), the rest is the deterministic audit's
BINARY_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".gguf",
    ".ckpt",
    ".npy",
    ".npz",
    ".arrow",
    ".parquet",
    ".so",
    ".pyc",
    ".png",
    ".jpg",
)
#: the shortest printable run of a binary file that is shown (of one in those formats)
MIN_RUN, MIN_RUN_BINARY_FORMAT = 8, 32
_RUNS = {
    n: (re.compile(rb"[\t\n\r\x20-\x7e]{%d,}" % n), re.compile(rb"(?:[\t\n\r\x20-\x7e]\x00){%d,}" % n))
    for n in (MIN_RUN, MIN_RUN_BINARY_FORMAT)
}
#: read first within their kind: what the agent did
_TRACE = ("trajectory.jsonl", "transcript.jsonl", "agent.log")
_CODE = (".py", ".sh", ".ipynb", ".yaml", ".yml", ".toml", ".cfg", ".js", ".r", ".jl")
#: each kind's share of what is shown while all have pieces left
SHARES = {"trace": 0.3, "calls": 0.25, "code": 0.25, "other": 0.2}
_ORDER = {k: i for i, k in enumerate(SHARES)}


@dataclass(frozen=True)
class Piece:
    """One located text the judge is shown: bytes ``start`` to ``end`` of ``file`` (``end`` None: a text that is
    not a byte range of a file, such as a decoded run or the submissions' metadata)."""

    file: str
    text: str
    start: int = 0
    end: int | None = None

    @property
    def where(self) -> str:
        """What a verdict quotes as the location."""
        return self.file if self.end is None else f"{self.file} [bytes {self.start}-{self.end}]"

    @property
    def size(self) -> int:
        """The file's bytes this piece shows."""
        return 0 if self.end is None else self.end - self.start


@dataclass(frozen=True)
class Unshown:
    """Bytes ``start`` to ``end`` of ``file`` (``end`` None: to an end that was not measured) the judge was not
    shown, and why."""

    file: str
    start: int
    end: int | None
    why: str

    @property
    def size(self) -> int:
        return 0 if self.end is None else self.end - self.start

    def __str__(self) -> str:
        return f"{self.file}: bytes {self.start}-{'' if self.end is None else self.end} ({self.why})"


@dataclass
class Evidence:
    """The pieces in the order they are shown, what gathering could not take, and the binary files (named with
    their size and the printable runs shown of them: their other bytes are not text)."""

    pieces: list[Piece] = field(default_factory=list)
    unshown: list[Unshown] = field(default_factory=list)
    binary: list[str] = field(default_factory=list)
    #: (a piece, the piece of the same text shown in its place): a conversation that every model call sends
    #: again, a file copied, is read once
    same: list[tuple[Piece, Piece]] = field(default_factory=list)


def kind_of(where: str) -> str:
    """The kind of evidence a location is (a key of :data:`SHARES`)."""
    if where.startswith("llm gateway call"):
        return "calls"
    name = where.rsplit("/", 1)[-1].split(" (", 1)[0]
    return "trace" if name in _TRACE else "code" if name.lower().endswith(_CODE) else "other"


def gather(
    result: ResultRecord,
    *,
    part_chars: int = CONTEXT_CHARS,
    total_bytes: int = EVIDENCE_BYTES,
    budget_s: float | None = AUDIT_BUDGET_S,
) -> Evidence:
    """The run's evidence, every text whole, in pieces of at most ``part_chars`` characters."""
    if part_chars < 1000:
        raise ValueError("a piece of evidence needs room for at least 1,000 characters")
    row, meta = result["row"], result.get("meta", {}) or {}
    sources = [Source(Path(row["workspace"]), skip_top=HARNESS_FILES)]
    if meta.get("tmp_dir"):
        sources.append(Source(Path(meta["tmp_dir"]), "/tmp/"))
    extra: Iterable[tuple[str, str, bytes]] = ()
    if meta.get("watch_dir") and Path(meta["watch_dir"]).is_dir():  # files deleted or changed before the end
        extra = seen_files(Path(meta["watch_dir"]), sources)
    gateway: dict[str, Any] = meta["llm_gateway"] if isinstance(meta.get("llm_gateway"), dict) else {}
    if gateway.get("record_dir"):
        from autorl.gateway.record import call_texts

        extra = itertools.chain(extra, call_texts(Path(gateway["record_dir"])))
    out = Evidence()
    budget = Budget(budget_s)
    by_kind: dict[str, list[Piece]] = {k: [] for k in SHARES}
    decoded: dict[str, list[Piece]] = {k: [] for k in SHARES}  # shown first within their kind
    held = {k: 0 for k in SHARES}
    seen: dict[bytes, Piece] = {}
    # the decoys and cover files still as the harness planted them are the harness's files, not the agent's
    planted = as_planted(meta.get("decoys"), Path(row["workspace"]))
    for blob in agent_blobs(sources, budget, extra):
        if blob.where in planted:
            continue
        kind = kind_of(blob.where)
        out.unshown += [Unshown(blob.where, g.start, g.end, g.why) for g in blob.gaps]
        out.unshown += _recorded_cut(blob)
        pieces = list(_pieces(blob, part_chars, out))
        room = int(total_bytes * SHARES[kind]) - held[kind]
        for piece in pieces:
            if not piece.text.strip():  # nothing to read
                continue
            digest = hashlib.sha256(piece.text.encode(errors="replace")).digest()
            if digest in seen:
                out.same.append((piece, seen[digest]))
                continue
            seen[digest] = piece
            if piece.size > room:
                out.unshown.append(
                    Unshown(
                        piece.file, piece.start, piece.end, f"past the judge's reading limit of {total_bytes >> 20} MiB"
                    )
                )
                continue
            room -= max(piece.size, len(piece.text))
            held[kind] += max(piece.size, len(piece.text))
            (decoded if piece.end is None else by_kind)[kind].append(piece)
    if budget.spent:
        out.unshown.append(
            Unshown(
                "(files not reached)", 0, None, f"the evidence walk stopped at its time budget ({budget.seconds:.0f} s)"
            )
        )
    out.unshown += [Unshown(where, 0, None, "could not be read") for where in budget.unscanned]
    out.pieces = _in_shares({k: decoded[k] + by_kind[k] for k in SHARES})
    subs = [
        {
            k: s.get(k)
            for k in ("submission_id", "status", "path", "kind", "score", "submitted_at", "note", "config", "error")
        }
        for s in result.get("submissions", [])
        if isinstance(s, dict)
    ]
    if subs:
        out.pieces.append(Piece("submissions (metadata)", json.dumps(subs, default=str)[:part_chars]))
    return out


def _pieces(blob: Blob, part_chars: int, out: Evidence) -> Iterator[Piece]:
    """``blob`` as pieces: decoded runs first, then its text in parts (the printable runs of a binary)."""
    data = blob.data
    if b"\x00" not in data:
        text = data.decode("utf-8", errors="replace")
        for run in decoded_runs(text):
            yield Piece(run.where(blob.where), run.text[:part_chars])
        yield from _text_parts(blob.where, data, blob.start, part_chars)
        return
    formatted = blob.name.lower().endswith(BINARY_SUFFIXES) or blob.where.lower().endswith(BINARY_SUFFIXES)
    ascii_run, utf16_run = _RUNS[MIN_RUN_BINARY_FORMAT if formatted else MIN_RUN]
    runs = sorted(
        [(m.start(), 1, m.group().decode("ascii")) for m in ascii_run.finditer(data)]
        + [(m.start(), 2, m.group().decode("utf-16-le")) for m in utf16_run.finditer(data)]
    )
    out.binary.append(f"{blob.where} (bytes {blob.start}-{blob.start + len(data)}: {len(runs)} printable run(s) shown)")
    group: list[tuple[int, int, str]] = []
    used = 0
    for start, width, text in runs:  # width: bytes per character
        for at in range(0, len(text), part_chars):  # a run longer than a piece is cut
            part = text[at : at + part_chars]
            if group and used + len(part) > part_chars:
                yield _binary_piece(blob, group)
                group, used = [], 0
            group.append((start + at * width, start + (at + len(part)) * width, part))
            used += len(part) + 1
    if group:
        yield _binary_piece(blob, group)


def _binary_piece(blob: Blob, group: list[tuple[int, int, str]]) -> Piece:
    return Piece(
        blob.where,
        "\n".join(t for *_, t in group),
        blob.start + group[0][0],
        blob.start + max(end for _, end, _ in group),
    )


def _text_parts(where: str, data: bytes, offset: int, part_chars: int) -> Iterator[Piece]:
    """``data`` in parts of at most ``part_chars`` bytes (so as many characters), cut after a line end in the
    part's second half, else between two UTF-8 characters."""
    start = 0
    while start < len(data):
        end = min(len(data), start + part_chars)
        if end < len(data):
            nl = data.rfind(b"\n", start + part_chars // 2, end)
            if nl >= 0:
                end = nl + 1
            else:
                while end > start + 1 and data[end] & 0xC0 == 0x80:  # not inside a character
                    end -= 1
        yield Piece(where, data[start:end].decode("utf-8", errors="replace"), offset + start, offset + end)
        start = end


def _recorded_cut(blob: Blob) -> list[Unshown]:
    """A model call the gateway recorded cut (its body over the record's limit): the part it did not keep."""
    if not blob.where.startswith("llm gateway call"):
        return []
    m = re.match(rb'\{"truncated": true, "chars": (\d+)', blob.data)
    if m is None:
        return []
    from autorl.gateway.record import BODY_LIMIT

    return [Unshown(blob.where, BODY_LIMIT, int(m.group(1)), "characters the gateway's record did not keep")]


def _in_shares(by_kind: dict[str, list[Piece]]) -> list[Piece]:
    """Every piece, the next always from the kind furthest below its share of what was taken so far."""
    taken = {k: 0 for k in by_kind}
    left = {k: list(reversed(v)) for k, v in by_kind.items()}
    out = []
    while any(left.values()):
        kind = min((k for k in left if left[k]), key=lambda k: (taken[k] / SHARES[k], _ORDER[k]))
        piece = left[kind].pop()
        taken[kind] += max(piece.size, len(piece.text))
        out.append(piece)
    return out
