"""The results database (SQLite, WAL) and its ``results.csv`` export: the one writer of a run's record (the
columns and the row: :mod:`autorl.record.row`).

Each finished run writes ``result.json`` into its run directory (:func:`record_run`); that file is the source of
truth and the ledger ingests it idempotently (keyed by run id), so runs from many machines can be merged
(:func:`ingest_files`).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import IO, Any, cast

from autorl.errors import ResourceError, UsageError
from autorl.jsonio import write_json_atomic
from autorl.record.card import write_card
from autorl.record.db import open_database, write_transaction
from autorl.record.migrate import upgrade_row
from autorl.record.result import RunResult
from autorl.record.row import CSV_COLUMNS, RunRow, judged_headline
from autorl.record.schema import AuditFlag, LedgerRow, LiveRecord, ResultRecord

__all__ = [
    "Ledger",
    "check_result",
    "csv_value",
    "ingest_files",
    "ingest_results",
    "read_result",
    "record_run",
    "write_csv",
]

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
    """The results database at ``path``: finished runs (their whole records), their audit flags and the human
    decisions on them, and the runs in flight (started, not recorded yet)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        try:
            self._db = open_database(path, SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise ResourceError(f"cannot open the results database {path}: {exc}") from None

    def close(self) -> None:
        self._db.close()

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        return write_transaction(self._db)

    def start_run(self, info: LiveRecord) -> None:
        """Record a run in progress (run_id, task, agent, base_model, workspace, store_dir, started, deadline)."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO live VALUES (?, ?)", (info["run_id"], json.dumps(info)))

    def end_run(self, run_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM live WHERE run_id=?", (run_id,))

    def update_live(self, run_id: str, *, deadline: float | None, agent_started: float | None) -> None:
        """The run in flight's agent start and deadline, once its baseline is scored."""
        row = self._db.execute("SELECT data FROM live WHERE run_id=?", (run_id,)).fetchone()
        if row:
            info: LiveRecord = json.loads(row[0])
            info["deadline"], info["agent_started"] = deadline, agent_started
            self.start_run(info)

    def live(self) -> list[LiveRecord]:
        """Runs started and not yet recorded, newest first."""
        rows = self._db.execute("SELECT data FROM live").fetchall()
        return sorted((json.loads(r[0]) for r in rows), key=lambda d: -float(d.get("started", 0)))

    def ingest(self, result: ResultRecord) -> None:
        """Insert one run (and its submissions) from its result record, or replace the record of the same
        execution (a re-audit, a re-ingest); a record of another execution under the same run id is never
        replaced (a one-line :class:`ResourceError`)."""
        row = result["row"]
        with self._tx() as db:
            old = db.execute("SELECT data FROM runs WHERE run_id=?", (row["run_id"],)).fetchone()
            if old is not None and execution(_loaded(old[0])) != execution(result):
                raise ResourceError(
                    f"run {row['run_id']} is already recorded for another execution "
                    f"({_where(_loaded(old[0]))}); not replaced by the one from {_where(result)}"
                )
            db.execute("DELETE FROM live WHERE run_id=?", (row["run_id"],))
            db.execute("DELETE FROM submissions WHERE run_id=?", (row["run_id"],))
            db.execute(
                "INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    row["run_id"],
                    row["timestamp"],
                    row["task"],
                    row["agent"],
                    row["base_model"],
                    int(bool(row["success"])),
                    json.dumps(result),
                ),
            )
            for sub in result.get("submissions", []):
                db.execute(
                    "INSERT INTO submissions VALUES (?, ?, ?)", (row["run_id"], sub["submission_id"], json.dumps(sub))
                )
            if "audit" in result:
                db.execute("DELETE FROM audits WHERE run_id=?", (row["run_id"],))
                for flag in result["audit"]:
                    db.execute(
                        "INSERT OR REPLACE INTO audits VALUES (?, ?, ?, ?, ?)",
                        (row["run_id"], flag["name"], flag["severity"], flag["detail"], json.dumps(flag["evidence"])),
                    )

    def runs(self) -> list[ResultRecord]:
        """Every run's full result, oldest first."""
        rows = self._db.execute("SELECT data FROM runs ORDER BY timestamp, run_id").fetchall()
        return [_loaded(r[0]) for r in rows]

    def run(self, run_id: str) -> ResultRecord | None:
        row = self._db.execute("SELECT data FROM runs WHERE run_id=?", (run_id,)).fetchone()
        return _loaded(row[0]) if row else None

    def ids(self) -> list[str]:
        """Every run id the ledger knows: recorded runs and runs in flight."""
        return [r[0] for r in self._db.execute("SELECT run_id FROM runs UNION SELECT run_id FROM live")]

    def find(self, prefix: str) -> str | None:
        """The run (recorded or in flight) ``prefix`` names: the run with that id, else the one run whose id starts
        with it (a short id as tables show it, :func:`autorl.record.display.short_ids`); None when none does, a one-line
        :class:`UsageError` naming them when several do."""
        known = self.ids()
        if prefix in known:
            return prefix
        matches = sorted(i for i in known if prefix and i.startswith(prefix))
        if len(matches) > 1:
            shown = ", ".join(matches[:3]) + (f" and {len(matches) - 3} more" if len(matches) > 3 else "")
            raise UsageError(f"{prefix!r} is the start of {len(matches)} run ids ({shown}): give more of it")
        return matches[0] if matches else None

    def resolve(self, prefix: str) -> str:
        """The recorded run ``prefix`` names (:meth:`find`); a one-line :class:`UsageError` when no recorded run
        does or several runs do."""
        found = self.find(prefix)
        if found is None or self.run(found) is None:
            raise UsageError(f"no run {prefix!r} in {self.path} (see `autorl results`)")
        return found

    def audit(self, run_id: str) -> list[AuditFlag]:
        """The run's flags, each with the human decisions taken on it (latest last)."""
        flags: list[AuditFlag] = [
            {"name": f, "severity": sev, "detail": d, "evidence": json.loads(e), "overrides": []}
            for f, sev, d, e in self._db.execute(
                "SELECT flag, severity, detail, evidence FROM audits WHERE run_id=? ORDER BY flag", (run_id,)
            )
        ]
        by_name = {f["name"]: f for f in flags}
        for flag, reason, who, when in self._db.execute(
            "SELECT flag, reason, decided_by, decided_at FROM audit_overrides WHERE run_id=? ORDER BY id", (run_id,)
        ):
            if flag in by_name:
                by_name[flag]["overrides"].append({"reason": reason, "decided_by": who, "decided_at": when})
        return flags

    def override(self, run_id: str, flag: str, reason: str, decided_by: str) -> None:
        if not reason.strip():
            raise ResourceError("an override needs a reason (--reason)")
        if flag not in {f["name"] for f in self.audit(run_id)}:
            known = ", ".join(f["name"] for f in self.audit(run_id)) or "none"
            raise ResourceError(f"run {run_id} has no audit flag {flag!r} (flags: {known})")
        with self._tx() as db:
            db.execute(
                "INSERT INTO audit_overrides (run_id, flag, reason, decided_by, decided_at) VALUES (?, ?, ?, ?, ?)",
                (run_id, flag, reason, decided_by, dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")),
            )

    def rows(self, task: str | None = None) -> list[LedgerRow]:
        """Every run's row (only ``task``'s when given), oldest first: every column of
        :class:`~autorl.record.row.RunRow` in order (the audit's open flags in ``audit_flags``), then
        ``audit_overridden``, then any key an older row kept."""
        return [self.row_of(result) for result in self.runs() if task is None or result["row"]["task"] == task]

    def row_of(self, result: ResultRecord) -> LedgerRow:
        """A recorded run's row as :meth:`rows` gives it: its audit's flags and the headline they leave."""
        recorded = result["row"]
        # every column (a default for one an older version did not write), then any key an older row kept
        row: LedgerRow = {**RunRow.from_dict(recorded).to_dict(), **recorded}
        flags = self.audit(row["run_id"])
        row["audit_flags"] = [f"{f['name']}({f['severity']})" for f in flags if not f["overrides"]]
        row["audit_overridden"] = [f["name"] for f in flags if f["overrides"]]
        return judged_headline(row, [f for f in flags if not f["overrides"]])

    def export_csv(self, path: Path) -> Path:
        """Every run into ``path`` as ``results.csv`` (whole or not at all)."""
        buf = io.StringIO()
        write_csv(self.rows(), buf)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(buf.getvalue())
        tmp.replace(path)
        return path


def execution(result: Mapping[str, Any]) -> tuple[str, str, str]:
    """What tells one execution of a run from another: its workspace, the id its runner gave it (a sweep renames
    a run) and its start."""
    row, meta = result.get("row") or {}, result.get("meta") or {}
    return (
        str(row.get("workspace") or ""),
        str(meta.get("runner_run_id") or row.get("run_id")),
        str(row.get("timestamp")),
    )


def _where(result: Mapping[str, Any]) -> str:
    workspace, runner_id, started = execution(result)
    return f"started {started}, workspace {workspace or '?'}, runner id {runner_id}"[:300]


def _loaded(data: str) -> ResultRecord:
    result: ResultRecord = json.loads(data)
    result["row"] = upgrade_row(result["row"], result.get("submissions"), result.get("meta"))
    return result


def csv_value(value: Any) -> Any:
    """A cell of ``results.csv``: numbers at full precision (a float's ``repr``), lists as JSON, None as empty."""
    if isinstance(value, list | tuple):
        return json.dumps(list(value))
    return "" if value is None else value


def write_csv(rows: Iterable[Mapping[str, Any]], out: IO[str], *, lineterminator: str = "\r\n") -> None:
    """``rows`` as ``results.csv``: the header, then one line per row in :data:`~autorl.record.row.CSV_COLUMNS` order."""
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator=lineterminator)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: csv_value(row.get(k)) for k in CSV_COLUMNS})


def record_run(result: RunResult | ResultRecord, home: Path, *, ledger: Ledger | None = None) -> None:
    """Record a run: ``result.json`` in its run directory, its ledger row (replacing an earlier one with the
    same run id) and ``results.csv`` re-exported; each write whole or not at all. Recording the same result
    twice leaves the same files. Then the run's card (``card.md`` and ``trajectory.svg``, :mod:`autorl.record.card`)
    beside ``result.json``, from the record just made: every recorded run has one (a live run, a recovered
    one, a study's, a re-audited one), and a card that cannot be written costs the card only.

    Args:
        result: the run (a :class:`~autorl.record.result.RunResult`, or a result record as ``result.json`` holds it).
        home: ``AUTORL_HOME``: the ledger is ``home/autorl.db``, the export ``home/results.csv``.
        ledger: an open ledger to use instead of opening ``home/autorl.db``.
    """
    data = result.to_dict() if isinstance(result, RunResult) else result.copy()
    run_dir = data.get("run_dir") or data["row"]["workspace"]
    try:
        write_json_atomic(Path(run_dir) / "result.json", data)
    except OSError as exc:
        # the run directory is the agent's workspace: whatever it left at result.json (a directory, a full
        # disk) costs that copy only, never the ledger's record of the run
        meta = dict(data.get("meta") or {})
        note = f"result.json not written: {type(exc).__name__}: {exc}"[:300]
        meta["post_run_errors"] = [*[e for e in meta.get("post_run_errors") or [] if e != note], note]
        data["meta"] = meta
    ingest_results([data], home, ledger)
    with suppress(Exception):  # the record is made; a card never undoes or stops it
        write_card(data)


def ingest_files(paths: Iterable[Path], home: Path, *, ledger: Ledger | None = None) -> list[ResultRecord]:
    """Add ``result.json`` files (from this or other machines) to the ledger and re-export ``results.csv``."""
    results = [read_result(p) for p in paths]
    if results:
        ingest_results(results, home, ledger)
    return results


def read_result(path: Path) -> ResultRecord:
    """A ``result.json`` file, checked to be a run's record (a one-line :class:`ResourceError` when not)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ResourceError(f"{path} is not a run result: {exc}") from None
    return check_result(data, path)


def check_result(data: Any, where: Path | str) -> ResultRecord:
    """``data`` if it is a run's record the ledger can hold (a row with its keys, submissions with their ids),
    else a one-line :class:`ResourceError` naming ``where`` (an older version's file, a hostile one)."""
    row = data.get("row") if isinstance(data, dict) else None
    subs = data.get("submissions", []) if isinstance(data, dict) else None
    if not isinstance(row, dict) or not isinstance(subs, list):
        raise ResourceError(f"{where} is not a run result: no row and submissions")
    missing = [k for k in _REQUIRED if k not in row]
    if missing:
        raise ResourceError(f"{where} is not a run result: its row has no {', '.join(missing)}")
    if not all(isinstance(s, dict) and "submission_id" in s for s in subs):
        raise ResourceError(f"{where} is not a run result: a submission without its submission_id")
    return cast(ResultRecord, dict(data))  # its row's keys and its submissions' ids checked above


#: the columns a recorded row cannot lack (the ledger's keys)
_REQUIRED = ("run_id", "timestamp", "task", "agent", "base_model", "success")


def ingest_results(results: Sequence[ResultRecord], home: Path, ledger: Ledger | None = None) -> None:
    """Upsert run records into the ledger (``home/autorl.db``, or ``ledger``) and re-export ``results.csv``."""
    db = Ledger(home / "autorl.db") if ledger is None else ledger
    try:
        for data in results:
            db.ingest(data)
        db.export_csv(home / "results.csv")
    finally:
        if ledger is None:
            db.close()
