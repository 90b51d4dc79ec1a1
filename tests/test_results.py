"""A run's record (`autorl.record.row`, `.result`, `.migrate`): every column defined once, older ledgers still
read, recording idempotent, and the dev figures of a row the grader's own (its best and that submission's
improvement), finished or live."""

from __future__ import annotations

import csv
import dataclasses
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from autorl.errors import ResourceError
from autorl.record.ledger import Ledger, ingest_files, record_run
from autorl.record.result import RunResult
from autorl.record.row import CSV_COLUMNS, DEV_COLUMNS, RECORDED_COLUMNS, RunRow, run_row

#: the results.csv header before the study columns were added (the reference harness's columns first)
PREVIOUS_COLUMNS = (
    "run_id",
    "timestamp",
    "task",
    "agent",
    "base_model",
    "baseline",
    "best_score",
    "improvement",
    "submissions",
    "duration_s",
    "success",
    "workspace",
    "improvement_ci95",
    "p_value",
    "best_submission",
    "test_baseline",
    "test_score",
    "test_improvement",
    "test_improvement_ci95",
    "dev_baseline",
    "dev_best",
    "dev_improvement",
    "dev_improvement_ci95",
    "dev_k",
    "end_reason",
    "seed",
    "config_hash",
    "sandbox",
    "audit_flags",
    "llm_tokens",
    "llm_cost_usd",
    "llm_usage_source",
)

#: the ledger's tables as the first released version created them (no live runs, no audit overrides)
FIRST_SCHEMA = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, timestamp TEXT NOT NULL, task TEXT NOT NULL, agent TEXT NOT NULL,
                   base_model TEXT NOT NULL, success INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE submissions (run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
                          submission_id INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, submission_id));
CREATE TABLE audits (run_id TEXT NOT NULL, flag TEXT NOT NULL, severity TEXT NOT NULL, detail TEXT NOT NULL,
                     evidence TEXT NOT NULL, PRIMARY KEY (run_id, flag));
"""


def _csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def test_every_column_is_a_field_of_run_row_in_csv_order(tmp_path: Path) -> None:
    names = tuple(f.name for f in dataclasses.fields(RunRow))
    assert names == CSV_COLUMNS
    # the columns that were there keep their order; the study's two come next, then the judged headline's rule
    # and the decoys', newer ones after those
    assert (*PREVIOUS_COLUMNS, "run_key", "sweep", "headline_rule", "decoys") == CSV_COLUMNS[
        : len(PREVIOUS_COLUMNS) + 4
    ]
    assert CSV_COLUMNS[-6:] == (
        "timeout_s",
        "infra_failure",
        "judge_model",
        "judge_prompt_hash",
        "judge_samples",
        "limit",
    )
    assert set(DEV_COLUMNS) <= set(CSV_COLUMNS)
    assert tuple(c for c in CSV_COLUMNS if c != "audit_flags") == RECORDED_COLUMNS
    ledger = Ledger(tmp_path / "autorl.db")
    ledger.ingest({"row": RunRow("r", "2026-01-01 00:00:00", "t", "a", "m").record(), "submissions": []})
    header, rows = _csv(ledger.export_csv(tmp_path / "results.csv"))
    assert header == list(CSV_COLUMNS) and rows[0]["run_key"] == "" and rows[0]["sweep"] == ""
    assert list(ledger.rows()[0])[: len(CSV_COLUMNS)] == list(CSV_COLUMNS)
    ledger.close()


def test_a_ledger_of_the_first_schema_with_rows_of_the_first_format_opens_and_exports(tmp_path: Path) -> None:
    db_path = tmp_path / "autorl.db"
    db = sqlite3.connect(db_path)
    db.executescript(FIRST_SCHEMA)
    # a row of the time when the headline was the dev figure: no dev_* columns, no sandbox, no study keys
    old_row = {
        "run_id": "old",
        "timestamp": "2025-06-01 10:00:00",
        "task": "arith",
        "agent": "a",
        "base_model": "m",
        "baseline": 25.0,
        "best_score": 60.0,
        "improvement": 35.0,
        "improvement_ci95": [20.0, 50.0],
        "p_value": 0.001,
        "submissions": 2,
        "success": True,
        "workspace": "/x",
        "test_baseline": 20.0,
        "test_score": 22.5,
        "test_improvement": 2.5,
        "test_improvement_ci95": [-5.0, 9.0],
        "llm_tokens": 10,
    }
    subs = [{"submission_id": 1, "status": "done", "score": 60.0}, {"submission_id": 2, "status": "failed"}]
    db.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("old", old_row["timestamp"], "arith", "a", "m", 1, json.dumps({"row": old_row, "submissions": subs})),
    )
    db.commit()
    db.close()
    ledger = Ledger(db_path)
    ledger.start_run({"run_id": "now", "started": time.time()})  # the tables added since are there
    header, rows = _csv(ledger.export_csv(tmp_path / "results.csv"))
    ledger.close()
    assert header == list(CSV_COLUMNS)
    (row,) = rows
    assert row["improvement"] == "2.5" and row["baseline"] == "20.0" and row["best_score"] == "22.5"
    assert row["dev_improvement"] == "35.0" and row["dev_k"] == "1" and row["p_value"] == ""
    assert row["llm_usage_source"] == "agent-reported" and row["run_key"] == "" and row["sweep"] == ""
    assert row["judge_model"] == row["judge_prompt_hash"] == row["judge_samples"] == ""  # no judge was asked


def _result(tmp_path: Path, run_id: str = "r1", **row: Any) -> RunResult:
    ws = tmp_path / "runs" / run_id
    ws.mkdir(parents=True)
    record = {**RunRow(run_id, "2026-02-01 00:00:00", "arith", "a", "m", workspace=str(ws)).record(), **row}
    return RunResult(
        run_id,
        record,
        [{"submission_id": 1, "status": "done", "score": 40.0}],
        None,
        None,
        {"exit_code": 0},
        ws,
        {"autorl_version": "x"},
        [],
    )


def test_record_run_is_idempotent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = _result(tmp_path, improvement=3.0, run_key="k1", sweep="s")
    record_run(result, home)
    files = [(result.run_dir / "result.json").read_bytes(), (home / "results.csv").read_bytes()]
    record_run(result, home)
    record_run(json.loads((result.run_dir / "result.json").read_text()), home)  # as ingested from its file
    assert [(result.run_dir / "result.json").read_bytes(), (home / "results.csv").read_bytes()] == files
    ledger = Ledger(home / "autorl.db")
    (row,) = ledger.rows()
    assert row["run_key"] == "k1" and row["sweep"] == "s" and row["improvement"] == 3.0
    assert len(ledger.run("r1")["submissions"]) == 1  # type: ignore[index]
    ledger.close()
    assert json.loads(files[0])["row"] == result.row and "audit_flags" not in result.row


def test_ingesting_result_files_refuses_what_is_not_a_run_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    good = _result(tmp_path)
    record_run(good, tmp_path / "elsewhere")
    bad = tmp_path / "bad.json"
    for text in ("not json", "[1]", '{"row": {"run_id": "x"}}'):
        bad.write_text(text)
        with pytest.raises(ResourceError, match="is not a run result"):
            ingest_files([bad], home)
    assert not (home / "results.csv").exists()
    ingest_files([good.run_dir / "result.json"], home)
    assert [r["run_id"] for r in _csv(home / "results.csv")[1]] == ["r1"]


def _store_with_submissions(store_dir: Path, scores: list[float | None]) -> None:
    from autorl.grader.store import Store

    store = Store(store_dir / "grader.db")
    store.set_baseline("dev", 25.0, {"score": 25.0, "ci95": [20.0, 30.0], "n": 40}, "evaluated")
    for k, score in enumerate(scores):
        sid = store.add_submission(f"/out/ckpt{k}")
        if score is None:
            store.update(sid, status="failed", error="invalid checkpoint")
        else:
            store.update(
                sid,
                status="done",
                score=score,
                record={"score": score, "ci95": [score - 5, score + 5]},
                comparison={"difference": score - 25.0, "ci95": [score - 30.0, score - 20.0], "p_value": 0.01},
                finished_at=time.time(),
            )
    store.close()


def test_best_and_improvement_are_the_graders_for_a_finished_and_a_live_run(tmp_path: Path) -> None:
    """Two submissions tie on the best score: the grader's rule (the earliest) holds in every row."""
    from autorl.grader import records
    from autorl.grader.store import Store
    from autorl.ui.data import live_row

    store_dir = tmp_path / "store"
    _store_with_submissions(store_dir, [40.0, 55.0, None, 55.0, 30.0])
    store = Store.read_only(store_dir / "grader.db")
    subs, base = store.all(), store.baseline("dev")
    state = records.state(
        task="arith",
        baseline=base,
        baseline_error=None,
        submissions=subs,
        tests=[],
        counts=store.counts(),
        refusals=[],
        closed=True,
    )
    store.close()
    best = records.best(subs)
    assert best == {"submission_id": 2, "score": 55.0}
    best_public = next(s for s in state["submissions"] if s["submission_id"] == 2)
    row = run_row(
        run_id="r",
        started=0.0,
        finished=1.0,
        task="arith",
        agent="a",
        base_model="m",
        workspace="/w",
        seed=0,
        sandbox="bwrap",
        state=state,
        test=None,
        outcome={"timed_out": True, "exit_code": None, "reason": "timeout"},
    ).to_dict()
    assert row["best_submission"] == 2 and row["dev_best"] == 55.0 and row["dev_baseline"] == 25.0
    assert row["dev_improvement"] == best_public["improvement"] == 30.0
    assert row["dev_improvement_ci95"] == best_public["improvement_ci95"] == [25.0, 35.0]
    assert row["dev_k"] == 4 and row["improvement"] is None and row["end_reason"] == "no test score"
    live = live_row(
        {
            "run_id": "r",
            "started": time.time(),
            "task": "arith",
            "agent": "a",
            "base_model": "m",
            "store_dir": str(store_dir),
            "timeout_s": 60,
        }
    )
    assert {k: live[k] for k in DEV_COLUMNS} == {k: row[k] for k in DEV_COLUMNS}
    assert live["submissions"] == 5 and live["improvement"] is None and live["status"] == "running"


def test_a_live_run_whose_store_is_missing_or_not_a_store_shows_no_figures(tmp_path: Path) -> None:
    from autorl.ui.data import live_row

    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "grader.db").write_text("not a database")
    for store_dir in (tmp_path / "absent", tmp_path / "junk"):
        live = live_row(
            {
                "run_id": "r",
                "started": time.time(),
                "task": "t",
                "agent": "a",
                "base_model": "m",
                "store_dir": str(store_dir),
            }
        )
        assert live["submissions"] == 0 and live["dev_best"] is None and live["dev_k"] == 0
    assert not (tmp_path / "absent").exists()  # reading never creates a store


def test_run_result_reads_its_figures_from_the_row_and_refuses_to_overwrite_them(tmp_path: Path) -> None:
    row = {
        "task": "gsm8k",
        "agent": "claude",
        "base_model": "tiny",
        "baseline": 40.0,
        "best_score": 45.5,
        "improvement_ci95": [1.0, 9.0],
        "success": 1,
        "dev_k": 3,
        "dev_best": "not a number",
    }
    result = RunResult("r1", row, [], None, None, {}, tmp_path)
    assert (result.task, result.agent_name, result.model) == ("gsm8k", "claude", "tiny")
    assert (result.test_baseline, result.test_score, result.improvement_ci95) == (40.0, 45.5, (1.0, 9.0))
    assert (result.success, result.k, result.dev_best, result.p_value) == (True, 3, None, None)
    with pytest.raises(AttributeError, match="read from its row"):
        result.test_score = 99.0  # type: ignore[misc]
    assert result.test_score == 45.5 and RunResult.test_score.__doc__
