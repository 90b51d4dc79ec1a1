"""A grader store's rows as the schema's records (:mod:`autorl.grader.schema`), for :mod:`autorl.grader.store`.

Each table's row becomes its record column by column, in the table's column order (a row is written out as it
is: the state's hand-set baseline and its refusals), its JSON columns decoded. A store written before a column
was added and opened read-only (never migrated) lacks that column: its rows lack the key.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autorl.grader.schema import BaselineRow, RefusalRow, SubmissionRow, TestRow

__all__ = ["JSON_COLUMNS", "baseline_row", "refusal_row", "submission_row", "test_row"]

#: the columns that hold JSON (a record, a comparison, a pruned record)
JSON_COLUMNS = ("record", "comparison", "pruned")


def _decoded(row: sqlite3.Row) -> dict[str, Any]:
    """A row's columns by name, its JSON columns decoded."""
    d = dict(row)
    for col in JSON_COLUMNS:
        if d.get(col):
            d[col] = json.loads(d[col])
    return d


def submission_row(row: sqlite3.Row) -> SubmissionRow:
    d = _decoded(row)
    sub: SubmissionRow = {
        "id": d["id"],
        "created_at": d["created_at"],
        "model_path": d["model_path"],
        "snapshot": d["snapshot"],
        "content_hash": d["content_hash"],
        "kind": d["kind"],
        "status": d["status"],
        "score": d["score"],
        "record": d["record"],
        "comparison": d["comparison"],
        "error": d["error"],
        "started_at": d["started_at"],
        "finished_at": d["finished_at"],
        "duplicate_of": d["duplicate_of"],
        "attempts": d["attempts"],
    }
    if "infra_failure" in d:
        sub["infra_failure"] = d["infra_failure"]
    if "pruned" in d:
        sub["pruned"] = d["pruned"]
    return sub


def baseline_row(row: sqlite3.Row) -> BaselineRow:
    d = _decoded(row)
    return {
        "split": d["split"],
        "score": d["score"],
        "record": d["record"],
        "source": d["source"],
        "set_at": d["set_at"],
    }


def test_row(row: sqlite3.Row) -> TestRow:
    d = _decoded(row)
    test: TestRow = {
        "submission_id": d["submission_id"],
        "score": d["score"],
        "record": d["record"],
        "comparison": d["comparison"],
        "status": d["status"],
        "error": d["error"],
        "created_at": d["created_at"],
    }
    if "infra_failure" in d:
        test["infra_failure"] = d["infra_failure"]
    return test


def refusal_row(row: sqlite3.Row) -> RefusalRow:
    refusal: RefusalRow = {
        "id": row["id"],
        "created_at": row["created_at"],
        "model_path": row["model_path"],
        "reason": row["reason"],
    }
    if "kind" in row.keys():  # noqa: SIM118 (a sqlite3.Row is not a mapping)
        refusal["kind"] = row["kind"]
    return refusal
