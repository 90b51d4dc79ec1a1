"""What the audit reads: every text the agent could have written, taken through :mod:`autorl.untrusted`.

The sources are the agent's workspace, its ``/tmp`` (a host directory the runner gave the sandbox), the
grader's snapshots of its submissions and the copies of files the runner saw during the run (deleted ones
too). No link is followed (the targets of links are either scanned where they lie or not the agent's
writing); each file becomes blobs of bytes through :mod:`autorl.audit.unpack` (what archives and compressed
streams hold, capped; a file larger than the scan limit by its head and tail, never skipped), and each blob
becomes text as ``strings`` would find it (:func:`as_text`). The scan keeps to the audit's time budget and
survives any file: what it could not read is noted in the budget (``unscanned``).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from autorl import untrusted
from autorl.audit.budget import Budget
from autorl.audit.unpack import MAX_FILE_BYTES, Blob, blobs

#: files walked per scanned root (workspace, /tmp, one snapshot)
MAX_FILES = 200_000
#: what the harness writes into a workspace; the agent's own files are everything else
HARNESS_FILES = ("description.md", "instructions.md", "scores.json", "result.json", "grading_server.log")


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


_TEXT_RUN = re.compile(rb"[\t\n\r\x20-\x7e]{4,}")
_UTF16_RUN = re.compile(rb"(?:[\t\n\r\x20-\x7e]\x00){4,}")


def as_text(data: bytes) -> str:
    """Text as the n-gram check reads it: decoded when it looks like text, else its printable runs
    (ASCII and UTF-16), the way ``strings`` finds text in a binary file."""
    if b"\x00" not in data:
        return data.decode("utf-8", errors="ignore")
    runs = [m.decode("ascii") for m in _TEXT_RUN.findall(data)]
    runs += [m.decode("utf-16-le", errors="ignore") for m in _UTF16_RUN.findall(data)]
    return "\n".join(runs)


def file_blobs(root: Path, rel: str, where: str, budget: Budget) -> Iterator[Blob]:
    """The blobs of the agent file ``root/rel``, opened beneath ``root`` without following a link."""
    try:
        with untrusted.open_beneath(root, rel) as fd, os.fdopen(os.dup(fd), "rb") as f:
            yield from blobs(f, where, os.path.basename(rel), os.fstat(f.fileno()).st_size, budget)
    except (untrusted.UntrustedFileError, OSError, MemoryError, RecursionError):
        budget.unscanned.append(where)


def file_texts(root: Path, rel: str, where: str, budget: Budget) -> Iterator[Text]:
    """The texts of the agent file ``root/rel`` (:func:`file_blobs` as text)."""
    return (_text(b) for b in file_blobs(root, rel, where, budget))


def blob_texts(data: bytes, where: str, name: str, budget: Budget) -> Iterator[Text]:
    """The texts of agent bytes held in memory (a copy the runner kept, a recorded model call)."""
    return (_text(b) for b in blobs(io.BytesIO(data), where, name, len(data), budget))


def _text(blob: Blob) -> Text:
    return Text(blob.where, blob.name, as_text(blob.data))


def agent_blobs(
    sources: Sequence[Source], budget: Budget, extra: Iterable[tuple[str, str, bytes]] = ()
) -> Iterator[Blob]:
    """Every blob in every source, then in ``extra`` (where, name, bytes); stops when the budget is spent. A
    source with more than ``MAX_FILES`` files, and a file that cannot be read, are noted in ``budget``."""
    for source in sources:
        if not source.root.is_dir():
            continue
        try:
            for count, (rel, _st) in enumerate(untrusted.walk_files(source.root, max_files=MAX_FILES + 1)):
                if not budget.left():
                    return
                if count == MAX_FILES:
                    budget.unscanned.append(f"{source.label or source.root}: files after the first {MAX_FILES}")
                    break
                if os.sep not in rel and rel in source.skip_top:
                    continue
                try:
                    yield from file_blobs(source.root, rel, source.label + rel, budget)
                except Exception:  # a parser's surprise on one file never ends the audit
                    budget.unscanned.append(source.label + rel)
        except OSError:
            budget.unscanned.append(source.label or str(source.root))
    for where, name, data in extra:
        if not budget.left():
            return
        try:
            yield from blobs(io.BytesIO(data), where, name, len(data), budget)
        except Exception:
            budget.unscanned.append(where)


def agent_texts(
    sources: Sequence[Source], budget: Budget, extra: Iterable[tuple[str, str, bytes]] = ()
) -> Iterator[Text]:
    """Every text in every source, then in ``extra`` (:func:`agent_blobs` as text)."""
    return (_text(b) for b in agent_blobs(sources, budget, extra))


def agent_files(workspace: Path) -> list[Path]:
    """Regular files the agent wrote or downloaded into its workspace (links never followed)."""
    return [
        workspace / rel
        for rel, _ in untrusted.walk_files(workspace, max_files=MAX_FILES)
        if os.sep in rel or rel not in HARNESS_FILES
    ]


def digest_beneath(root: Path, rel: str, limit: int = 1 << 30) -> str:
    """sha256 of ``root/rel`` read without following a link; ``missing`` when it is absent or not a file."""
    try:
        return untrusted.sha256(root, rel, limit=limit)
    except (untrusted.UntrustedFileError, OSError):
        return "missing"


def seen_files(watch_dir: Path, sources: Sequence[Source]) -> Iterator[tuple[str, str, bytes]]:
    """Copies the runner kept of files seen during the run that are gone or changed at its end, as
    (evidence, name, bytes); the listing and the copies are the runner's, their content the agent's."""
    from autorl.audit.watch import read_listing

    done: set[tuple[str, str]] = set()
    for entry in read_listing(watch_dir):
        where, digest = str(entry.get("where")), entry.get("sha256")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest) or (where, digest) in done:
            continue
        done.add((where, digest))
        source = next((s for s in sources if s.label and where.startswith(s.label)), None)
        root = source.root if source else next((s.root for s in sources if not s.label), None)
        rel = where[len(source.label) :] if source else where
        if root is not None and digest_beneath(root, rel) == digest:
            continue  # still there as it was: scanned with the others
        try:
            data = untrusted.read_bytes(watch_dir / "blobs", digest, limit=MAX_FILE_BYTES)
        except untrusted.UntrustedFileError:
            continue
        yield f"{where} (seen during the run, gone or changed at its end)", os.path.basename(where), data
