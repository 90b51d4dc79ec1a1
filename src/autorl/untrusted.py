"""The one doorway for files an agent could have written: workspace files, logs, transcripts, checkpoints.

Everything under a workspace is hostile input for the processes outside the sandbox. Reading it goes through
these functions, which:

- resolve a path beneath a trusted root one component at a time, never following a symbolic link (not at the
  end, not in between), so that a planted link cannot point a reader at the grader's store or at ``/dev/zero``;
- open only regular files (``O_NONBLOCK`` first, so that a FIFO cannot hang the reader, then ``fstat``);
- read at most a given number of bytes (a sparse or growing file cannot fill memory);
- turn parse errors, excessive nesting and undecodable bytes into :class:`UntrustedFileError`.

Example::

    from autorl import untrusted
    usage = untrusted.read_json(workspace, "llm_usage.json", limit=1 << 20)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from autorl.errors import AutorlError

__all__ = [
    "MAX_JSON_DEPTH",
    "JsonlStats",
    "UntrustedFileError",
    "iter_jsonl",
    "open_beneath",
    "open_dir_beneath",
    "parse_json",
    "read_bytes",
    "read_json",
    "read_tail",
    "read_text",
    "sha256",
    "walk_files",
]

#: Deepest nesting accepted in agent-written JSON; a record of ours never needs more.
MAX_JSON_DEPTH = 64

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


class UntrustedFileError(AutorlError):
    """An agent-written file that is absent, not a regular file, reached through a link, or malformed."""


def _parts(relpath: str | os.PathLike[str]) -> list[str]:
    text = os.fspath(relpath)
    if "\x00" in text:
        raise UntrustedFileError("path contains a NUL byte")
    parts = [p for p in PurePosixPath(text).parts if p not in ("", ".")]
    if not parts or parts[0] == "/" or ".." in parts:
        raise UntrustedFileError(f"{text!r} is not a relative path beneath its root")
    return parts


def _open(name: str | Path, flags: int, dir_fd: int | None, shown: str) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise UntrustedFileError(f"{shown!r} does not exist") from None
    except OSError as exc:  # ELOOP / ENOTDIR: a link on the way; EACCES; ENXIO: a socket
        raise UntrustedFileError(f"{shown!r} cannot be opened safely ({exc.strerror})") from None


@contextlib.contextmanager
def _dir_beneath(root: Path, names: list[str], shown: str) -> Iterator[int]:
    """A descriptor of the directory ``root/names...``, reached one component at a time, no link followed."""
    fds = [_open(root, _DIR_FLAGS, None, shown)]
    try:
        for name in names:
            fds.append(_open(name, _DIR_FLAGS, fds[-1], shown))
        yield fds[-1]
    finally:
        for fd in reversed(fds):
            os.close(fd)


@contextlib.contextmanager
def open_dir_beneath(root: Path, relpath: str | os.PathLike[str]) -> Iterator[int]:
    """A read-only descriptor of the directory ``root/relpath``, no link followed on the way or at the end.

    ``root`` itself is trusted (the harness made it); every component under it is not.
    """
    with _dir_beneath(root, _parts(relpath), os.fspath(relpath)) as fd:
        yield fd


@contextlib.contextmanager
def open_beneath(root: Path, relpath: str | os.PathLike[str]) -> Iterator[int]:
    """A read-only descriptor of the regular file ``root/relpath``, no link followed on the way.

    ``root`` itself is trusted (the harness made it); every component under it is not.
    """
    parts = _parts(relpath)
    shown = os.fspath(relpath)
    with _dir_beneath(root, parts[:-1], shown) as dir_fd:
        fd = _open(parts[-1], _FILE_FLAGS, dir_fd, shown)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UntrustedFileError(f"{shown!r} is not a regular file")
            os.set_blocking(fd, True)
            yield fd
        finally:
            os.close(fd)


def _chunks(fd: int, limit: int) -> Iterator[bytes]:
    """The next ``limit`` bytes of ``fd`` (fewer at its end), a MiB at most at a time."""
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return
        yield chunk
        left -= len(chunk)


def _read_fd(fd: int, limit: int) -> bytes:
    return b"".join(_chunks(fd, limit))


def sha256(root: Path, relpath: str | os.PathLike[str], *, limit: int) -> str:
    """The hex sha256 of the file's first ``limit`` bytes, read in chunks (a large file is never held whole)."""
    digest = hashlib.sha256()
    with open_beneath(root, relpath) as fd:
        for chunk in _chunks(fd, limit):
            digest.update(chunk)
    return digest.hexdigest()


def read_bytes(root: Path, relpath: str | os.PathLike[str], *, limit: int) -> bytes:
    """At most ``limit`` bytes from the start of the file."""
    with open_beneath(root, relpath) as fd:
        return _read_fd(fd, limit)


def read_tail(root: Path, relpath: str | os.PathLike[str], *, limit: int) -> bytes:
    """At most the last ``limit`` bytes of the file (for log tails)."""
    with open_beneath(root, relpath) as fd:
        size = os.fstat(fd).st_size
        if size > limit:
            os.lseek(fd, size - limit, os.SEEK_SET)
        return _read_fd(fd, limit)


def read_text(root: Path, relpath: str | os.PathLike[str], *, limit: int) -> str:
    """The file's text, undecodable bytes replaced, at most ``limit`` bytes of it."""
    return read_bytes(root, relpath, limit=limit).decode("utf-8", errors="replace")


def _depth_ok(value: Any, max_depth: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > max_depth:
                return False
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, depth + 1) for c in children)
    return True


def parse_json(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse agent-written JSON; malformed, truncated or too deeply nested input is an error, never a crash."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UntrustedFileError(f"not valid JSON ({str(exc)[:80]})") from None
    # a document with no more than max_depth opening brackets cannot nest deeper: the walk is for the others
    opened = text.count(b"[") + text.count(b"{") if isinstance(text, bytes) else text.count("[") + text.count("{")
    if opened > max_depth and not _depth_ok(value, max_depth):
        raise UntrustedFileError(f"JSON nested deeper than {max_depth}")
    return value


def read_json(root: Path, relpath: str | os.PathLike[str], *, limit: int, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The parsed JSON document; a file larger than ``limit`` is refused, not truncated."""
    data = read_bytes(root, relpath, limit=limit + 1)
    if len(data) > limit:
        raise UntrustedFileError(f"{os.fspath(relpath)!r} is larger than {limit} bytes")
    return parse_json(data, max_depth=max_depth)


@dataclass
class JsonlStats:
    """What :func:`iter_jsonl` skipped, so that a reader can say so."""

    bad_lines: int = 0
    truncated: bool = False


def iter_jsonl(
    root: Path,
    relpath: str | os.PathLike[str],
    *,
    limit: int,
    max_line: int = 1 << 20,
    stats: JsonlStats | None = None,
    tail: bool = False,
) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file (its first, or with ``tail`` its last, ``limit`` bytes).

    Lines that are not JSON objects, too long or too deep are skipped and counted in ``stats``.
    """
    stats = stats if stats is not None else JsonlStats()
    data = (read_tail if tail else read_bytes)(root, relpath, limit=limit + 1)
    if len(data) > limit:
        stats.truncated = True
        data = data[-limit:] if tail else data[:limit]
    lines = data.split(b"\n")
    if stats.truncated:  # the cut line is partial
        lines = lines[1:] if tail else lines[:-1]
    for line in lines:
        if not line.strip():
            continue
        if len(line) > max_line:
            stats.bad_lines += 1
            continue
        try:
            value = parse_json(line)
        except UntrustedFileError:
            stats.bad_lines += 1
            continue
        if isinstance(value, dict):
            yield value
        else:
            stats.bad_lines += 1


def walk_files(root: Path, *, max_files: int = 100_000, max_depth: int = 64) -> Iterator[tuple[str, os.stat_result]]:
    """Every regular file under ``root`` as (relative path, stat), links never followed.

    Read each with :func:`read_bytes` (which resolves the path again beneath ``root``, so a file swapped for
    a link in between is refused). Stops after ``max_files`` files; skips trees deeper than ``max_depth``.
    """
    count = 0
    for dirpath, dirnames, filenames, dir_fd in os.fwalk(root, follow_symlinks=False):
        rel = os.path.relpath(dirpath, root)
        depth = 0 if rel == "." else rel.count(os.sep) + 1
        if depth >= max_depth:
            dirnames.clear()
        for name in filenames:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            count += 1
            if count > max_files:
                return
            yield (name if rel == "." else os.path.join(rel, name)), st
