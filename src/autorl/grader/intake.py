"""The grader at the workspace boundary: a submission taken in by descriptor and validated as copied, and the
``scores.json`` mirror written back by descriptor. Everything on the agent's side is hostile input: nothing here
follows a link the agent can plant or reads through a path it can replace."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from autorl.errors import GraderError, PathRefused, UsageError
from autorl.grader.snapshot import PinnedDir, open_submission, take_snapshot
from autorl.grader.validation import Checkpoint, Limits, submission_parts, validate_checkpoint


class Taken(NamedTuple):
    """A submission taken in: its copy's content digest, what validation found, the agent's folder (its path
    below the output directory) and what it held when copied (:attr:`Copied.source
    <autorl.grader.snapshot.Copied.source>`)."""

    digest: str
    checkpoint: Checkpoint
    parts: tuple[str, ...]
    source: dict[str, tuple[int, int, int]]


def take_in(
    raw_path: Any,
    *,
    output: PinnedDir,
    workspace: Path,
    incoming: Path,
    limits: Limits,
    before_copy: Callable[[str], None] | None = None,
) -> Taken:
    """The submission ``raw_path`` copied by descriptor from the pinned output directory into ``incoming``, then
    validated as copied. On any refusal ``incoming`` is removed and the error raised."""
    replaced = output.replaced_by()
    if replaced == "a link":
        raise PathRefused(
            f"the output directory {output.path} was replaced by a link after the run started; "
            "the grader reads only the original directory"
        )
    parts = submission_parts(raw_path, str(workspace), output.aliases)
    try:
        try:
            fd = open_submission(output, parts)
        except UsageError as exc:
            if replaced is None or isinstance(exc, PathRefused):
                raise
            raise UsageError(
                f"{exc} (the output directory was replaced by {replaced} after the run started; "
                "the grader reads only the original one: write checkpoints inside it)"
            ) from None
        try:
            copied = take_snapshot(fd, incoming, limits, before_copy=before_copy)
        finally:
            os.close(fd)
    except OSError as exc:
        shutil.rmtree(incoming, ignore_errors=True)
        raise GraderError(f"could not copy the checkpoint: {exc.strerror or exc}") from None
    try:
        checkpoint = validate_checkpoint(incoming, copied.files)
    except BaseException:
        shutil.rmtree(incoming, ignore_errors=True)
        raise
    return Taken(copied.digest, checkpoint, parts, copied.source)


def write_mirror(workspace: PinnedDir, data: bytes, name: str = "scores.json") -> None:
    """Write ``data`` as a read-only ``name`` in the pinned workspace, for the agent's convenience (nothing reads
    it back). Written under a fresh unpredictable name (``O_EXCL``, no link followed), then renamed over
    ``name``: a link the agent plants there is replaced, never followed. A failure leaves the old file."""
    ws = workspace.fd
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444, dir_fd=ws)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=ws, dst_dir_fd=ws)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=ws)
