"""A study keeps its runs' workspaces with its records, in each attempt's folder (``keys/<run_key>/a<N>/runs/``),
and the sandbox still shows each agent its own workspace and nothing else of the study folder or the home.
Real `autorl run`s of the `echo` benchmark with the scripted backend; a folder agent that probes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autorl.sandbox import bwrap_available

from .conftest import cli, echo_answers, write_stub_checkpoint

BWRAP, WHY = bwrap_available()

PROBE = """\
#!/usr/bin/env bash
out="$WORKSPACE/code"
echo "own workspace" > "$out/mine.txt"
cat "$out/mine.txt" > "$out/read-back.txt"
find "$PROBE_STUDY" "$PROBE_HOME" -mindepth 1 2>/dev/null | sort > "$out/seen.txt"
cat "$PROBE_STUDY/planted.txt" "$PROBE_STUDY/sweep.json" "$PROBE_HOME/hidden/planted.txt" \\
    "$PROBE_STUDY"/keys/*/a1/runs/*/*/code/mine.txt "$PROBE_STUDY"/keys/*/a1/payload.json \\
    > "$out/leaked.txt" 2>/dev/null
exit 0
"""


def _study(tmp_path: Path, home: Path, name: str, sandbox: str, seeds: list[int]) -> tuple[Path, Path]:
    agent = tmp_path / "agents" / "probe"
    if not agent.is_dir():
        agent.mkdir(parents=True)
        (agent / "config.yaml").write_text(json.dumps({"name": "probe", "start": "start.sh"}))
        (agent / "start.sh").write_text(PROBE)
    model = tmp_path / "stub-base"
    if not model.is_dir():
        write_stub_checkpoint(model, echo_answers(5))
    study = home / "sweeps" / name
    study.mkdir(parents=True)
    (study / "planted.txt").write_text("PLANTED in the study folder")
    (home / "hidden").mkdir(parents=True, exist_ok=True)
    (home / "hidden" / "planted.txt").write_text("PLANTED in the home's hidden folder")
    spec = tmp_path / f"{name}.json"
    spec.write_text(
        json.dumps(
            {
                "name": name,
                "agent": [str(agent)],
                "task": "echo",
                "model": str(model),
                "backend": "scripted",
                "seed": seeds,
                "timeout": 60,
                "audit": False,
                "sandbox": sandbox,
                "network": "off" if sandbox == "bwrap" else "on",
                "agent_env": {"PROBE_STUDY": str(study), "PROBE_HOME": str(home)},
            }
        )
    )
    return spec, study


def _workspaces(study: Path) -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for result in sorted(study.glob("keys/*/a1/result.json")):
        row = json.loads(result.read_text())["row"]
        out.append((Path(row["workspace"]), row))
    return out


def _own(path: Path, ws: Path) -> bool:
    """``path`` is the workspace or its training data (in the shared home's datasets), inside either, or one of
    the folders leading to either."""
    return any(path == mine or mine in path.parents or path in mine.parents for mine in (ws, (ws / "data").resolve()))


@pytest.mark.skipif(BWRAP is None, reason=f"bubblewrap cannot run here: {WHY}")
def test_each_agent_sees_its_own_workspace_in_the_study_folder_and_nothing_else(home: Path, tmp_path: Path) -> None:
    spec, study = _study(tmp_path, home, "boxed", "bwrap", [0, 1])
    # one slot: the second run starts once the first run's workspace, result and grader store are in the study
    cli(
        "sweep",
        "run",
        str(spec),
        "--slots",
        "1",
        env={"AUTORL_SWEEP_SCRATCH": str(tmp_path / "scratch")},
        check=True,
        timeout=600,
    )
    runs = _workspaces(study)
    assert len(runs) == 2
    for ws, row in runs:
        attempt = study / "keys" / row["run_key"] / "a1"
        assert ws.is_relative_to(attempt / "runs") and row["sandbox"] == "bwrap"
        code = ws / "code"
        assert (code / "read-back.txt").read_text() == "own workspace\n"  # its own files, read and written
        seen = [Path(line) for line in (code / "seen.txt").read_text().splitlines()]
        assert any(p == ws for p in seen)  # the listing worked: its own workspace is in it
        # no sibling's workspace or results, no study file, no grader store, no hidden folder
        assert [p for p in seen if not _own(p, ws)] == []
        assert (code / "leaked.txt").read_text() == "own workspace\n"  # of all it tried to read, its own file
    # what the agents could not see was there on the host
    (ws1, _), (ws2, _) = runs
    assert (ws1 / "code" / "mine.txt").is_file() and (ws2 / "code" / "mine.txt").is_file()
    assert (study / "planted.txt").is_file() and list(study.glob("keys/*/a1/grader"))


def test_without_a_sandbox_the_workspace_is_in_the_study_folder(home: Path, tmp_path: Path) -> None:
    spec, study = _study(tmp_path, home, "open", "none", [0])
    cli(
        "sweep",
        "run",
        str(spec),
        "--slots",
        "1",
        env={"AUTORL_SWEEP_SCRATCH": str(tmp_path / "scratch")},
        check=True,
        timeout=600,
    )
    ((ws, row),) = _workspaces(study)
    assert ws.is_relative_to(study / "keys" / row["run_key"] / "a1" / "runs" / "echo") and ws.is_dir()
    assert (ws / "result.json").is_file() and (ws / "code" / "read-back.txt").read_text() == "own workspace\n"
    assert not list((tmp_path / "scratch").rglob("read-back.txt"))  # nothing of it in scratch space
    # the control of the sandboxed test: the probe does see and read the rest when nothing masks it
    seen = [Path(line) for line in (ws / "code" / "seen.txt").read_text().splitlines()]
    assert study / "planted.txt" in seen and home / "hidden" / "planted.txt" in seen
    assert "PLANTED" in (ws / "code" / "leaked.txt").read_text()
