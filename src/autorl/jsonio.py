"""JSON and JSON Lines files written whole or not at all, and JSON Lines read back with errors that name the line.

For the harness's and the plugins' own files: results, caches, prepared training data. Every writer goes
through one temp-file-and-rename, so a reader never sees half a file and a crash leaves no stray temp
file behind. Files an agent wrote are hostile input and are read through :mod:`autorl.untrusted`, not here.

Example, in a benchmark plugin::

    from autorl.jsonio import read_jsonl, write_jsonl_atomic

    def prepare_train_data(self, target_dir):
        write_jsonl_atomic(target_dir / "train.jsonl", ({"question": q, "answer": a} for q, a in pairs))

    rows = read_jsonl(mirror / "train.jsonl")  # ResourceError "…/train.jsonl: line 7 is not JSON (…)"
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from autorl.errors import ResourceError

__all__ = ["read_jsonl", "write_json_atomic", "write_jsonl_atomic", "write_text_atomic"]


def write_text_atomic(path: Path, text: str, *, mode: int = 0o600, if_changed: bool = False) -> None:
    """Write ``text`` to ``path`` whole or not at all.

    The text goes to a fresh temp file in the same directory (an unpredictable name created with
    ``O_EXCL``, so no link is followed), which is then renamed over ``path``: a link at ``path`` is replaced,
    never written through. The file gets ``mode`` (private to its owner unless told otherwise); missing
    parent directories are created. On any error the temp file is removed and the error propagates.
    With ``if_changed``, a regular file (not a link) that already holds exactly ``text`` is left as it is,
    so idempotent data preparation keeps a read-only copy in place.
    """
    path = Path(path)
    data = text.encode("utf-8")
    if if_changed and _holds(path, data):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if mode != 0o600:
                os.fchmod(f.fileno(), mode)
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _holds(path: Path, data: bytes) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        return stat.S_ISREG(st.st_mode) and st.st_size == len(data) and f.read() == data


def write_json_atomic(path: Path, data: Any, *, mode: int = 0o600) -> None:
    """Write ``data`` as indented JSON (values JSON lacks, such as paths, as their ``str``), atomically as
    :func:`write_text_atomic` does."""
    write_text_atomic(path, json.dumps(data, indent=2, default=str), mode=mode)


def write_jsonl_atomic(path: Path, rows: Iterable[Any], *, mode: int = 0o600, if_changed: bool = False) -> None:
    """Write ``rows`` as JSON Lines (one compact JSON value a line, each line ending in a newline; values JSON
    lacks as their ``str``), as :func:`write_text_atomic` does (``mode``, ``if_changed``). ``rows`` may be a
    generator: it is consumed before the file appears."""
    text = "".join(json.dumps(row, default=str) + "\n" for row in rows)
    write_text_atomic(path, text, mode=mode, if_changed=if_changed)


def read_jsonl(path: Path) -> list[Any]:
    """The values of a JSON Lines file, in order; blank lines are skipped.

    Raises:
        ResourceError: the file cannot be read, is not UTF-8, or a line is not JSON; the message names the
            file and the line number.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ResourceError(f"{path}: cannot be read as UTF-8 text ({exc})") from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            raise ResourceError(f"{path}: line {n} is not JSON ({exc})") from None
    return rows
