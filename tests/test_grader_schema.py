"""The typed records (autorl.grader.schema) against what the code writes: a record built by hand from a dataclass
or a table keeps every field, in the order the files have always held them, and the schema names each key."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

from autorl.evaluation.run import EvalRecord
from autorl.evaluation.stats import PairedComparison, ScoreStats, paired_compare, summarize
from autorl.grader import records, schema
from autorl.grader.rows import JSON_COLUMNS
from autorl.grader.store import DONE, FAILED, Store


def _record(**changes: object) -> EvalRecord:
    fields: dict[str, object] = {
        "benchmark": "arith",
        "split": "dev",
        "score": 50.0,
        "n": 4,
        "stderr": 25.0,
        "ci95": [10.0, 90.0],
        "config_hash": "abc",
        "config": {"benchmark": "arith", "backend": {"name": "hf"}},
        "item_scores": {"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0},
        "errors": 0,
        "duration_s": 1.5,
        "output_tokens": 12,
        "per_item_path": None,
        "extra": {"ci_method": "wilson", "wake_s": 0.2},
        "engine": "reloaded",
        "load_s": 0.5,
        "generate_s": 1.0,
    }
    fields.update(changes)
    return EvalRecord(**fields)  # type: ignore[arg-type]


def test_an_evaluation_record_keeps_every_field_of_the_dataclass_in_its_order() -> None:
    record = _record()
    names = [f.name for f in dataclasses.fields(EvalRecord)]
    assert list(record.to_dict()) == names == list(schema.EvalRecord.__annotations__)
    assert record.to_dict() == dataclasses.asdict(record)
    summary = record.to_dict(items=False)
    assert list(summary) == [n for n in names if n != "item_scores"] and records.summary(record.to_dict()) == summary
    # a copy: changing the dict leaves the record as it was
    record.to_dict()["extra"]["wake_s"] = 9.0
    assert record.extra["wake_s"] == 0.2


def test_the_statistics_records_keep_their_dataclasses_fields() -> None:
    comparison = paired_compare({"a": 0.0, "b": 1.0}, {"a": 1.0, "b": 1.0})
    assert comparison.to_dict() == {**dataclasses.asdict(comparison), "ci95": list(comparison.ci95)}
    assert list(comparison.to_dict()) == [f.name for f in dataclasses.fields(PairedComparison)]
    assert list(schema.Comparison.__annotations__) == list(comparison.to_dict())
    stats = summarize([0.0, 1.0, 1.0])
    assert list(stats.to_dict()) == [f.name for f in dataclasses.fields(ScoreStats)]
    assert list(schema.ScoreSummary.__annotations__) == list(stats.to_dict())


def _columns(db: Path, table: str) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
    finally:
        con.close()


def test_every_row_holds_its_tables_columns_in_their_order(tmp_path: Path) -> None:
    db = tmp_path / "grader.db"
    store = Store(db)
    base, cand = _record(score=25.0, item_scores={"a": 0.0, "b": 0.0, "c": 1.0, "d": 0.0}), _record()
    store.set_baseline("dev", 25.0, base.to_dict(), "evaluated")
    sid = store.add_submission("output/v1")
    store.update(
        sid,
        status=DONE,
        score=50.0,
        record=records.summary(cand.to_dict()),
        comparison=records.compare(base.to_dict(), cand.to_dict()),
        finished_at=2.0,
    )
    store.update(store.add_submission("output/v2"), status=FAILED, error="boom", infra_failure="gpu memory")
    assert store.claim_test(sid)
    store.finish_test(sid, status=DONE, score=40.0, record={**records.summary(cand.to_dict()), "baseline_score": 20.0})
    store.add_refusal("../x", "outside the output folder", "outside_output")
    rows = {
        "submissions": store.all(),
        "baseline": [store.baseline("dev")],
        "test_scores": store.test_scores(),
        "refusals": store.refusals(),
    }
    store.close()
    for table, found in rows.items():
        for row in found:
            assert row is not None and list(row) == _columns(db, table), table
    schemas = {
        "submissions": schema.SubmissionRow,
        "baseline": schema.BaselineRow,
        "test_scores": schema.TestRow,
        "refusals": schema.RefusalRow,
    }
    for table, typed in schemas.items():
        assert list(typed.__annotations__) == _columns(db, table), table
    [sub, failed] = rows["submissions"]
    assert sub["comparison"] is not None and sub["comparison"]["test"] == "mcnemar-exact"
    assert sub["record"] is not None and "item_scores" not in sub["record"] and failed["infra_failure"] == "gpu memory"
    assert set(JSON_COLUMNS) <= set(_columns(db, "submissions"))


def test_a_store_older_than_its_newest_columns_reads_without_their_keys(tmp_path: Path) -> None:
    """Opened read-only, a store is never migrated: its rows lack the columns added since, and every view of it
    reads them as missing (None), as before the records were typed."""
    db = tmp_path / "grader.db"
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE submissions (id INTEGER PRIMARY KEY AUTOINCREMENT, created_at REAL NOT NULL,
            model_path TEXT NOT NULL, snapshot TEXT, content_hash TEXT, kind TEXT NOT NULL DEFAULT 'full',
            status TEXT NOT NULL, score REAL, record TEXT, comparison TEXT, error TEXT, started_at REAL,
            finished_at REAL, duplicate_of INTEGER, attempts INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE evaluations (content_hash TEXT NOT NULL, split TEXT NOT NULL, record TEXT NOT NULL,
            PRIMARY KEY (content_hash, split));
        CREATE TABLE baseline (split TEXT PRIMARY KEY, score REAL NOT NULL, record TEXT, source TEXT NOT NULL,
            set_at REAL NOT NULL);
        CREATE TABLE refusals (id INTEGER PRIMARY KEY AUTOINCREMENT, created_at REAL NOT NULL,
            model_path TEXT NOT NULL, reason TEXT NOT NULL);
        CREATE TABLE test_scores (submission_id INTEGER PRIMARY KEY, score REAL, record TEXT, comparison TEXT,
            status TEXT NOT NULL, error TEXT, created_at REAL NOT NULL);
        INSERT INTO submissions (created_at, model_path, status, score, record)
            VALUES (1.0, 'output/a', 'done', 40.0, '{"score": 40.0, "n": 3, "extra": {}}');
        INSERT INTO refusals (created_at, model_path, reason) VALUES (2.0, 'x', 'no');
        INSERT INTO test_scores VALUES (1, 41.0, '{"score": 41.0, "baseline_score": null}', NULL, 'done', NULL, 3.0);
        INSERT INTO baseline VALUES ('dev', 10.0, NULL, 'set', 4.0);
    """)
    con.commit()
    con.close()
    store = Store.read_only(db)
    try:
        [sub], [test], [refusal] = store.all(), store.test_scores(), store.refusals()
    finally:
        store.close()
    assert "infra_failure" not in sub and "pruned" not in sub and "infra_failure" not in test
    assert "kind" not in refusal
    state = records.state_from_store(db, "arith")
    assert state["baseline"] == {"split": "dev", "score": 10.0, "record": None, "source": "set", "set_at": 4.0}
    [shown] = state["submissions"]
    assert (shown["infra_failure"], shown["pruned"], shown["n"], shown["improvement"]) == (None, None, 3, 30.0)
    assert state["test"][0]["infra_failure"] is None and state["refusals"] == [refusal]
    assert json.loads(json.dumps(state)) == state
