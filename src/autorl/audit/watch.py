"""A record of the files an agent had during its run, not only at its end.

While the agent runs, the runner lists its writable trees (workspace, ``/tmp``) every few seconds and keeps a
copy of each small file it has not seen in that state before (content-addressed by sha256), outside the
agent's reach. The audit scans the copies of files that are gone or changed at the end, so deleting a file
before the run ends does not hide it. The cost is capped: the number of files per listing, the size of a
copied file, the bytes copied in all and the entries in the listing.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from autorl import untrusted
from autorl.procs.ticker import Ticker

#: seconds between two listings (``AUTORL_WATCH_INTERVAL_S`` overrides it)
INTERVAL_S = 10.0
MAX_FILES_PER_PASS = 20_000
MAX_COPY_BYTES = 256 * 1024
MAX_COPIED_BYTES = 64 * 2**20
MAX_ENTRIES = 200_000
LISTING = "listing.jsonl"


def interval_from_env() -> float:
    raw = os.environ.get("AUTORL_WATCH_INTERVAL_S", "")
    try:
        value = float(raw) if raw else INTERVAL_S
    except ValueError:
        return INTERVAL_S
    return value if value > 0 else INTERVAL_S


class Watcher(Ticker):
    """Lists ``sources`` ((label, root) pairs) every ``interval`` seconds into ``out_dir`` until stopped."""

    def __init__(
        self,
        sources: Sequence[tuple[str, Path]],
        out_dir: Path,
        interval: float = INTERVAL_S,
        seen: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        """``seen``: files (where -> size, mtime_ns) taken as already recorded in that state (not read)."""
        super().__init__("autorl-watch", interval)
        self.sources = list(sources)
        self.out_dir = out_dir
        self.passes = 0
        self.entries = 0
        self.copied_bytes = 0
        self._seen: dict[str, tuple[int, int]] = dict(seen or {})
        (out_dir / "blobs").mkdir(parents=True, exist_ok=True, mode=0o700)
        self._listing = (out_dir / LISTING).open("a", encoding="utf-8")

    def stop(self, timeout: float = 60.0) -> None:
        super().stop(timeout)
        self._listing.close()

    def tick(self) -> None:
        self.scan_once()

    def scan_once(self) -> None:
        self.passes += 1
        now = time.time()
        for label, root in self.sources:
            if not root.is_dir():
                continue
            for rel, st in untrusted.walk_files(root, max_files=MAX_FILES_PER_PASS):
                if self.stopping or self.entries >= MAX_ENTRIES:
                    return
                where = label + rel
                state = (st.st_size, st.st_mtime_ns)
                if self._seen.get(where) == state:
                    continue
                self._seen[where] = state
                self._record(now, where, root, rel, st.st_size)
        self._listing.flush()

    def _record(self, now: float, where: str, root: Path, rel: str, size: int) -> None:
        digest = None
        if size <= MAX_COPY_BYTES and self.copied_bytes + size <= MAX_COPIED_BYTES:
            try:
                data = untrusted.read_bytes(root, rel, limit=MAX_COPY_BYTES)
            except untrusted.UntrustedFileError:
                return
            digest = hashlib.sha256(data).hexdigest()
            blob = self.out_dir / "blobs" / digest
            try:
                fd = os.open(blob, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                self.copied_bytes += len(data)
        entry = {"t": round(now, 3), "where": where, "size": size, "sha256": digest}
        self._listing.write(json.dumps(entry) + "\n")
        self.entries += 1


def read_listing(watch_dir: Path) -> Iterator[dict[str, Any]]:
    """The listing's entries (written by the runner; parsed defensively all the same)."""
    try:
        yield from untrusted.iter_jsonl(watch_dir, LISTING, limit=256 * 2**20)
    except untrusted.UntrustedFileError:
        return
