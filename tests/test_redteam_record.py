"""Red team: an agent that makes its own run unrecordable (then "lost", then an infrastructure failure a study
retries), and the files ``autorl recover`` and the dashboard's read-only store open."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT, cli, echo_answers, write_stub_checkpoint
from .test_sandbox import needs_bwrap

HOSTILE = Path(__file__).with_name("hostile")


def _unrecordable_run(tmp_path: Path) -> tuple[Any, Path]:
    """`autorl run` of the agent that leaves a directory at ``$WORKSPACE/result.json``: (process, home)."""
    home = tmp_path / "autorl-home"
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    proc = cli(
        "run",
        "--agent",
        str(HOSTILE / "redteam_result_dir"),
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "60",
        "--backend",
        "scripted",
        "--sandbox",
        "bwrap",
        "--network",
        "off",
        "--json",
        "--no-audit",
        "--agent-env",
        "ATTACK=" + json.dumps({"tests_root": str(ROOT)}),
        env={"AUTORL_HOME": str(home)},
    )
    return proc, home


def _recorded(home: Path) -> list[dict[str, Any]]:
    from autorl.record.ledger import Ledger

    ledger = Ledger(home / "autorl.db")
    try:
        return ledger.runs()
    finally:
        ledger.close()


@needs_bwrap
def test_a_directory_planted_at_result_json_does_not_stop_the_run_from_being_recorded(tmp_path: Path) -> None:
    proc, home = _unrecordable_run(tmp_path)
    runs = _recorded(home)
    assert len(runs) == 1, proc.stderr[-2000:]
    assert runs[0]["row"]["dev_best"] is not None
    assert proc.returncode == 0, proc.stderr[-2000:]


@needs_bwrap
def test_autorl_recover_has_nothing_to_do_for_the_run_the_agent_tried_to_make_unrecordable(tmp_path: Path) -> None:
    proc, home = _unrecordable_run(tmp_path)
    assert proc.returncode == 0 and len(_recorded(home)) == 1, proc.stderr[-2000:]
    again = cli("recover", "--all", "--json", env={"AUTORL_HOME": str(home)})
    assert again.returncode == 0, again.stderr[-2000:]
    runs = _recorded(home)
    assert len(runs) == 1 and not str(runs[0]["row"]["end_reason"]).startswith("orchestrator lost")


def test_record_run_records_the_run_whatever_the_agent_left_at_result_json(tmp_path: Path) -> None:
    """What autorl run, autorl recover and a study all record through: the ledger row first-class, the
    workspace copy best effort (the note says why it is missing), twice the same."""
    from autorl.record.ledger import record_run

    ws = tmp_path / "ws"
    (ws / "result.json" / "keep").mkdir(parents=True)
    home = tmp_path / "home"
    result = {
        "row": {
            "run_id": "r1",
            "timestamp": "2026-01-01T00:00:00",
            "task": "echo",
            "agent": "a",
            "base_model": "m",
            "success": False,
            "workspace": str(ws),
        },
        "submissions": [],
        "meta": {},
    }
    for _ in range(2):
        record_run(result, home)
    runs = _recorded(home)
    assert len(runs) == 1 and len(runs[0]["meta"]["post_run_errors"]) == 1
    assert "result.json not written" in runs[0]["meta"]["post_run_errors"][0]
    assert (ws / "result.json" / "keep").is_dir() and (home / "results.csv").is_file()


def _store_with_a_run(path: Path) -> Path:
    from autorl.grader.store import Store

    store = Store(path)
    store.close()
    return path


def test_the_read_only_store_never_writes(tmp_path: Path) -> None:
    from autorl.grader.store import Store

    db = _store_with_a_run(tmp_path / "grader.db")
    before = db.read_bytes()
    mtime = db.stat().st_mtime_ns
    store = Store.read_only(db)
    try:
        with pytest.raises(sqlite3.OperationalError):
            store._db.execute("CREATE TABLE planted (x)")
    finally:
        store.close()
    assert db.read_bytes() == before and db.stat().st_mtime_ns == mtime


@needs_bwrap
def test_in_a_study_the_agent_cannot_turn_its_run_into_a_retried_infrastructure_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("AUTORL_HOME", str(home))
    monkeypatch.setenv("AUTORL_SWEEP_SCRATCH", str(tmp_path / "scratch"))
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    spec = tmp_path / "study.json"
    spec.write_text(
        json.dumps(
            {
                "name": "rt",
                "agent": str(HOSTILE / "redteam_result_dir"),
                "task": "echo",
                "model": str(base),
                "backend": "scripted",
                "timeout": 60,
                "sandbox": "bwrap",
                "network": "off",
                "audit": False,
                "retries": 1,
            }
        )
    )
    proc = cli(
        "sweep",
        "run",
        str(spec),
        "--slots",
        "1",
        "--json",
        timeout=600,
        env={"AUTORL_HOME": str(home), "AUTORL_SWEEP_SCRATCH": str(tmp_path / "scratch")},
    )
    keys = home / "sweeps" / "rt" / "keys"
    outcomes = [json.loads(p.read_text()) for p in sorted(keys.glob("*/a*/outcome.json"))]
    assert outcomes, proc.stderr[-2000:]
    assert [o["kind"] for o in outcomes] == ["result"], outcomes


def _run_argv(home: Path, base: Path, runs: Path, wait_s: int) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from autorl.cli import main; main()",
        "run",
        "--agent",
        str(HOSTILE / "redteam_submit_then_wait"),
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "90",
        "--backend",
        "scripted",
        "--sandbox",
        "bwrap",
        "--network",
        "off",
        "--json",
        "--no-audit",
        "--runs-dir",
        str(runs),
        "--agent-env",
        f"WAIT_S={wait_s}",
    ]


@needs_bwrap
def test_a_recovered_run_records_the_numbers_the_normal_end_records(tmp_path: Path) -> None:
    """The orchestrator is SIGKILLed after the agent's one scored submission: ``autorl recover`` gives the
    same baseline, best and test score as a run that ended normally with that submission, and nothing more."""
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    env = {**os.environ, "AUTORL_SANDBOX_RO": str(ROOT / "tests")}
    normal_home = tmp_path / "normal"
    done = subprocess.run(
        _run_argv(normal_home, base, tmp_path / "normal-runs", 0),
        capture_output=True,
        text=True,
        env={**env, "AUTORL_HOME": str(normal_home)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    normal = json.loads(done.stdout)
    assert normal["best_score"] is not None and normal["submissions"] == 1  # a test score to compare

    home = tmp_path / "lost"
    runs = tmp_path / "lost-runs"
    proc = subprocess.Popen(
        _run_argv(home, base, runs, 120),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env, "AUTORL_HOME": str(home)},
    )
    try:
        deadline = time.monotonic() + 120
        while not list(runs.glob("**/code/submitted")) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            time.sleep(0.5)
        assert list(runs.glob("**/code/submitted")), "the agent never submitted"
    finally:
        proc.kill()  # the orchestrator, as the OOM killer or a lost node would
        proc.communicate()
    _wait_for_file(home / "gateway", "*/summary.json")  # the gateway's totals, left as its lease broke
    recovered = cli("recover", "--all", "--json", env={"AUTORL_HOME": str(home)}, timeout=300)
    assert recovered.returncode == 0, recovered.stderr[-2000:]
    (done_row,) = [d["row"] for d in json.loads(recovered.stdout)]
    assert done_row["end_reason"].startswith("orchestrator lost")
    for column in ("baseline", "dev_baseline", "best_score", "dev_best", "improvement", "submissions"):
        assert done_row[column] == normal[column], column

    # the two records have the same fields, nested ones too: one builder makes both
    (live_file,) = (tmp_path / "normal-runs").glob("echo/*/result.json")
    (lost_file,) = runs.glob("echo/*/result.json")
    live, lost = json.loads(live_file.read_text()), json.loads(lost_file.read_text())

    # (an evaluation's extra figures say how it ran: a fresh engine's reason, a wake; they differ by circumstance;
    # the cover files' digests are keyed by their paths, drawn afresh each run)
    def fields(record: dict[str, Any]) -> set[str]:
        return {k for k in _key_paths(record) if ".extra." not in k and not k.startswith("meta.decoys.cover_sha256.")}

    assert fields(lost) == fields(live)
    assert live["meta"]["orchestrator"]["lost_at"] is None and lost["meta"]["orchestrator"]["lost_at"] is not None
    assert lost["meta"]["llm_gateway"]["closed"] is True and lost["meta"]["variants"] == []


def _wait_for_file(root: Path, pattern: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not list(root.glob(pattern)) and time.monotonic() < end:
        time.sleep(0.2)


def _key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key of a record and of the objects inside it, as dotted paths (lists are values, not fields)."""
    if not isinstance(value, dict):
        return set()
    out = set()
    for key, inner in value.items():
        out.add(prefix + key)
        out |= _key_paths(inner, f"{prefix}{key}.")
    return out
