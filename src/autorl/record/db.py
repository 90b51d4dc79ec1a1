"""SQLite as autorl uses it (the ledger, the grader's store): one write transaction shape for both."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["open_database", "write_transaction"]


def open_database(
    path: Path, schema: str, *, timeout: float = 30.0, check_same_thread: bool = True
) -> sqlite3.Connection:
    """Open (creating it if needed) a WAL database with ``schema`` applied, safely against other processes
    opening the same new file at the same moment (two runs of a study sharing a node's home): the switch to WAL
    is retried while another connection holds the file (SQLite answers that without its busy timeout), and the
    schema is applied in one ``BEGIN IMMEDIATE`` transaction, which waits for the write lock."""
    db = sqlite3.connect(str(path), isolation_level=None, timeout=timeout, check_same_thread=check_same_thread)
    deadline = time.monotonic() + timeout
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(f"BEGIN IMMEDIATE;\n{schema}\nCOMMIT;")
            return db
        except sqlite3.OperationalError as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                db.close()
                raise
            time.sleep(0.05)


@contextmanager
def write_transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` on a connection opened with ``isolation_level=None``; rolled back on any
    exception, which is raised again. Immediate: the write lock is taken at the start, so two writers queue
    (SQLite's busy timeout) instead of one failing at its first write."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
