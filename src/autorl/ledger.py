"""The results database (SQLite, WAL) and its ``results.csv`` export.

Each finished run writes ``result.json`` into its run directory; that file is the source of truth and
the ledger ingests it idempotently (keyed by run id), so runs from many machines can be merged.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from autorl.errors import ResourceError

#: results.csv columns: the reference harness's, then the uncertainty and test-split figures.
CSV_COLUMNS = (
    "run_id", "timestamp", "task", "agent", "base_model", "baseline", "best_score", "improvement",
    "submissions", "duration_s", "success", "workspace", "improvement_ci95", "p_value", "best_submission",
    "test_baseline", "test_score", "test_improvement", "test_improvement_ci95", "end_reason", "seed",
    "config_hash",
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    timestamp TEXT NOT NULL,
    task TEXT NOT NULL,
    agent TEXT NOT NULL,
    base_model TEXT NOT NULL,
    success INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS submissions (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    submission_id INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, submission_id)
);
CREATE INDEX IF NOT EXISTS runs_task ON runs(task, agent);
"""


class Ledger:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        try:
            self._db = sqlite3.connect(str(path), isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise ResourceError(f"cannot open the results database {path}: {exc}") from None

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def ingest(self, result: dict[str, Any]) -> None:
        """Insert or replace one run (and its submissions) from its result record."""
        row = result["row"]
        with self._tx() as db:
            db.execute("DELETE FROM submissions WHERE run_id=?", (row["run_id"],))
            db.execute(
                "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                (row["run_id"], row["timestamp"], row["task"], row["agent"], row["base_model"],
                 int(bool(row["success"])), json.dumps(result)),
            )
            for sub in result.get("submissions", []):
                db.execute(
                    "INSERT INTO submissions VALUES (?, ?, ?)", (row["run_id"], sub["submission_id"], json.dumps(sub))
                )

    def ingest_file(self, path: Path) -> dict[str, Any]:
        try:
            result = json.loads(path.read_text())
            self.ingest(result)
        except (OSError, ValueError, KeyError) as exc:
            raise ResourceError(f"{path} is not a run result: {exc}") from None
        return dict(result)

    def runs(self) -> list[dict[str, Any]]:
        """Every run's full result, oldest first."""
        rows = self._db.execute("SELECT data FROM runs ORDER BY timestamp, run_id").fetchall()
        return [json.loads(r[0]) for r in rows]

    def run(self, run_id: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT data FROM runs WHERE run_id=?", (run_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def rows(self) -> list[dict[str, Any]]:
        return [r["row"] for r in self.runs()]

    def export_csv(self, path: Path) -> Path:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in self.rows():
            writer.writerow({k: _csv_value(row.get(k)) for k in CSV_COLUMNS})
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(buf.getvalue())
        tmp.replace(path)
        return path


def _csv_value(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, (list, tuple)):
        return json.dumps([round(v, 4) if isinstance(v, float) else v for v in value])
    return "" if value is None else value
