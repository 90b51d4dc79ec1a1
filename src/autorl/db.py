"""SQLite as autorl uses it (the ledger, the grader's store): one write transaction shape for both."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["write_transaction"]


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
