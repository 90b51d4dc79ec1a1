"""Studies never overwrite or read each other: a run id is unique to one execution (``<run_key>-<sweep_id>-a<N>``),
the ledger refuses to replace another execution's record, and a study's report shows only its own runs. Runs
are the fake `autorl run` of tests/test_sweep.py (AUTORL_SWEEP_RUN_PROGRAM)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import cli
from .test_sweep import FAKE_RUN, _agents


@pytest.fixture
def fake_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    log = tmp_path / "fake_runs.jsonl"
    monkeypatch.setenv("AUTORL_SWEEP_RUN_PROGRAM", f"{sys.executable} {script}")
    monkeypatch.setenv("FAKE_RUN_LOG", str(log))
    monkeypatch.setenv("AUTORL_SWEEP_SCRATCH", str(tmp_path / "scratch"))
    return log


def _study(tmp_path: Path, name: str, model: Path) -> Path:
    spec = tmp_path / f"{name}.json"
    spec.write_text(json.dumps({"name": name, "agent": _agents(tmp_path / "agents", "a"), "task": "arith",
                                "model": str(model), "seed": [0, 1], "timeout": 30, "limit": 4}))
    return spec


def test_two_studies_with_coinciding_cells_keep_their_own_records_and_reports(
        home: Path, tmp_path: Path, fake_run: Path) -> None:
    from .conftest import write_stub_checkpoint

    model = write_stub_checkpoint(tmp_path / "base-model")
    env = {"AUTORL_HOME": str(home)}
    for name in ("first", "second"):
        cli("sweep", "run", str(_study(tmp_path, name, model)), "--slots", "2", env=env, check=True)
    # the same cells (same run keys), run once per study
    keys = {name: sorted(p.name for p in (home / "sweeps" / name / "keys").iterdir()) for name in ("first", "second")}
    assert keys["first"] == keys["second"] and len(keys["first"]) == 2
    assert len([line for line in fake_run.read_text().splitlines() if '"pid"' in line]) == 4
    rows = json.loads(cli("results", "--json", env=env, check=True).stdout)
    assert len(rows) == 4 and len({r["run_id"] for r in rows}) == 4  # nothing replaced
    assert sorted(r["sweep"] for r in rows) == ["first", "first", "second", "second"]
    for name in ("first", "second"):
        payload = json.loads(next((home / "sweeps" / name / "keys").glob("*/a1/payload.json")).read_text())
        report = json.loads(cli("sweep", "report", name, "--format", "json", env=env, check=True).stdout)
        ids = [r["run_id"] for c in report["cells"] for r in c["per_run"]]
        assert sorted(ids) == sorted(f"{k}-{payload['sweep_id']}-a1" for k in keys[name])
        # each run the report links to (/runs/<run_id>) is this study's record in the ledger
        assert {r["sweep"] for r in rows if r["run_id"] in ids} == {name}
    # rerunning a study reruns nothing and replaces nothing
    cli("sweep", "run", str(_study(tmp_path, "first", model)), "--slots", "2", env=env, check=True)
    cli("sweep", "ingest", "first", env=env, check=True)
    assert len(json.loads(cli("results", "--json", env=env, check=True).stdout)) == 4


def _record(run_id: str, workspace: str, started: str = "2026-01-01 00:00:00", **meta: Any) -> dict[str, Any]:
    row = {"run_id": run_id, "timestamp": started, "task": "arith", "agent": "a", "base_model": "m",
           "success": True, "improvement": 1.0, "workspace": workspace}
    return {"row": row, "submissions": [], "meta": meta}


def test_the_ledger_never_replaces_another_executions_record(tmp_path: Path) -> None:
    from autorl.errors import ResourceError
    from autorl.ledger import Ledger

    ledger = Ledger(tmp_path / "autorl.db")
    try:
        first = _record("k-a1", "/scratch/first/ws", runner_run_id="20260101-000000")
        ledger.ingest(first)
        again = {**first, "audit": []}  # the same execution recorded again (a re-audit): replaced
        ledger.ingest(again)
        assert (ledger.run("k-a1") or {})["audit"] == []
        for other in (_record("k-a1", "/scratch/second/ws", runner_run_id="20260101-000000"),
                      _record("k-a1", "/scratch/first/ws", runner_run_id="20260101-000001"),
                      _record("k-a1", "/scratch/first/ws", "2026-01-02 00:00:00", runner_run_id="20260101-000000")):
            with pytest.raises(ResourceError, match="already recorded for another execution"):
                ledger.ingest(other)
        kept = ledger.run("k-a1") or {}
        assert kept["audit"] == [] and kept["row"]["workspace"] == "/scratch/first/ws" and len(ledger.runs()) == 1
    finally:
        ledger.close()


def test_ingesting_a_colliding_result_file_is_a_one_line_error(home: Path, tmp_path: Path) -> None:
    for name, workspace in (("one", "/elsewhere/one"), ("two", "/elsewhere/two")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(json.dumps(_record("same-id", workspace)))
    cli("results", "--ingest", str(tmp_path / "one" / "result.json"), check=True)
    proc = cli("results", "--ingest", str(tmp_path / "two" / "result.json"))
    assert proc.returncode != 0 and "already recorded for another execution" in proc.stderr
    assert "Traceback" not in proc.stderr
    (row,) = json.loads(cli("results", "--json", check=True).stdout)
    assert row["workspace"] == "/elsewhere/one"

