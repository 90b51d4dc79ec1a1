"""The agent's Python imports what the orchestrator's imports (its PYTHONPATH, a site folder), and an agent that
dies within seconds has the end of its log in the run's message and in its record."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .conftest import cli
from .test_run import agent_folder, stub_base  # noqa: F401 (a fixture)


@pytest.mark.e2e
def test_an_agent_that_dies_at_once_leaves_its_log_tail_and_finds_the_orchestrator_s_modules(
    home: Path,
    tmp_path: Path,
    stub_base: Path,  # noqa: F811
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "site_marker.py").write_text("NAME = 'from the site folder'\n")
    agent = agent_folder(
        tmp_path / "agents",
        "dies",
        """
        "$AUTORL_PYTHON" -c "import site_marker; print('imported', site_marker.NAME)"
        echo "fatal: the agent cannot go on" >&2
        exit 1
    """,
    )
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    proc = cli(
        "run",
        "--agent",
        str(agent),
        "--task",
        "echo",
        "--model",
        str(stub_base),
        "--timeout",
        "60",
        "--backend",
        "scripted",
        "--no-audit",
        "--json",
        env={"AUTORL_HOME": str(home), "PYTHONPATH": path},
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert row["end_reason"] == "agent exited with code 1"
    assert "fatal: the agent cannot go on" in proc.stderr  # the run's message
    tail = json.loads((Path(row["workspace"]) / "result.json").read_text())["agent"]["log_tail"]
    assert "imported from the site folder" in tail and tail.rstrip().endswith("fatal: the agent cannot go on")
