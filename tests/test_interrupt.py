"""An interrupted `autorl run` (Ctrl-C to its group or its pid, SIGTERM, SIGHUP) is finished and recorded as
interrupted; a second signal during that finish leaves the run for `autorl recover`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autorl.record.ledger import Ledger

from .conftest import ROOT, cli
from .test_run import agent_folder, stub_base  # noqa: F401 (a fixture)

#: the agent submits, says so once the score is back, then works on until it is stopped
BODY = """
    make_ckpt v1 12 null 21
    submit v1 > "$WORKSPACE/code/submit.json"
    touch "$WORKSPACE/code/scored"
    sleep 300
"""


def _start(home: Path, tmp_path: Path, base: Path) -> tuple[subprocess.Popen[str], Path]:
    agent = agent_folder(tmp_path / "agents", "stays", BODY)
    runs = tmp_path / "runs"
    env = {**os.environ, "AUTORL_HOME": str(home), "AUTORL_SANDBOX_RO": str(ROOT / "tests")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from autorl.cli import main; main()",
            "run",
            "--agent",
            str(agent),
            "--task",
            "echo",
            "--model",
            str(base),
            "--timeout",
            "300",
            "--backend",
            "scripted",
            "--sandbox",
            "none",
            "--no-audit",
            "--runs-dir",
            str(runs),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    end = time.monotonic() + 240
    while not list(runs.glob("*/*/code/scored")):
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            raise AssertionError(f"the run ended before its agent's score came back:\n{proc.communicate()[1]}")
        time.sleep(0.2)
    return proc, runs


def _send(proc: subprocess.Popen[str], sig: int, to_group: bool) -> None:
    if to_group:  # as a terminal sends Ctrl-C: to every process of the foreground group
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("sig", "to_group"), [(signal.SIGINT, True), (signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGHUP, True)]
)
def test_an_interrupted_run_is_recorded_with_what_was_scored(
    home: Path,
    tmp_path: Path,
    stub_base: Path,  # noqa: F811
    sig: int,
    to_group: bool,
) -> None:
    proc, _ = _start(home, tmp_path, stub_base)
    _send(proc, sig, to_group)
    out, err = proc.communicate(timeout=300)
    name = signal.Signals(sig).name
    assert proc.returncode == 128 + sig, err
    row = json.loads(out)  # the record is printed, then the shell learns of the interrupt
    assert row["end_reason"] == f"interrupted by {name}" and row["submissions"] == 1
    # the selected submission was scored on the test split: 21 of 30 right against the base model's 6
    assert row["best_score"] == pytest.approx(70.0) and row["baseline"] == pytest.approx(20.0)
    recorded = json.loads(cli("results", "--json", env={"AUTORL_HOME": str(home)}, check=True).stdout)
    assert [(r["run_id"], r["end_reason"]) for r in recorded] == [(row["run_id"], f"interrupted by {name}")]
    ledger = Ledger(home / "autorl.db")
    try:
        assert ledger.live() == []
    finally:
        ledger.close()
    result = json.loads((Path(row["workspace"]) / "result.json").read_text())
    assert result["agent"]["reason"] == f"interrupted by {name}"


@pytest.mark.e2e
def test_a_second_signal_during_the_finish_leaves_the_run_to_recover(
    home: Path,
    tmp_path: Path,
    stub_base: Path,  # noqa: F811
) -> None:
    proc, _ = _start(home, tmp_path, stub_base)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=300)
    assert proc.returncode == 130
    ledger = Ledger(home / "autorl.db")
    try:
        (live,) = ledger.live()
        assert ledger.rows() == []
    finally:
        ledger.close()
    done = cli("recover", live["run_id"], "--no-audit", "--json", env={"AUTORL_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    recorded = json.loads(cli("results", "--json", env={"AUTORL_HOME": str(home)}, check=True).stdout)
    assert [r["run_id"] for r in recorded] == [live["run_id"]] and recorded[0]["submissions"] == 1
