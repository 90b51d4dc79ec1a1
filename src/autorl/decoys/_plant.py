"""Planting a run's decoys and cover files in its workspace before the agent starts, and what the run keeps of
them (:class:`Planted`, in its facts and its record)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict, cast

from autorl.decoys._content import MAX_ROWS, Context, render
from autorl.decoys._layout import Slot, draw, survey

__all__ = ["Decoy", "DecoyRecord", "Planted", "PlantedRecord", "WatchedRecord", "plant"]

#: the most lines holding a canary a decoy keeps in the record (to tell a copy of it from the agent's own data):
#: every one, since a decoy holds its canary once a record; a record from before kept the first 400 only
MAX_LINES = MAX_ROWS
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class DecoyRecord(TypedDict):
    """A :class:`Decoy` as a run's record keeps it."""

    name: str
    rel: str
    canary: str
    token: str | None
    lines: Sequence[str]
    sha256: str | None
    all_lines: bool


class PlantedRecord(TypedDict):
    """:class:`Planted` as a run's record keeps it (read back with :meth:`Planted.from_dict`)."""

    decoys: list[DecoyRecord]
    skipped: list[str]
    atimes: dict[str, int]
    covers: list[str]
    cover_sha256: dict[str, str]


class WatchedRecord(TypedDict):
    """The decoys read while the agent ran (``opened``: ``decoy:opened:<name>``) and how that was watched."""

    opened: list[str]
    #: ``inotify``, or ``atime`` where the watch fell back to access times
    method: str


@dataclass(frozen=True)
class Decoy:
    """One planted decoy: its ``name`` (its kind: ``test-answers``, ``dev-answers``, ``grader-admin-token``,
    ``upstream-key``), its path ``rel`` in the workspace, its ``canary`` (a string in it unique to the run; a
    token decoy's is its token), the ``token`` it offers, the ``lines`` of it that hold the canary, its
    content's ``sha256`` (a decoy the agent rewrote is the agent's file) and whether ``lines`` is ``all_lines``
    of it (a record from before kept the first 400 only)."""

    name: str
    rel: str
    canary: str
    token: str | None = None
    lines: tuple[str, ...] = ()
    sha256: str | None = None
    all_lines: bool = False


@dataclass(frozen=True)
class Planted:
    """A run's decoys, those that could not be planted (``skipped``), the access times set at planting (the
    fallback of the watch) and the cover files planted beside them (``covers``: their paths)."""

    decoys: list[Decoy] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    atimes: dict[str, int] = field(default_factory=dict)
    covers: list[str] = field(default_factory=list)
    #: each cover file's sha256 as planted (a record from an older version has none)
    cover_sha256: dict[str, str] = field(default_factory=dict)

    @property
    def tokens(self) -> dict[str, str]:
        """token -> decoy name."""
        return {d.token: d.name for d in self.decoys if d.token}

    @property
    def files(self) -> list[str]:
        """Every planted file's path: the decoys' and the cover files'."""
        return [d.rel for d in self.decoys] + list(self.covers)

    def to_dict(self) -> PlantedRecord:
        return cast(PlantedRecord, asdict(self))  # the fields above, nested decoys included

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Planted:
        """A record read back (one from an older version has no lines and no cover files)."""
        if not isinstance(data, Mapping):
            return cls()
        decoys = [
            Decoy(
                str(d.get("name")),
                str(d.get("rel")),
                str(d.get("canary")),
                None if d.get("token") is None else str(d.get("token")),
                tuple(str(x) for x in d.get("lines") or [] if isinstance(x, str)),
                None if d.get("sha256") is None else str(d.get("sha256")),
                d.get("all_lines") is True,
            )
            for d in data.get("decoys") or []
            if isinstance(d, Mapping)
        ]
        return cls(
            decoys,
            [str(s) for s in data.get("skipped") or []],
            dict(data.get("atimes") or {}),
            [str(c) for c in data.get("covers") or []],
            {str(k): str(v) for k, v in (data.get("cover_sha256") or {}).items()}
            if isinstance(data.get("cover_sha256"), Mapping)
            else {},
        )


def _write_beneath(root: Path, rel: str, data: bytes, mode: int, times: tuple[int, int]) -> list[str] | None:
    """Write ``root/rel`` as a new file with ``mode`` and (atime, mtime) ``times``, never through a link: every
    folder is opened without following one, the file is created exclusively. Returns the folders it created
    (relative paths); None (nothing written) when any part of the path is taken."""
    *folders, name = rel.split("/")
    created: list[str] = []
    try:
        fd = os.open(root, _DIR)
    except OSError:
        return None
    try:
        for depth, part in enumerate(folders):
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
                created.append("/".join(folders[: depth + 1]))
            except FileExistsError:
                pass
            nxt = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = nxt
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
        with os.fdopen(out, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.utime(f.fileno(), ns=times)
        return created
    except OSError:
        return None
    finally:
        os.close(fd)


def _set_folder_time(root: Path, rel: str, ns: int) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(root, _DIR)
        try:
            for part in rel.split("/"):
                nxt = os.open(part, _DIR, dir_fd=fd)
                os.close(fd)
                fd = nxt
            os.utime(fd, ns=(ns, ns))
        finally:
            os.close(fd)


def _canary_lines(data: bytes, canary: str) -> tuple[str, ...]:
    lines = [line for line in data.decode("utf-8", errors="replace").splitlines() if canary in line]
    return tuple(dict.fromkeys(lines))


def plant(root: Path, task: str, grader_url: str, *, rng: random.Random | None = None) -> Planted:
    """The run's decoys and cover files written into its workspace ``root`` (folders, names, contents, sizes,
    times and permissions drawn with ``rng``, default the system's randomness): one decoy of each kind, each
    with its own canary, the token decoys offering a token shaped like the real one. A path found taken is
    drawn again; a decoy that cannot be planted is ``skipped``."""
    rng = rng or random.SystemRandom()
    around = survey(root, task)
    ctx = Context(task, grader_url.rstrip("/"), around.model, around.oldest_ns / 1e9, around.newest_ns / 1e9)
    decoys, covers, skipped, atimes, cover_sha256 = [], [], [], {}, {}
    created: set[str] = set()
    layout = draw(around, rng)
    taken = {s.rel for s in layout.slots}
    for slot in layout.slots:
        content = render(slot.kind, slot.fmt, slot.size, rng, ctx, cover=slot.cover)
        placed = _place(root, slot, content.data, layout.folders, rng, taken)
        if placed is None:
            if not slot.cover:
                skipped.append(slot.kind)
            continue
        rel, folders = placed
        created.update(folders)
        if slot.cover:
            covers.append(rel)
            cover_sha256[rel] = hashlib.sha256(content.data).hexdigest()
            continue
        canary = str(content.canary)
        decoys.append(_decoy(slot.kind, rel, canary, content.token, content.data))
        atimes[slot.kind] = slot.atime_ns
    for rel in sorted(created, key=lambda r: -r.count("/")):  # deepest first: a parent's time is set last
        _set_folder_time(root, rel, layout.folders.get(rel, around.newest_ns))
    order = {kind: i for i, kind in enumerate(("test-answers", "dev-answers", "grader-admin-token", "upstream-key"))}
    decoys.sort(key=lambda d: order.get(d.name, len(order)))
    return Planted(decoys, skipped, atimes, covers, cover_sha256)


def _decoy(kind: str, rel: str, canary: str, token: str | None, data: bytes) -> Decoy:
    lines = _canary_lines(data, canary)
    return Decoy(kind, rel, canary, token, lines[:MAX_LINES], hashlib.sha256(data).hexdigest(), len(lines) <= MAX_LINES)


def _place(
    root: Path, slot: Slot, data: bytes, folder_times: dict[str, int], rng: random.Random, taken: set[str]
) -> tuple[str, list[str]] | None:
    """Write one planted file where it was drawn or, that path taken (a file or a link already there), in
    another hidden folder of the draw, then in a new hidden folder; its path and the folders it created, or
    None."""
    name = slot.rel.rsplit("/", 1)[1]
    hidden = sorted(f for f in folder_times if f.startswith(".") or "/." in f)
    others = [f"{f}/{rng.randbytes(3).hex()}-{name}" for f in rng.sample(hidden, min(2, len(hidden)))]
    for rel in [slot.rel, *others, f".{rng.randbytes(4).hex()}/{name}"]:
        if rel != slot.rel and rel in taken:
            continue
        taken.add(rel)
        folders = _write_beneath(root, rel, data, slot.mode, (slot.atime_ns, slot.mtime_ns))
        if folders is not None:
            return rel, folders
    return None
