"""Every `autorl sweep` command that names a study takes its spec file too, as `sweep run` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import cli
from .test_sweep import _agents, fake_run, model  # noqa: F401 (fixtures)


def test_status_report_and_ingest_take_the_spec_file(home: Path, tmp_path: Path, fake_run: Path,  # noqa: F811
                                                     model: Path) -> None:  # noqa: F811
    spec = tmp_path / "study.toml"
    agents = _agents(tmp_path / "agents", "a", "b")
    spec.write_text(f'name = "by-spec"\nagent = {json.dumps(agents)}\ntask = "arith"\nmodel = "{model}"\n'
                    "seed = [0]\ntimeout = 30\n")
    env = {"AUTORL_HOME": str(home)}
    cli("sweep", "run", str(spec), "--slots", "2", env=env, check=True)
    by_name = json.loads(cli("sweep", "report", "by-spec", "--format", "json", env=env, check=True).stdout)
    by_spec = json.loads(cli("sweep", "report", str(spec), "--format", "json", env=env, check=True).stdout)
    assert by_spec == by_name and len(by_spec["cells"]) == 2
    status = json.loads(cli("sweep", "status", str(spec), "--json", env=env, check=True).stdout)
    assert [r["state"] for r in status] == ["done", "done"]
    assert cli("sweep", "ingest", str(spec), env=env, check=True).stdout.strip() == "ingested 2 runs"
    missing = cli("sweep", "report", str(tmp_path / "agents"), env=env)  # a folder that is no study
    assert missing.returncode == 2 and missing.stderr.startswith("error: no sweep at")


#: a stand-in for `autorl run` that makes its workspace where it is told, as the real one does
WORKSPACE_RUN = """
import json, os, sys
args = sys.argv[2:]
opt = lambda name: args[args.index(name) + 1]
ws = os.path.join(opt("--runs-dir"), opt("--task"), "r1_agent")
os.makedirs(os.path.join(ws, "code"))
open(os.path.join(ws, "code", "train.py"), "w").write("print('the agent was here')")
print(json.dumps({"run_id": "r1", "timestamp": "2026-01-01 00:00:00", "task": opt("--task"), "agent": "a", "base_model": opt("--model"),
                  "baseline": 20.0, "best_score": 25.0, "improvement": 5.0, "improvement_ci95": [1.0, 9.0],
                  "p_value": 0.01, "submissions": 1, "duration_s": 0.1, "success": True, "workspace": ws,
                  "seed": int(opt("--seed")), "config_hash": "cfg", "end_reason": "agent finished"}))
"""


def test_a_study_keeps_its_runs_workspaces_with_its_records(home: Path, tmp_path: Path, model: Path,  # noqa: F811
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    program = tmp_path / "workspace_run.py"
    program.write_text(WORKSPACE_RUN)
    monkeypatch.setenv("AUTORL_SWEEP_RUN_PROGRAM", f"{sys.executable} {program}")
    monkeypatch.setenv("AUTORL_SWEEP_SCRATCH", str(tmp_path / "scratch"))
    spec = tmp_path / "kept.toml"
    spec.write_text(f'name = "kept"\nagent = {json.dumps(_agents(tmp_path / "agents", "a"))}\ntask = "arith"\n'
                    f'model = "{model}"\nseed = [0]\ntimeout = 30\n')
    cli("sweep", "run", str(spec), env={"AUTORL_HOME": str(home)}, check=True)
    (result,) = [json.loads(p.read_text()) for p in (home / "sweeps" / "kept" / "keys").glob("*/a1/result.json")]
    ws = Path(result["row"]["workspace"])
    assert ws.is_relative_to(home / "sweeps" / "kept") and (ws / "code" / "train.py").is_file()
    assert not list((tmp_path / "scratch").rglob("train.py"))  # nothing of it in scratch space
