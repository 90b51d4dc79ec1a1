"""Studies never overwrite or read each other: a run id is unique to one execution (``<run_key>-<sweep_id>-a<N>``),
the ledger refuses to replace another execution's record, and a study's report shows only its own runs. Runs
are the fake `autorl run` of tests/test_sweep.py (AUTORL_SWEEP_RUN_PROGRAM)."""

from __future__ import annotations

import json
import os
import subprocess
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
    spec.write_text(
        json.dumps(
            {
                "name": name,
                "agent": _agents(tmp_path / "agents", "a"),
                "task": "arith",
                "model": str(model),
                "seed": [0, 1],
                "timeout": 30,
                "limit": 4,
            }
        )
    )
    return spec


def test_two_studies_with_coinciding_cells_keep_their_own_records_and_reports(
    home: Path, tmp_path: Path, fake_run: Path
) -> None:
    from .conftest import write_stub_checkpoint

    model = write_stub_checkpoint(tmp_path / "base-model")
    env = {"AUTORL_HOME": str(home)}
    for name in ("first", "second"):
        cli("sweep", "run", str(_study(tmp_path, name, model)), "--slots", "2", env=env, check=True)
    # the same cells (same run keys), run once per study
    keys = {name: sorted(p.name for p in (home / "sweeps" / name / "keys").iterdir()) for name in ("first", "second")}
    assert keys["first"] == keys["second"] and len(keys["first"]) == 2
    assert len([line for line in fake_run.read_text().splitlines() if '"pid"' in line]) == 4
    # the base model's baseline is the one thing the studies share (by its key): one cache, the shared home's
    for scratch_home in (tmp_path / "scratch").glob("autorl-sweep-*/*/home"):
        assert (scratch_home / "baselines").resolve() == (home / "baselines").resolve()
    assert len(list((tmp_path / "scratch").glob("autorl-sweep-*/*/home"))) == 2
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
    row = {
        "run_id": run_id,
        "timestamp": started,
        "task": "arith",
        "agent": "a",
        "base_model": "m",
        "success": True,
        "improvement": 1.0,
        "workspace": workspace,
    }
    return {"row": row, "submissions": [], "meta": meta}


def test_the_ledger_never_replaces_another_executions_record(tmp_path: Path) -> None:
    from autorl.errors import ResourceError
    from autorl.record.ledger import Ledger

    ledger = Ledger(tmp_path / "autorl.db")
    try:
        first = _record("k-a1", "/scratch/first/ws", runner_run_id="20260101-000000")
        ledger.ingest(first)
        again = {**first, "audit": []}  # the same execution recorded again (a re-audit): replaced
        ledger.ingest(again)
        assert (ledger.run("k-a1") or {})["audit"] == []
        for other in (
            _record("k-a1", "/scratch/second/ws", runner_run_id="20260101-000000"),
            _record("k-a1", "/scratch/first/ws", runner_run_id="20260101-000001"),
            _record("k-a1", "/scratch/first/ws", "2026-01-02 00:00:00", runner_run_id="20260101-000000"),
        ):
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


ENV_RUN = """\
import json, os, sys
args = sys.argv[2:]
opt = lambda name: args[args.index(name) + 1] if name in args else None
with open(os.environ["FAKE_RUN_LOG"], "a") as f:
    f.write(json.dumps({"home": os.environ["AUTORL_HOME"], "hide": os.environ["AUTORL_SANDBOX_HIDE"],
                        "runs": opt("--runs-dir")}) + "\\n")
print(json.dumps({"run_id": f"fake-{os.getpid()}", "timestamp": "2026-01-01 00:00:00", "task": opt("--task"),
                  "agent": os.path.basename(opt("--agent")), "base_model": opt("--model"), "success": True,
                  "improvement": 1.0, "workspace": opt("--runs-dir"), "seed": int(opt("--seed")),
                  "config_hash": "cfg", "end_reason": "agent finished"}))
"""


def test_a_runs_sandbox_masks_every_studys_scratch_home(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorl.sandbox import bwrap_argv, extra_hidden

    from .conftest import write_stub_checkpoint
    from .test_sandbox import policy

    script, log = tmp_path / "env_run.py", tmp_path / "env_runs.jsonl"
    script.write_text(ENV_RUN)
    monkeypatch.setenv("AUTORL_SWEEP_RUN_PROGRAM", f"{sys.executable} {script}")
    monkeypatch.setenv("FAKE_RUN_LOG", str(log))
    scratch = tmp_path / "node-disk"  # the node-local disk: neither /tmp nor the home folder
    monkeypatch.setenv("AUTORL_SWEEP_SCRATCH", str(scratch))
    model = write_stub_checkpoint(tmp_path / "base-model")
    for name in ("first", "second"):
        cli(
            "sweep",
            "run",
            str(_study(tmp_path, name, model)),
            "--slots",
            "1",
            env={"AUTORL_HOME": str(home)},
            check=True,
        )
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    homes = {Path(r["home"]) for r in runs}
    assert len(runs) == 4 and len(homes) == 2
    root = scratch / f"autorl-sweep-{os.getuid()}"
    (secret,) = [h / "hidden" / "secret" for h in homes if h.parent.name.startswith("first-")]
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("the first study's secret")
    for r in runs:
        own = Path(r["home"])
        hidden = extra_hidden({"AUTORL_SANDBOX_HIDE": r["hide"]})
        assert root in hidden and own.is_relative_to(root)
        ws = Path(r["runs"]) / "ws"
        ws.mkdir(parents=True, exist_ok=True)
        argv = bwrap_argv(policy(ws, masked=[own, *hidden], network="on"), ["true"], executable="bwrap")
        masked = [Path(argv[i + 1]) for i, a in enumerate(argv) if a == "--tmpfs"]
        shown = [Path(argv[i + 1]) for i, a in enumerate(argv) if a in ("--bind", "--ro-bind")]
        assert root in masked  # every study's scratch home, this one's too: only the workspace comes back
        assert all(not secret.is_relative_to(p) for p in shown if p != Path("/")), shown


FILLER = """\
#!/usr/bin/env bash
cp -rL "$MODEL_PATH" "$OUTPUT_DIR/v1"
curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Content-Type: application/json" \\
    -H "Authorization: Bearer $AUTORL_TOKEN" -d "{\\"model_path\\": \\"$OUTPUT_DIR/v1\\"}"
dd if=/dev/zero of="$WORKSPACE/fill" bs=1M 2>/dev/null
dd if=/dev/zero of="$WORKSPACE/fill-small" bs=4k 2>/dev/null
exit 0
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A 1.25 GiB filesystem of its own (a tmpfs; mounting needs root): the grader keeps 1 GiB of its disk free
    and the attempt's two reserves hold 128 MiB. Everything the filling agent can reach to write goes there, so a skip never leaves the real disk filled."""
    disk = tmp_path / "small-disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1250m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()[:200]}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.e2e
def test_an_agent_that_fills_the_study_disk_still_gets_its_run_recorded_once(
    tmp_path: Path, shared_home: Path, tiny_model: Path, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorl.sweep import sweep

    home = tmp_path / "home"
    home.mkdir()
    (home / "models").symlink_to(shared_home / "models", target_is_directory=True)
    monkeypatch.setenv("AUTORL_HOME", str(home))
    monkeypatch.setenv("AUTORL_SWEEP_SCRATCH", str(small_disk))
    agent = tmp_path / "agents" / "filler"
    agent.mkdir(parents=True)
    (agent / "config.yaml").write_text(json.dumps({"name": "filler", "start": "start.sh"}))
    (agent / "start.sh").write_text(FILLER)
    spec = {
        "name": "full",
        "agent": [str(agent)],
        "task": "arith",
        "model": "autorl:tiny",
        "seed": [0],
        "timeout": 60,
        "limit": 8,
        "audit": False,
    }
    # the workspace is kept in the study's folder: the study and the scratch homes share the small disk, which the
    # agent fills (never the real one)
    report = sweep(spec, sweep_dir=small_disk / "study")
    (attempt,) = (small_disk / "study" / "keys").glob("*/a*")
    outcome = json.loads((attempt / "outcome.json").read_text())
    assert attempt.name == "a1" and outcome["kind"] == "result", (outcome, (attempt / "run.log").read_text()[-2000:])
    result = json.loads((attempt / "result.json").read_text())
    assert result["row"]["submissions"] >= 1 and result["row"]["test_score"] is not None
    (cell,) = report["cells"]
    assert cell["runs"] == 1 and not report["missing"]
    assert not list(small_disk.rglob(".reserve*"))  # both reserves were given back
