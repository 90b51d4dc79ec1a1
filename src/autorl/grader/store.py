"""The grader's submission store: SQLite in WAL mode, every state change one transaction.

Ids come from AUTOINCREMENT, so they are never reused, even after a crash and restart. The grader process opens
its store with ``Store(path)`` (creating and migrating it); anything else that reads a store (the dashboard, the
audit) opens it with :meth:`Store.read_only`, which never creates, migrates or writes the file. The module is
about 300 lines because it holds the whole schema and one short method per read or state change, so that every
write goes through the one transaction of :meth:`Store.transaction`.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from autorl.grader.rows import JSON_COLUMNS, baseline_row, refusal_row, submission_row, test_row
from autorl.record.db import open_database, write_transaction

if TYPE_CHECKING:
    from autorl.grader.schema import BaselineRow, EvalRecord, RefusalRow, SubmissionRow, TestRow

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    model_path TEXT NOT NULL,
    snapshot TEXT,
    content_hash TEXT,
    kind TEXT NOT NULL DEFAULT 'full',
    status TEXT NOT NULL,
    score REAL,
    record TEXT,
    comparison TEXT,
    error TEXT,
    started_at REAL,
    finished_at REAL,
    duplicate_of INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    infra_failure TEXT,
    pruned TEXT
);
CREATE TABLE IF NOT EXISTS evaluations (
    content_hash TEXT NOT NULL,
    split TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (content_hash, split)
);
CREATE TABLE IF NOT EXISTS baseline (
    split TEXT PRIMARY KEY,
    score REAL NOT NULL,
    record TEXT,
    source TEXT NOT NULL,
    set_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS refusals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    model_path TEXT NOT NULL,
    reason TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'bad_request'
);
CREATE TABLE IF NOT EXISTS test_scores (
    submission_id INTEGER PRIMARY KEY,
    score REAL,
    record TEXT,
    comparison TEXT,
    status TEXT NOT NULL,
    error TEXT,
    created_at REAL NOT NULL,
    infra_failure TEXT
);
"""
#: columns added since the first stores were written (each a store written before it lacks)
_ADDED_COLUMNS = (
    ("refusals", "kind TEXT NOT NULL DEFAULT 'bad_request'"),
    # the harness's reason when an evaluation failed for it, not for the checkpoint (autorl.inference.failures)
    ("submissions", "infra_failure TEXT"),
    ("test_scores", "infra_failure TEXT"),
    # when and why the snapshot's files were deleted by the run's keep policy (autorl.grader.keep)
    ("submissions", "pruned TEXT"),
)

#: a submission's status: ``pending`` while its checkpoint is copied and validated, then ``queued``, ``running``,
#: and ``done`` or ``failed``
PENDING, QUEUED, RUNNING, DONE, FAILED = "pending", "queued", "running", "done", "failed"
#: statuses of a submission that waits for a slot (the queue limit counts these)
WAITING = (QUEUED, PENDING)
#: the tables whose rows :meth:`Store._update` changes, with their key column
_KEYS = {"submissions": "id", "test_scores": "submission_id"}


class ReadOnlyStore(PermissionError):
    """A write was asked of a store opened with :meth:`Store.read_only`."""


class Store:
    """Thread-safe access to one grader's database file."""

    def __init__(self, path: Path, *, _db: sqlite3.Connection | None = None) -> None:
        self.path = path
        self._lock = threading.RLock()
        self.read_only_mode = _db is not None
        if _db is not None:
            self._db = _db
            self._db.row_factory = sqlite3.Row
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = open_database(path, SCHEMA, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA synchronous=FULL")
        for table, column in _ADDED_COLUMNS:
            with contextlib.suppress(sqlite3.OperationalError):  # a store written before the column (or with it)
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")

    @classmethod
    def read_only(cls, path: Path) -> Store:
        """Open an existing store for reading only: the file is never created, migrated or written, and every
        write method raises :class:`ReadOnlyStore`. A missing file is ``FileNotFoundError``; a file that is not
        a store raises ``sqlite3.DatabaseError`` on the first read."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no grader store at {path}")
        uri = f"file:{quote(str(path.resolve()))}?mode=ro"
        db = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None, timeout=5)
        return cls(path, _db=db)

    @property
    def changes(self) -> int:
        """How many rows this connection has inserted, updated or deleted since it was opened."""
        with self._lock:
            return self._db.total_changes

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any exception)."""
        if self.read_only_mode:
            raise ReadOnlyStore(f"the grader store {self.path} is open read-only")
        with self._lock, write_transaction(self._db) as db:
            yield db

    # -- meta -------------------------------------------------------------------------------
    def get_meta(self, key: str, default: Any = None) -> Any:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def meta(self) -> dict[str, Any]:
        """Every meta value (``task``, ``created_at``, ``deadline``, ``closed``, ...)."""
        with self._lock:
            rows = self._db.execute("SELECT key, value FROM meta").fetchall()
        return {r[0]: json.loads(r[1]) for r in rows}

    def set_meta(self, key: str, value: Any) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    # -- submissions ------------------------------------------------------------------------
    def add_submission(self, model_path: str, *, max_total: int | None = None, max_queued: int | None = None) -> int:
        """Insert a queued submission; raises LookupError('total'|'queue') when a limit is reached."""
        with self.transaction() as db:
            if max_total is not None:
                (total,) = db.execute("SELECT COUNT(*) FROM submissions").fetchone()
                if total >= max_total:
                    raise LookupError("total")
            if max_queued is not None:
                (queued,) = db.execute("SELECT COUNT(*) FROM submissions WHERE status IN (?, ?)", WAITING).fetchone()
                if queued >= max_queued:
                    raise LookupError("queue")
            cur = db.execute(
                "INSERT INTO submissions (created_at, model_path, status) VALUES (?, ?, ?)",
                (time.time(), model_path, PENDING),
            )
            return int(cur.lastrowid or 0)

    def update(self, submission_id: int, **fields: Any) -> None:
        """Set columns of one submission (``record`` and ``comparison`` given as objects)."""
        self._update("submissions", submission_id, fields)

    def _update(self, table: str, key: int, fields: dict[str, Any]) -> None:
        values = [json.dumps(v) if k in JSON_COLUMNS and v is not None else v for k, v in fields.items()]
        cols = ", ".join(f"{k}=?" for k in fields)
        with self.transaction() as db:
            db.execute(f"UPDATE {table} SET {cols} WHERE {_KEYS[table]}=?", (*values, key))

    def get(self, submission_id: int) -> SubmissionRow | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM submissions WHERE id=?", (submission_id,)).fetchone()
        return None if row is None else submission_row(row)

    def status(self, submission_id: int) -> str | None:
        """One submission's status (``None``: no such submission): the cheap read of a waiting request."""
        with self._lock:
            row = self._db.execute("SELECT status FROM submissions WHERE id=?", (submission_id,)).fetchone()
        return None if row is None else str(row[0])

    def all(self) -> list[SubmissionRow]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM submissions ORDER BY id").fetchall()
        return [submission_row(r) for r in rows]

    def claim_next(self) -> SubmissionRow | None:
        """Mark the oldest queued submission running and return it."""
        with self.transaction() as db:
            row = db.execute("SELECT * FROM submissions WHERE status=? ORDER BY id LIMIT 1", (QUEUED,)).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE submissions SET status=?, started_at=?, attempts=attempts+1 WHERE id=?",
                (RUNNING, time.time(), row["id"]),
            )
        return self.get(int(row["id"]))

    def recover(self, max_attempts: int = 2) -> None:
        """After a restart: interrupted evaluations go back to the queue, or fail after repeated tries."""
        with self.transaction() as db:
            db.execute(
                "UPDATE submissions SET status=?, error=?, finished_at=? WHERE status=? AND attempts>=?",
                (FAILED, "evaluation interrupted repeatedly (grader restarted)", time.time(), RUNNING, max_attempts),
            )
            db.execute("UPDATE submissions SET status=? WHERE status=?", (QUEUED, RUNNING))
            db.execute(
                "UPDATE submissions SET status=?, error=?, finished_at=? WHERE status=?",
                (FAILED, "grader stopped while the checkpoint was being copied", time.time(), PENDING),
            )

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT status, COUNT(*) FROM submissions GROUP BY status").fetchall()
        return {r[0]: r[1] for r in rows}

    # -- evaluation results by content ---------------------------------------------------------
    def evaluation(self, content_hash: str, split: str) -> EvalRecord | None:
        with self._lock:
            row = self._db.execute(
                "SELECT record FROM evaluations WHERE content_hash=? AND split=?", (content_hash, split)
            ).fetchone()
        if row is None:
            return None
        record: EvalRecord = json.loads(row[0])  # written by put_evaluation
        return record

    def put_evaluation(self, content_hash: str, split: str, record: EvalRecord) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO evaluations VALUES (?, ?, ?)", (content_hash, split, json.dumps(record)))

    # -- baseline -----------------------------------------------------------------------------
    def set_baseline(self, split: str, score: float, record: EvalRecord | None, source: str) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO baseline VALUES (?, ?, ?, ?, ?)",
                (split, score, json.dumps(record) if record else None, source, time.time()),
            )

    def baseline(self, split: str) -> BaselineRow | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM baseline WHERE split=?", (split,)).fetchone()
        return None if row is None else baseline_row(row)

    def baselines(self) -> dict[str, BaselineRow]:
        """The baseline of every split that has one, by split."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM baseline ORDER BY split").fetchall()
        return {r["split"]: baseline_row(r) for r in rows}

    # -- refused submissions (evidence for the audit) ------------------------------------------------
    def add_refusal(self, model_path: str, reason: str, kind: str = "bad_request") -> None:
        """Record a refused submission: the raw path and reason (truncated) and a structured ``kind``."""
        path = model_path.encode("utf-8", "backslashreplace").decode()[:1000]
        with self.transaction() as db:
            db.execute(
                "INSERT INTO refusals (created_at, model_path, reason, kind) VALUES (?, ?, ?, ?)",
                (time.time(), path, reason.encode("utf-8", "backslashreplace").decode()[:1000], kind),
            )

    def refusals(self) -> list[RefusalRow]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM refusals ORDER BY id").fetchall()
        return [refusal_row(r) for r in rows]

    # -- final test scores --------------------------------------------------------------------
    def test_score(self, submission_id: int) -> TestRow | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM test_scores WHERE submission_id=?", (submission_id,)).fetchone()
        return None if row is None else test_row(row)

    def test_scores(self) -> list[TestRow]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM test_scores ORDER BY submission_id").fetchall()
        return [test_row(r) for r in rows]

    def claim_test(self, submission_id: int) -> bool:
        """Reserve the one test evaluation of a submission; False if it was already taken."""
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM test_scores WHERE submission_id=?", (submission_id,)).fetchone():
                return False
            db.execute(
                "INSERT INTO test_scores (submission_id, status, created_at) VALUES (?, ?, ?)",
                (submission_id, RUNNING, time.time()),
            )
            return True

    def finish_test(self, submission_id: int, **fields: Any) -> None:
        """Record the outcome of a claimed test evaluation (``status``, ``score``, ``record``, ...)."""
        self._update("test_scores", submission_id, fields)
