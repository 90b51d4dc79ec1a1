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

#: results.csv columns: the reference harness's first (``baseline``, ``best_score``, ``improvement`` and
#: ``success`` are the headline: the dev-selected checkpoint scored once on the hidden test split, paired
#: against the test baseline), then its uncertainty, the test aliases, the dev figures (best of ``dev_k``
#: scored submissions on a split the agent saw: optimistic) and the run's conditions.
CSV_COLUMNS = (
    "run_id", "timestamp", "task", "agent", "base_model", "baseline", "best_score", "improvement",
    "submissions", "duration_s", "success", "workspace", "improvement_ci95", "p_value", "best_submission",
    "test_baseline", "test_score", "test_improvement", "test_improvement_ci95",
    "dev_baseline", "dev_best", "dev_improvement", "dev_improvement_ci95", "dev_k",
    "end_reason", "seed", "config_hash", "sandbox", "audit_flags", "llm_tokens", "llm_cost_usd", "llm_usage_source",
)
#: the dev figures of a row: on the split whose scores the agent saw after every submission
DEV_COLUMNS = ("dev_baseline", "dev_best", "dev_improvement", "dev_improvement_ci95", "dev_k")


def upgrade_row(row: dict[str, Any], submissions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A row recorded before the headline was the test split, in today's meaning (other rows unchanged).

    Such rows held the dev figures under ``baseline``/``best_score``/``improvement``/``improvement_ci95``/
    ``p_value``; they move to the ``dev_*`` columns and the headline is the test figures, or none.
    """
    if "dev_k" in row:
        return row
    out = dict(row)
    out["dev_baseline"] = row.get("baseline")
    out["dev_best"] = row.get("best_score")
    out["dev_improvement"] = row.get("improvement")
    out["dev_improvement_ci95"] = row.get("improvement_ci95")
    out["dev_k"] = sum(1 for s in submissions or [] if s.get("status") == "done" and s.get("score") is not None)
    tested = row.get("test_score") is not None
    out["baseline"] = row.get("test_baseline")
    out["best_score"] = row.get("test_score")
    out["improvement"] = row.get("test_improvement")
    out["improvement_ci95"] = row.get("test_improvement_ci95")
    out["p_value"] = None  # the old p-value was the dev one; the test one was not kept in the row
    out["success"] = bool(row.get("success")) and tested
    out.setdefault("sandbox", None)
    out.setdefault("llm_usage_source", "agent-reported" if row.get("llm_tokens") is not None else None)
    return out


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
CREATE TABLE IF NOT EXISTS audits (
    run_id TEXT NOT NULL,
    flag TEXT NOT NULL,
    severity TEXT NOT NULL,
    detail TEXT NOT NULL,
    evidence TEXT NOT NULL,
    PRIMARY KEY (run_id, flag)
);
CREATE TABLE IF NOT EXISTS live (
    run_id TEXT PRIMARY KEY,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS audit_overrides (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    flag TEXT NOT NULL,
    reason TEXT NOT NULL,
    decided_by TEXT NOT NULL,
    decided_at TEXT NOT NULL
);
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

    def start_run(self, info: dict[str, Any]) -> None:
        """Record a run in progress (run_id, task, agent, base_model, workspace, store_dir, started, deadline)."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO live VALUES (?, ?)", (info["run_id"], json.dumps(info)))

    def end_run(self, run_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM live WHERE run_id=?", (run_id,))

    def update_live(self, run_id: str, **fields: Any) -> None:
        row = self._db.execute("SELECT data FROM live WHERE run_id=?", (run_id,)).fetchone()
        if row:
            self.start_run({**json.loads(row[0]), **fields})

    def live(self) -> list[dict[str, Any]]:
        """Runs started and not yet recorded, newest first."""
        rows = self._db.execute("SELECT data FROM live").fetchall()
        return sorted((json.loads(r[0]) for r in rows), key=lambda d: -float(d.get("started", 0)))

    def ingest(self, result: dict[str, Any]) -> None:
        """Insert or replace one run (and its submissions) from its result record."""
        row = result["row"]
        with self._tx() as db:
            db.execute("DELETE FROM live WHERE run_id=?", (row["run_id"],))
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
            if "audit" in result:
                db.execute("DELETE FROM audits WHERE run_id=?", (row["run_id"],))
                for flag in result["audit"]:
                    db.execute("INSERT OR REPLACE INTO audits VALUES (?, ?, ?, ?, ?)",
                               (row["run_id"], flag["name"], flag["severity"], flag["detail"],
                                json.dumps(flag["evidence"])))

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
        return [_loaded(r[0]) for r in rows]

    def run(self, run_id: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT data FROM runs WHERE run_id=?", (run_id,)).fetchone()
        return _loaded(row[0]) if row else None

    def audit(self, run_id: str) -> list[dict[str, Any]]:
        """The run's flags, each with the human decisions taken on it (latest last)."""
        flags = [
            {"name": f, "severity": sev, "detail": d, "evidence": json.loads(e), "overrides": []}
            for f, sev, d, e in self._db.execute(
                "SELECT flag, severity, detail, evidence FROM audits WHERE run_id=? ORDER BY flag", (run_id,))
        ]
        by_name = {f["name"]: f for f in flags}
        for flag, reason, who, when in self._db.execute(
            "SELECT flag, reason, decided_by, decided_at FROM audit_overrides WHERE run_id=? ORDER BY id", (run_id,)
        ):
            if flag in by_name:
                by_name[flag]["overrides"].append({"reason": reason, "decided_by": who, "decided_at": when})
        return flags

    def override(self, run_id: str, flag: str, reason: str, decided_by: str) -> None:
        import datetime as dt

        if not reason.strip():
            raise ResourceError("an override needs a reason (--reason)")
        if flag not in {f["name"] for f in self.audit(run_id)}:
            known = ", ".join(f["name"] for f in self.audit(run_id)) or "none"
            raise ResourceError(f"run {run_id} has no audit flag {flag!r} (flags: {known})")
        with self._tx() as db:
            db.execute("INSERT INTO audit_overrides (run_id, flag, reason, decided_by, decided_at) VALUES (?, ?, ?, ?, ?)",
                       (run_id, flag, reason, decided_by, dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")))

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for result in self.runs():
            row = dict(result["row"])
            flags = self.audit(row["run_id"])
            row["audit_flags"] = [f"{f['name']}({f['severity']})" for f in flags if not f["overrides"]]
            row["audit_overridden"] = [f["name"] for f in flags if f["overrides"]]
            rows.append(row)
        return rows

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


def _loaded(data: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(data)
    result["row"] = upgrade_row(result["row"], result.get("submissions"))
    return result


def _csv_value(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, (list, tuple)):
        return json.dumps([round(v, 4) if isinstance(v, float) else v for v in value])
    return "" if value is None else value
