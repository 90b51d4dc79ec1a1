"""Grader-owned copies of submissions, taken by descriptor from the output directory pinned at start.

The agent controls every name under its output directory and may change any of them at any moment, so
nothing here resolves a path through the file system: the output directory is opened once when the grader
starts (:class:`PinnedDir`), each submission is reached from that descriptor one component at a time with
``O_NOFOLLOW``, and the copy walks descriptors too. Only directories and regular files are taken (a link,
FIFO, device or socket anywhere is refused before it is opened for reading), each file is read up to the
size it had when opened (a file that grows or shrinks meanwhile is refused), the byte and file limits are
checked before each file is read, and the content hash is computed in the same pass. Validation then runs
on the copy (:func:`autorl.grader.validation.validate_checkpoint`), so what is validated is what is evaluated.

Files are copied, not hard-linked: a hard link shares the inode, and an in-place write by the agent would
change the "snapshot" too.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from autorl.errors import CheckpointTooLarge, InvalidCheckpointError, PathRefused, UsageError
from autorl.evaluation.identity import manifest_hash
from autorl.grader.validation import (
    FULL,
    LORA,
    Limits,
    check_name,
    refuse_by_magic,
    refuse_by_name,
)

if TYPE_CHECKING:
    from autorl.grader.schema import SnapshotColumns

MANIFEST = ".autorl_manifest.json"
_CHUNK = 1 << 22
_ZEROS = bytes(_CHUNK)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: space left free in the grader's store whatever the submissions' sizes
_RESERVE_BYTES = 1 << 30


class PinnedDir:
    """A directory opened once (device and inode fixed); later renames or links at its path change nothing."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        st = os.fstat(self.fd)
        self.dev, self.ino = st.st_dev, st.st_ino
        #: the spellings of this directory a submission may start with
        self.aliases = tuple(dict.fromkeys([os.path.abspath(self.path), os.path.realpath(self.path)]))

    def replaced_by(self) -> str | None:
        """What now sits at the pinned path if it is no longer the pinned directory: 'a link', 'another directory'."""
        try:
            st = os.lstat(self.path)
        except OSError:
            return "nothing"
        if (st.st_dev, st.st_ino) == (self.dev, self.ino):
            return None
        if stat.S_ISLNK(st.st_mode):
            return "a link"
        return "another directory" if stat.S_ISDIR(st.st_mode) else "a file"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


@dataclass(frozen=True)
class Snapshot:
    """A submission as the grader holds it: the one form it keeps from intake to the evaluation worker.

    ``path`` is the grader's own copy (regular files only, read-only, ``snapshots/<id>`` in the store), ``kind``
    what validation found it to be (:data:`~autorl.grader.validation.FULL` or
    :data:`~autorl.grader.validation.LORA`), ``digest`` the hash of its content (equal bytes anywhere give an
    equal digest). Made once, when a validated copy takes its place in the store (:meth:`Grader.submit
    <autorl.grader.core.Grader.submit>`); kept as its submission's columns (:meth:`to_row`) and sent to the
    worker in its job the same way (:meth:`from_row` reads both).
    """

    path: Path
    kind: str
    digest: str

    def to_row(self) -> SnapshotColumns:
        """The submission row's columns that hold the snapshot."""
        return {"snapshot": str(self.path), "kind": self.kind, "content_hash": self.digest}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Snapshot:
        """The snapshot of a submission row (or a job) that has one; ``ValueError`` when it has none."""
        path, kind, digest = row.get("snapshot"), row.get("kind"), row.get("content_hash")
        if not (isinstance(path, str) and path and kind in (FULL, LORA) and isinstance(digest, str) and digest):
            raise ValueError("no snapshot recorded")
        return cls(Path(path), str(kind), digest)


class Copied(NamedTuple):
    """What :func:`take_snapshot` copied: the content digest, each file's relative name and size, and what the
    agent's folder held then (``source``: each entry's relative name, ``""`` the folder itself, with its inode,
    size and modification time; directories' sizes are -1): what tells, later, that the folder is unchanged."""

    digest: str
    files: dict[str, int]
    source: dict[str, tuple[int, int, int]] = {}


def open_submission(root: PinnedDir, parts: tuple[str, ...]) -> int:
    """A descriptor of ``root/parts...``, reached without following any link; the caller closes it."""
    fd = os.dup(root.fd)
    try:
        for i, part in enumerate(parts):
            shown = "/".join(parts[: i + 1])
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise _refusal(fd, part, shown, exc) from None
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _refusal(dir_fd: int, name: str, shown: str, exc: OSError) -> Exception:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return UsageError(f"model_path {shown!r} does not exist inside the output directory")
    if stat.S_ISLNK(st.st_mode):
        return PathRefused(f"{shown} is a link; the grader follows no links (copy the files instead)")
    if not stat.S_ISDIR(st.st_mode):
        return UsageError(f"model_path {shown!r} is not a directory")
    return UsageError(f"model_path {shown!r} cannot be opened: {exc.strerror}")


def take_snapshot(
    source_fd: int,
    target: Path,
    limits: Limits = Limits(),
    *,
    before_copy: Callable[[str], None] | None = None,
) -> Copied:
    """Copy the directory open at ``source_fd`` into ``target`` (which must not exist) and hash it.

    ``before_copy(relative_name)`` is called after each file is opened and checked, before its bytes are
    read (tests use it to change the live file at the worst moment). On any refusal ``target`` is removed.
    """
    target.mkdir(mode=0o700)
    source: dict[str, tuple[int, int, int]] = {"": _identity(os.fstat(source_fd))}
    try:
        manifest, sizes = _copy_tree(source_fd, target, limits, before_copy, source)
        if not sizes:
            raise InvalidCheckpointError("the checkpoint directory is empty")
        digest = manifest_hash(manifest)
        with open(target / MANIFEST, "x") as f:
            json.dump({"sha256": manifest, "hash": digest}, f, indent=1)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return Copied(digest, sizes, source)


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    return (
        st.st_ino,
        st.st_size if stat.S_ISREG(st.st_mode) else -1,
        st.st_mtime_ns if stat.S_ISREG(st.st_mode) else 0,
    )


def _copy_tree(
    source_fd: int,
    target: Path,
    limits: Limits,
    before_copy: Callable[[str], None] | None,
    source: dict[str, tuple[int, int, int]] | None = None,
) -> tuple[dict[str, str], dict[str, int]]:
    manifest: dict[str, str] = {}
    sizes: dict[str, int] = {}
    total = 0
    free = shutil.disk_usage(target).free - _RESERVE_BYTES
    stack: list[tuple[int, str, int]] = [(os.dup(source_fd), "", 0)]
    try:
        while stack:
            dfd, prefix, depth = stack[-1]
            try:
                names = sorted(os.listdir(dfd))
            except OSError as exc:
                raise InvalidCheckpointError(f"{prefix or '.'} cannot be listed: {exc.strerror}") from None
            stack.pop()
            try:
                for name in names:
                    rel = prefix + name
                    check_name(name, rel)
                    try:
                        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                    except FileNotFoundError:
                        raise InvalidCheckpointError(f"{rel} disappeared while it was being copied") from None
                    if stat.S_ISLNK(st.st_mode):
                        raise PathRefused(f"{rel} is a link; the grader follows no links (copy the file instead)")
                    if stat.S_ISDIR(st.st_mode):
                        if depth + 1 > limits.max_depth:
                            raise InvalidCheckpointError(
                                f"the checkpoint is nested deeper than {limits.max_depth} levels"
                            )
                        cfd = _open_checked(name, dfd, rel, st, _DIR_FLAGS)
                        stack.append((cfd, rel + "/", depth + 1))
                        if source is not None:
                            source[rel] = _identity(st)
                        (target / rel).mkdir(mode=0o700)
                        continue
                    if not stat.S_ISREG(st.st_mode):
                        raise InvalidCheckpointError(f"{rel} is not a regular file (a FIFO, device or socket)")
                    refuse_by_name(rel)
                    if len(sizes) + 1 > limits.max_files:
                        raise InvalidCheckpointError(f"the checkpoint has more than {limits.max_files} files")
                    if name.endswith(".json") and st.st_size > limits.max_json_bytes:
                        raise CheckpointTooLarge(f"{rel} is larger than {limits.max_json_bytes} bytes")
                    total += st.st_size
                    if total > limits.max_bytes:
                        raise CheckpointTooLarge(f"the checkpoint is larger than {limits.max_bytes} bytes")
                    if total > free:
                        raise CheckpointTooLarge("the checkpoint does not fit in the grader's store")
                    ffd = _open_checked(name, dfd, rel, st, _FILE_FLAGS)
                    try:
                        if before_copy is not None:
                            before_copy(rel)
                        manifest[rel] = _copy_file(ffd, st.st_size, target / rel, rel)
                    finally:
                        os.close(ffd)
                    sizes[rel] = st.st_size
                    if source is not None:
                        source[rel] = _identity(st)
            finally:
                os.close(dfd)
    finally:
        for dfd, _, _ in stack:
            os.close(dfd)
    return manifest, sizes


def _open_checked(name: str, dir_fd: int, rel: str, st: os.stat_result, flags: int) -> int:
    """Open ``name`` and make sure it is still the entry that was checked (nothing swapped in between)."""
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            raise InvalidCheckpointError(f"{rel} was replaced while it was being copied") from None
        raise InvalidCheckpointError(f"{rel} cannot be opened: {exc.strerror}") from None
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or stat.S_IFMT(now.st_mode) != stat.S_IFMT(st.st_mode):
        os.close(fd)
        raise InvalidCheckpointError(f"{rel} was replaced while it was being copied")
    return fd


def _copy_file(fd: int, size: int, dst: Path, rel: str) -> str:
    """Copy exactly ``size`` bytes (runs of zeros become holes); returns the sha256 of the content."""
    h = hashlib.sha256()
    out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        remaining = size
        first = True
        while remaining > 0:
            block = os.read(fd, min(_CHUNK, remaining))
            if not block:
                raise InvalidCheckpointError(f"{rel} shrank while it was being copied")
            if first:
                refuse_by_magic(rel, block)
                first = False
            h.update(block)
            if block == _ZEROS[: len(block)]:
                os.lseek(out, len(block), os.SEEK_CUR)
            else:
                view = memoryview(block)
                while view:
                    view = view[os.write(out, view) :]
            remaining -= len(block)
        if os.read(fd, 1):
            raise InvalidCheckpointError(f"{rel} grew while it was being copied")
        os.ftruncate(out, size)
        os.fsync(out)
        os.fchmod(out, 0o400)
    finally:
        os.close(out)
    return h.hexdigest()
