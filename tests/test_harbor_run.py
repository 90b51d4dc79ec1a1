"""Exported tasks checked by the real ``harbor`` package: its task loader and ``harbor lint``, and whole trials run
by ``harbor run`` (agent phase, artifact collection, the separate verifier environment, reward parsing), with
Harbor's oracle agent playing a scripted agent that forges every reward and score it can reach.

Harbor needs Python >= 3.12 and its own environment: ``nox -s harbor`` builds one and names its ``harbor``
command in ``AUTORL_HARBOR``. There is no container runtime here, so trials run in ``harbor_local_env``
(bubblewrap in place of containers; Harbor's trial code unchanged)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autorl.export.harbor import export
from autorl.export.harbor_cells import Scoring, TaskCell
from autorl.hidden import HIDDEN_SECRET_ENV

from .conftest import ROOT, echo_answers, write_stub_checkpoint
from .test_sandbox import needs_bwrap

HARBOR = os.environ.get("AUTORL_HARBOR", "")
pytestmark = pytest.mark.skipif(
    not HARBOR or not Path(HARBOR).is_file(), reason="needs the harbor command (Python >= 3.12): run `nox -s harbor`"
)

FORGER = """#!/bin/bash
set -e
# the base model's own answers as the final checkpoint, and every forgery within reach
mkdir -p "$OUTPUT_DIR/final"
cp -r /solution/checkpoint/. "$OUTPUT_DIR/final/"
claim='{"reward": 1.0, "test_score": 100.0, "improvement": 100.0}'
echo "$claim" > /logs/verifier/reward.json
echo 1.0 > /logs/verifier/reward.txt
echo "$claim" > /logs/artifacts/reward.json
echo "$claim" > "$OUTPUT_DIR/final/reward.json"
echo "$claim" > "$OUTPUT_DIR/final/autorl_result.json"
"""
HONEST = """#!/bin/bash
set -e
mkdir -p "$OUTPUT_DIR/final"
cp -r /solution/checkpoint/. "$OUTPUT_DIR/final/"
"""


def _harbor(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTORL_HARBOR_LOCAL_PATH": str(Path(sys.executable).parent)}
    env.pop(HIDDEN_SECRET_ENV, None)
    return subprocess.run([HARBOR, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The echo task exported twice (scripted answers, so that a checkpoint's score is what it says), each copy
    with a solution/ for Harbor's oracle agent: one forger, one honest agent."""
    root = tmp_path_factory.mktemp("harbor")
    base = write_stub_checkpoint(root / "base", answers=echo_answers(5, "test"))
    [task] = export(
        root / "export", [TaskCell(task="echo", model=str(base), timeout=60, backend="scripted")], Scoring()
    )
    out: dict[str, Path] = {"exported": task}
    for name, script, answers in (
        ("forger", FORGER, echo_answers(5, "test")),
        ("honest", HONEST, echo_answers(30, "test")),
    ):
        copy = root / "dataset" / name
        shutil.copytree(task, copy)
        write_stub_checkpoint(copy / "solution" / "checkpoint", answers=answers)
        (copy / "solution" / "solve.sh").write_text(script)
        (copy / "solution" / "solve.sh").chmod(0o755)
        toml = (copy / "task.toml").read_text().replace('name = "autorl/echo-base-60s"', f'name = "autorl/{name}"')
        (copy / "task.toml").write_text(toml)
        out[name] = copy
    return out


def _findings(*args: str) -> list[dict[str, Any]]:
    proc = _harbor("lint", "--json", *args)
    found: list[dict[str, Any]] = json.loads(proc.stdout or "[]")
    assert proc.returncode == (1 if found else 0), proc.stderr
    return found


def test_harbor_loads_the_task_with_a_separate_verifier(tasks: dict[str, Path]) -> None:
    python = Path(HARBOR).with_name("python")
    code = (
        "import json, sys\nfrom harbor.models.task.task import Task\n"
        "from harbor.models.task.verifier_mode import resolve_task_verifier_mode, "
        "resolve_verifier_environment_definition\n"
        "t = Task(sys.argv[1]); d = resolve_verifier_environment_definition(t.config, t.paths)\n"
        "print(json.dumps({'mode': resolve_task_verifier_mode(t.config).value, 'tests': str(d.directory), "
        "'bundled': d.bundled_tests, 'user': t.config.agent.user, 'artifacts': t.config.artifacts}))"
    )
    proc = subprocess.run([str(python), "-c", code, str(tasks["exported"])], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    assert loaded == {
        "mode": "separate",
        "tests": str(tasks["exported"] / "tests"),
        "bundled": True,
        "user": "agent",
        "artifacts": ["/app/output/final"],
    }


def test_harbor_lint_passes(tasks: dict[str, Path], tmp_path: Path) -> None:
    assert _findings(str(tasks["exported"])) == []
    # every rule: only the base image, which the user pins with --image
    assert {(f["rule"], Path(f["path"]).parent.name) for f in _findings("--select", "ALL", str(tasks["exported"]))} == {
        ("unpinned-image", "environment"),
        ("unpinned-image", "tests"),
    }
    pinned = tmp_path / "pinned"
    shutil.copytree(tasks["exported"], pinned)
    for name in ("environment/Dockerfile", "tests/Dockerfile"):
        path = pinned / name
        path.write_text(path.read_text().replace("FROM python:3.12-slim", "FROM python:3.12-slim@sha256:" + "0" * 64))
    assert _findings("--select", "ALL", str(pinned)) == []


@needs_bwrap
def test_a_harbor_trial_ignores_every_forged_reward(tasks: dict[str, Path], tmp_path: Path) -> None:
    proc = _harbor(
        "run",
        "-p",
        str(tasks["forger"].parent),
        "-a",
        "oracle",
        "--env",
        "tests.harbor_local_env:LocalEnvironment",
        "--ek",
        "auto_mounting=true",
        "-o",
        str(tmp_path),
        "-n",
        "1",
        "-y",
        "-q",
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    trials = {json.loads(p.read_text())["task_name"]: p.parent for p in tmp_path.glob("*/*/result.json")}
    assert set(trials) == {"autorl/forger", "autorl/honest"}
    results = {name: json.loads((folder / "result.json").read_text()) for name, folder in trials.items()}
    for result in results.values():
        assert result["exception_info"] is None
    forged = results["autorl/forger"]["verifier_result"]["rewards"]
    assert forged["reward"] == 0.0 and forged["test_score"] == forged["baseline"] == pytest.approx(100 * 5 / 30)
    assert forged["improvement"] == 0.0 and forged["checkpoint_valid"] == 1.0
    verifier_dir = trials["autorl/forger"] / "verifier"
    assert sorted(p.name for p in verifier_dir.iterdir()) == ["autorl_result.json", "reward.json", "test-stdout.txt"]
    honest = results["autorl/honest"]["verifier_result"]["rewards"]
    assert honest["reward"] == 1.0 and honest["test_score"] == 100.0 and honest["improvement_ci95_low"] > 0
