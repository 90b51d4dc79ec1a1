"""What the audit reads: every text the agent could have written, taken through :mod:`autorl.untrusted`.

The sources are the agent's workspace, its ``/tmp`` (a host directory the runner gave the sandbox), the
grader's snapshots of its submissions and the copies of files the runner saw during the run (deleted ones
too). No link is followed (the targets of links are either scanned where they lie or not the agent's
writing); text is taken from inside gzip, bz2, xz, zip and tar files (decompressed bytes and members capped,
so a bomb costs nothing) and from the printable runs of binary files (like ``strings``); a file larger than
the scan limit is sampled (its head and tail), never skipped. The scan keeps to the audit's time budget and
survives any file: what it could not read is noted in the budget (``unscanned``).

A few lines over 300: the limits, the budget and every way a file becomes text (plain, archive, compressed,
binary) are one walk, each reader bounded by the same budget.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import re
import tarfile
import time
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from autorl import untrusted

#: a file up to this size is scanned whole; a larger one by its first and last bytes
MAX_FILE_BYTES = 64 * 2**20
SAMPLE_HEAD_BYTES = 48 * 2**20
SAMPLE_TAIL_BYTES = 16 * 2**20
#: decompressed bytes taken from one compressed stream, one archive member, one archive in all
MAX_DECOMPRESSED = 64 * 2**20
MAX_MEMBER_BYTES = 16 * 2**20
MAX_ARCHIVE_BYTES = 256 * 2**20
MAX_MEMBERS = 2000
MAX_NESTING = 3
#: files walked per scanned root (workspace, /tmp, one snapshot)
MAX_FILES = 200_000
#: default wall-clock budget of one audit
AUDIT_BUDGET_S = 900.0
#: what the harness writes into a workspace; the agent's own files are everything else
HARNESS_FILES = ("description.md", "instructions.md", "scores.json", "result.json", "grading_server.log")


class Budget:
    """The audit's wall-clock budget: checks stop taking new files once it is spent, and say so."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.seconds = seconds
        self.spent = False
        self.unscanned: list[str] = []  # files that could not be read or parsed

    def left(self) -> bool:
        """Whether time is left (once spent, it stays spent)."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.spent = True
        return not self.spent


@dataclass(frozen=True)
class Source:
    """A tree of agent-written files: ``label`` prefixes its evidence (``/tmp/``, ``snapshot 3/``)."""

    root: Path
    label: str = ""
    skip_top: tuple[str, ...] = ()


@dataclass(frozen=True)
class Text:
    """Text taken from one agent file (or a member inside it): ``where`` is the evidence, ``name`` decides
    whether the download check reads it."""

    where: str
    name: str
    text: str


GZIP, BZ2, XZ, ZIP, TAR = "gzip", "bz2", "xz", "zip", "tar"
_TEXT_RUN = re.compile(rb"[\t\n\r\x20-\x7e]{4,}")
_UTF16_RUN = re.compile(rb"(?:[\t\n\r\x20-\x7e]\x00){4,}")


def _kind(head: bytes) -> str | None:
    if head[:2] == b"\x1f\x8b":
        return GZIP
    if head[:3] == b"BZh":
        return BZ2
    if head[:6] == b"\xfd7zXZ\x00":
        return XZ
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return ZIP
    if head[257:262] == b"ustar":
        return TAR
    return None


def as_text(data: bytes) -> str:
    """Text as the n-gram check reads it: decoded when it looks like text, else its printable runs
    (ASCII and UTF-16), the way ``strings`` finds text in a binary file."""
    if b"\x00" not in data:
        return data.decode("utf-8", errors="ignore")
    runs = [m.decode("ascii") for m in _TEXT_RUN.findall(data)]
    runs += [m.decode("utf-16-le", errors="ignore") for m in _UTF16_RUN.findall(data)]
    return "\n".join(runs)


def decompress(f: IO[bytes], kind: str, limit: int) -> bytes:
    """At most ``limit`` decompressed bytes (concatenated streams followed), read in pieces: a bomb stops at
    the cap."""

    def new() -> Any:
        if kind == GZIP:
            return zlib.decompressobj(wbits=47)
        return bz2.BZ2Decompressor() if kind == BZ2 else lzma.LZMADecompressor()

    out = bytearray()
    dec = new()
    data = b""
    while len(out) < limit:
        want = limit - len(out)
        if kind == GZIP:
            if not data:
                data = f.read(1 << 20)
                if not data:
                    break
            out += dec.decompress(data, want)
            data = dec.unconsumed_tail
            if dec.eof:  # a following gzip member is part of the same file
                data = dec.unused_data + data
                if data[:2] != b"\x1f\x8b":
                    break
                dec = new()
            continue
        if dec.eof:
            rest = dec.unused_data
            if not rest:
                break
            dec = new()
            out += dec.decompress(rest, max_length=want)
            continue
        if dec.needs_input:
            data = f.read(1 << 20)
            if not data:
                break
            out += dec.decompress(data, max_length=want)
        else:
            out += dec.decompress(b"", max_length=want)
    return bytes(out[:limit])


def _sample(f: IO[bytes], size: int | None) -> bytes:
    if size is None or size <= MAX_FILE_BYTES:
        return f.read(MAX_FILE_BYTES)
    head = f.read(SAMPLE_HEAD_BYTES)
    f.seek(max(size - SAMPLE_TAIL_BYTES, SAMPLE_HEAD_BYTES))
    return head + b"\n" + f.read(SAMPLE_TAIL_BYTES)


def _content(f: IO[bytes], where: str, name: str, size: int | None, depth: int, budget: Budget) -> Iterator[Text]:
    """The texts in one file object: itself, or what its compression or archive holds (recursively)."""
    head = f.read(512)
    kind = _kind(head) if depth < MAX_NESTING else None
    if kind is None and (size is None or size <= MAX_FILE_BYTES):  # the common case: one read
        yield Text(where, name, as_text(head + f.read(MAX_FILE_BYTES - len(head))))
        return
    f.seek(0)
    if kind in (GZIP, BZ2, XZ):
        try:
            data = decompress(f, kind, MAX_DECOMPRESSED)
        except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
            data = b""
        if data:
            inner = re.sub(r"\.(gz|tgz|bz2|tbz2?|xz|txz)$", "", name) or name
            yield from _content(io.BytesIO(data), where, inner, len(data), depth + 1, budget)
            return
        f.seek(0)
    elif kind in (ZIP, TAR):
        members = _zip_members if kind == ZIP else _tar_members
        try:
            yield from members(f, where, depth, budget)
            return
        except (zipfile.BadZipFile, tarfile.TarError, OSError, ValueError, EOFError):
            f.seek(0)
    yield Text(where, name, as_text(_sample(f, size)))


def _zip_members(f: IO[bytes], where: str, depth: int, budget: Budget) -> Iterator[Text]:
    total = 0
    with zipfile.ZipFile(f) as zf:
        for info in zf.infolist()[:MAX_MEMBERS]:
            if info.is_dir() or total >= MAX_ARCHIVE_BYTES or not budget.left():
                continue
            try:
                with zf.open(info) as member:
                    data = member.read(min(MAX_MEMBER_BYTES, MAX_ARCHIVE_BYTES - total))
            except Exception:  # encrypted, unsupported or corrupt member: the others still count
                budget.unscanned.append(f"{where}:{info.filename[:200]}")
                continue
            total += len(data)
            yield from _content(io.BytesIO(data), f"{where}:{info.filename[:200]}", info.filename, len(data),
                                depth + 1, budget)


def _tar_members(f: IO[bytes], where: str, depth: int, budget: Budget) -> Iterator[Text]:
    total = 0
    with tarfile.open(fileobj=f, mode="r:") as tf:
        for count, member in enumerate(tf):
            if count >= MAX_MEMBERS or total >= MAX_ARCHIVE_BYTES or not budget.left():
                break
            if not member.isreg():
                continue
            handle = tf.extractfile(member)
            if handle is None:
                continue
            data = handle.read(min(MAX_MEMBER_BYTES, MAX_ARCHIVE_BYTES - total))
            total += len(data)
            yield from _content(io.BytesIO(data), f"{where}:{member.name[:200]}", member.name, len(data),
                                depth + 1, budget)


def file_texts(root: Path, rel: str, where: str, budget: Budget) -> Iterator[Text]:
    """The texts of the agent file ``root/rel``, opened beneath ``root`` without following a link."""
    try:
        with untrusted.open_beneath(root, rel) as fd, os.fdopen(os.dup(fd), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            yield from _content(f, where, os.path.basename(rel), size, 0, budget)
    except (untrusted.UntrustedFileError, OSError, MemoryError, RecursionError):
        budget.unscanned.append(where)


def blob_texts(data: bytes, where: str, name: str, budget: Budget) -> Iterator[Text]:
    """The texts of agent bytes held in memory (a copy the runner kept, a recorded model call)."""
    yield from _content(io.BytesIO(data), where, name, len(data), 0, budget)


def agent_texts(sources: Sequence[Source], budget: Budget, extra: Iterable[tuple[str, str, bytes]] = ()) -> Iterator[Text]:
    """Every text in every source, then in ``extra`` (where, name, bytes); stops when the budget is spent."""
    for source in sources:
        if not source.root.is_dir():
            continue
        try:
            for rel, _st in untrusted.walk_files(source.root, max_files=MAX_FILES):
                if not budget.left():
                    return
                if os.sep not in rel and rel in source.skip_top:
                    continue
                try:
                    yield from file_texts(source.root, rel, source.label + rel, budget)
                except Exception:  # a parser's surprise on one file never ends the audit
                    budget.unscanned.append(source.label + rel)
        except OSError:
            budget.unscanned.append(source.label or str(source.root))
    for where, name, data in extra:
        if not budget.left():
            return
        try:
            yield from blob_texts(data, where, name, budget)
        except Exception:
            budget.unscanned.append(where)


def agent_files(workspace: Path) -> list[Path]:
    """Regular files the agent wrote or downloaded into its workspace (links never followed)."""
    return [workspace / rel for rel, _ in untrusted.walk_files(workspace, max_files=MAX_FILES)
            if os.sep in rel or rel not in HARNESS_FILES]


def digest_beneath(root: Path, rel: str, limit: int = 1 << 30) -> str:
    """sha256 of ``root/rel`` read without following a link; ``missing`` when it is absent or not a file."""
    try:
        return untrusted.sha256(root, rel, limit=limit)
    except (untrusted.UntrustedFileError, OSError):
        return "missing"



def seen_files(watch_dir: Path, sources: Sequence[Source]) -> Iterator[tuple[str, str, bytes]]:
    """Copies the runner kept of files seen during the run that are gone or changed at its end, as
    (evidence, name, bytes); the listing and the copies are the runner's, their content the agent's."""
    from autorl.watch import read_listing

    done: set[tuple[str, str]] = set()
    for entry in read_listing(watch_dir):
        where, digest = str(entry.get("where")), entry.get("sha256")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest) or (where, digest) in done:
            continue
        done.add((where, digest))
        source = next((s for s in sources if s.label and where.startswith(s.label)), None)
        root = source.root if source else next((s.root for s in sources if not s.label), None)
        rel = where[len(source.label):] if source else where
        if root is not None and digest_beneath(root, rel) == digest:
            continue  # still there as it was: scanned with the others
        try:
            data = untrusted.read_bytes(watch_dir / "blobs", digest, limit=MAX_FILE_BYTES)
        except untrusted.UntrustedFileError:
            continue
        yield f"{where} (seen during the run, gone or changed at its end)", os.path.basename(where), data
