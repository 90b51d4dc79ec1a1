"""`--task ./folder`: a plugin's source folder (what `autorl new benchmark` writes) runs without `pip install`, in
the orchestrator and in the grader's processes alike; a folder that is no benchmark is refused in one line. (An
rl-smith folder given so, and the isolation its agent gets under bwrap: plugins/autorl-smith/tests.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import cli, write_stub_checkpoint
from .test_run import agent_folder


@pytest.fixture
def scaffolded(tmp_path: Path) -> Path:
    """A benchmark plugin's source folder, as `autorl new benchmark` writes it, not installed."""
    cli("new", "benchmark", "fresh-bench", "--dir", str(tmp_path), check=True)
    return tmp_path / "autorl-fresh-bench"


def test_a_folder_that_is_no_benchmark_is_refused_in_one_line(tmp_path: Path) -> None:
    env = {"AUTORL_HOME": str(tmp_path / "home")}
    stub = write_stub_checkpoint(tmp_path / "stub")
    plain = tmp_path / "notes"
    plain.mkdir()
    (plain / "README.md").write_text("just notes\n")
    for task, says in (
        (str(plain), f"{plain} is neither a plugin's source folder"),
        ("./no/such/folder", "--task ./no/such/folder: no such folder"),
    ):
        for command in (
            ("eval", "--model", str(stub), "--backend", "scripted"),
            ("run", "--agent", "example", "--model", str(stub), "--timeout", "30"),
        ):
            proc = cli(*command, "--task", task, env=env)
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode == 2 and len(lines) == 1 and says in lines[0], (command, proc.stderr)
    assert not (tmp_path / "home" / "runs").exists()  # refused before anything was made


def test_a_plugins_source_folder_evaluates_without_install(tmp_path: Path, scaffolded: Path) -> None:
    env = {"AUTORL_HOME": str(tmp_path / "home")}
    assert "fresh-bench" not in cli("list", "benchmarks", "--json", env=env, check=True).stdout  # not installed
    stub = write_stub_checkpoint(tmp_path / "stub")
    record = json.loads(
        cli(
            "eval",
            "--task",
            str(scaffolded),
            "--model",
            str(stub),
            "--backend",
            "scripted",
            "--limit",
            "3",
            "--json",
            env=env,
            check=True,
        ).stdout
    )
    assert record["benchmark"] == "fresh-bench" and record["n"] == 3


@pytest.mark.e2e
def test_a_run_on_a_plugins_source_folder_is_graded_by_that_plugin(tmp_path: Path, scaffolded: Path) -> None:
    """The grader is a process of its own: it loads the folder's plugin as the run did."""
    home = tmp_path / "home"
    stub = write_stub_checkpoint(tmp_path / "stub")
    agent = agent_folder(
        tmp_path / "agents",
        "one",
        """
        make_ckpt v1 0
        submit v1
    """,
    )
    proc = cli(
        "run",
        "--agent",
        str(agent),
        "--task",
        "./autorl-fresh-bench",
        "--model",
        str(stub),
        "--backend",
        "scripted",
        "--timeout",
        "60",
        "--limit",
        "3",
        "--sandbox",
        "none",
        "--no-audit",
        "--json",
        env={"AUTORL_HOME": str(home)},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(proc.stdout)
    assert row["task"] == "fresh-bench" and row["submissions"] == 1 and row["dev_k"] == 1, row
    assert row["best_score"] is not None  # scored on test by the grader, which loaded the plugin itself
    result = json.loads((Path(row["workspace"]) / "result.json").read_text())
    assert result["meta"]["task_source"] == str(scaffolded.resolve())
