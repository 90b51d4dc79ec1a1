"""One agent file's bytes as the audit reads them: the file itself, or what its compression or archive holds
(gzip, bz2, xz, zip, tar; nested up to ``MAX_NESTING`` deep), each piece a :class:`Blob` that says which of
its bytes it holds and which it leaves out (a :class:`Gap`: the middle of a file over the scan limit, the
rest of a stream or member past its cap). A bomb costs only the caps; no parser's surprise gets out.
"""

from __future__ import annotations

import bz2
import io
import lzma
import re
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import IO, Any

from autorl.audit.budget import Budget

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

GZIP, BZ2, XZ, ZIP, TAR = "gzip", "bz2", "xz", "zip", "tar"


@dataclass(frozen=True)
class Gap:
    """Bytes ``start`` to ``end`` of a file or member that no blob of it holds (``end`` None: to an end that
    was not measured), and why."""

    start: int
    end: int | None
    why: str

    def __str__(self) -> str:
        return f"bytes {self.start}-{'' if self.end is None else self.end} ({self.why})"


@dataclass(frozen=True)
class Blob:
    """Bytes of one agent file (or of a member inside it, ``where`` naming both): ``data`` is its bytes from
    ``start`` on; ``gaps`` are the bytes of it that no blob holds."""

    where: str
    name: str
    data: bytes
    start: int = 0
    gaps: tuple[Gap, ...] = ()


def kind_of(head: bytes) -> str | None:
    """The compression or archive format ``head`` (a file's first 512 bytes) starts, if any."""
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


def _sampled(f: IO[bytes], where: str, name: str, size: int | None) -> Iterator[Blob]:
    if size is None or size <= MAX_FILE_BYTES:
        yield Blob(where, name, f.read(MAX_FILE_BYTES))
        return
    tail = max(size - SAMPLE_TAIL_BYTES, SAMPLE_HEAD_BYTES)
    gap = Gap(SAMPLE_HEAD_BYTES, tail, f"a file over {MAX_FILE_BYTES >> 20} MiB is read by its head and tail")
    yield Blob(where, name, f.read(SAMPLE_HEAD_BYTES), 0, (gap,))
    f.seek(tail)
    yield Blob(where, name, f.read(SAMPLE_TAIL_BYTES), tail)


def blobs(f: IO[bytes], where: str, name: str, size: int | None, budget: Budget, depth: int = 0) -> Iterator[Blob]:
    """The blobs of one file object: itself, or what its compression or archive holds (recursively)."""
    head = f.read(512)
    kind = kind_of(head) if depth < MAX_NESTING else None
    if kind is None and (size is None or size <= MAX_FILE_BYTES):  # the common case: one read
        gaps = (
            (Gap(0, size, f"compressed or archived more than {MAX_NESTING} levels deep: read as it is"),)
            if depth >= MAX_NESTING and kind_of(head)
            else ()
        )
        yield Blob(where, name, head + f.read(MAX_FILE_BYTES - len(head)), 0, gaps)
        return
    f.seek(0)
    if kind in (GZIP, BZ2, XZ):
        try:
            data = decompress(f, kind, MAX_DECOMPRESSED + 1)
        except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
            data = b""
        if data:
            inner = re.sub(r"\.(gz|tgz|bz2|tbz2?|xz|txz)$", "", name) or name
            inside = list(
                blobs(
                    io.BytesIO(data[:MAX_DECOMPRESSED]),
                    where,
                    inner,
                    min(len(data), MAX_DECOMPRESSED),
                    budget,
                    depth + 1,
                )
            )
            over = len(data) > MAX_DECOMPRESSED  # the stream goes on past its cap
            yield from _ending(
                inside,
                (Gap(MAX_DECOMPRESSED, None, f"decompressed past the {MAX_DECOMPRESSED >> 20} MiB cap"),)
                if over
                else (),
            )
            return
        f.seek(0)
    elif kind in (ZIP, TAR):
        members = _zip_members if kind == ZIP else _tar_members
        try:
            yield from members(f, where, depth, budget)
            return
        except (zipfile.BadZipFile, tarfile.TarError, OSError, ValueError, EOFError):
            f.seek(0)
    yield from _sampled(f, where, name, size)


def _ending(inside: list[Blob], gaps: tuple[Gap, ...]) -> list[Blob]:
    """``inside`` with ``gaps`` (what was left out after its last byte) added to its last blob."""
    if gaps and inside:
        inside[-1] = replace(inside[-1], gaps=(*inside[-1].gaps, *gaps))
    return inside


def _member(data: bytes, size: int, at: str, name: str, depth: int, budget: Budget) -> list[Blob]:
    """The blobs of an archive member of ``size`` bytes of which ``data`` was read."""
    inside = list(blobs(io.BytesIO(data), at, name, len(data), budget, depth + 1))
    cut = Gap(
        len(data),
        size,
        f"past the caps of {MAX_MEMBER_BYTES >> 20} MiB per member, {MAX_ARCHIVE_BYTES >> 20} MiB per archive",
    )
    return _ending(inside, (cut,) if len(data) < size else ())


#: members past the caps listed one by one, then together
_LISTED = 1000


def _zip_members(f: IO[bytes], where: str, depth: int, budget: Budget) -> Iterator[Blob]:
    total = 0
    with zipfile.ZipFile(f) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        for count, info in enumerate(infos):
            at = f"{where}:{info.filename[:200]}"
            if count >= MAX_MEMBERS or total >= MAX_ARCHIVE_BYTES or not budget.left():
                yield from _past_caps(infos[count:], where)
                return
            try:
                with zf.open(info) as member:
                    data = member.read(min(MAX_MEMBER_BYTES, MAX_ARCHIVE_BYTES - total))
            except Exception:  # encrypted, unsupported or corrupt member: the others still count
                budget.unscanned.append(at)
                continue
            total += len(data)
            yield from _member(data, info.file_size, at, info.filename, depth, budget)


def _past_caps(infos: list[zipfile.ZipInfo], where: str) -> Iterator[Blob]:
    why = f"past the caps of {MAX_MEMBERS} members, {MAX_ARCHIVE_BYTES >> 20} MiB per archive, or the time budget"
    for info in infos[:_LISTED]:
        yield Blob(f"{where}:{info.filename[:200]}", info.filename, b"", 0, (Gap(0, info.file_size, why),))
    if len(infos) > _LISTED:
        yield Blob(
            f"{where}:({len(infos) - _LISTED} more members)",
            "",
            b"",
            0,
            (Gap(0, sum(i.file_size for i in infos[_LISTED:]), why),),
        )


def _tar_members(f: IO[bytes], where: str, depth: int, budget: Budget) -> Iterator[Blob]:
    total = 0
    with tarfile.open(fileobj=f, mode="r:") as tf:
        for count, member in enumerate(tf):
            if count >= MAX_MEMBERS or total >= MAX_ARCHIVE_BYTES or not budget.left():
                yield Blob(
                    f"{where}:(members from the {count + 1}th on)",
                    "",
                    b"",
                    0,
                    (
                        Gap(
                            0,
                            None,
                            f"past the caps of {MAX_MEMBERS} members, {MAX_ARCHIVE_BYTES >> 20} MiB per "
                            "archive, or the time budget",
                        ),
                    ),
                )
                return
            if not member.isreg():
                continue
            handle = tf.extractfile(member)
            if handle is None:
                continue
            data = handle.read(min(MAX_MEMBER_BYTES, MAX_ARCHIVE_BYTES - total))
            total += len(data)
            yield from _member(data, member.size, f"{where}:{member.name[:200]}", member.name, depth, budget)
