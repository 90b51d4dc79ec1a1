"""A run survives the death of its processes: `kill -9` of the orchestrator leaves no process of the run behind
and `autorl recover` records what the grader scored; `kill -9` of the grader alone costs the run nothing."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from .conftest import ROOT, cli, echo_answers, write_stub_checkpoint
from .test_run import agent_folder

#: a submission sent without waiting for its score
SUBMIT_NOWAIT = (
    'curl -s -X POST "$GRADING_SERVER_URL/submit?wait=false" -H "Content-Type: application/json" '
    '-H "Authorization: Bearer $AUTORL_TOKEN" -d "{\\"model_path\\": \\"$OUTPUT_DIR/$1\\"}"; echo'
)


def start_run(home: Path, agent: Path, base: Path, mark: str, *extra: str) -> subprocess.Popen[str]:
    """`autorl run` in the background, every process it starts carrying ``LIFECYCLE_TEST_MARK=mark``."""
    env = {
        "AUTORL_SANDBOX_RO": str(ROOT / "tests"),
        **os.environ,
        "AUTORL_HOME": str(home),
        "LIFECYCLE_TEST_MARK": mark,
    }
    return subprocess.Popen(
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
            "--backend",
            "scripted",
            "--agent-env",
            f"LIFECYCLE_TEST_MARK={mark}",
            "--json",
            *extra,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def marked(mark: str) -> list[tuple[int, str]]:
    """Every live process whose environment holds the run's mark (pid, command line)."""
    needle = f"LIFECYCLE_TEST_MARK={mark}".encode() + b"\0"
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ, status = (proc / "environ").read_bytes(), (proc / "status").read_text()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in environ and "zombie" not in status.lower():
            found.append((int(proc.name), cmdline))
    return found


def wait_for(path_glob: str, root: Path, timeout: float, proc: subprocess.Popen[str]) -> Path:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        hits = sorted(root.glob(path_glob))
        if hits:
            return hits[0]
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early ({proc.returncode}): {proc.communicate()[1]}")
        time.sleep(0.2)
    raise AssertionError(f"no {path_glob} under {root} within {timeout} s")


def gone_within(mark: str, seconds: float) -> list[tuple[int, str]]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        left = marked(mark)
        if not left:
            return []
        time.sleep(0.2)
    return marked(mark)


def kill_marked(mark: str) -> None:
    for pid, _ in marked(mark):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def stub_base(tmp_path: Path) -> Path:
    # 5 of 20 dev items (25%), 6 of 30 test items (20%)
    return write_stub_checkpoint(tmp_path / "stub-base", {**echo_answers(5), **echo_answers(6, "test")})


@pytest.mark.e2e
@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_killed_orchestrator_leaves_no_process_and_recover_records_the_run(
    home: Path, tmp_path: Path, stub_base: Path, sandbox: str
) -> None:
    mark = uuid.uuid4().hex
    agent = agent_folder(
        tmp_path / "agents",
        "two",
        f"""
        make_ckpt v1 8 null 9
        submit v1
        make_ckpt v2 14 null 18
        submit v2
        make_ckpt v3 16 '{{"sleep": 2}}' 21
        {SUBMIT_NOWAIT.replace("$1", "v3")}
        touch "$WORKSPACE/code/two-scored"
        sleep 1000
    """,
    )
    run = start_run(home, agent, stub_base, mark, "--timeout", "300", "--sandbox", sandbox)
    try:
        wait_for("runs/echo/*/code/two-scored", home, 120, run)
        assert any("autorl.grader.server" in c for _, c in marked(mark))
        run.send_signal(signal.SIGKILL)
        run.wait()
        left = gone_within(mark, 10)
        assert not left, left
    finally:
        run.kill()
        kill_marked(mark)
    env = {"AUTORL_HOME": str(home)}
    doctor = json.loads(cli("doctor", "--json", env=env, check=True).stdout)
    lost = next(c for c in doctor if c["name"] == "lost runs")
    assert not lost["ok"] and "autorl recover" in lost["fix"]
    run_id = lost["fix"].split()[-1]
    listed = cli("results", env=env, check=True)  # the table says so too, with the command
    assert f"lost: run {run_id}" in listed.stderr and f"autorl recover {run_id}" in listed.stderr

    out = json.loads(cli("recover", run_id, "--json", env=env, check=True).stdout)
    assert [d["action"] for d in out] == ["recorded"]
    row = json.loads(cli("results", "--json", env=env, check=True).stdout)[-1]
    assert row["run_id"] == run_id and row["submissions"] == 3 and row["dev_k"] == 3
    # the queued third submission was scored on recovery, and the best on dev scored once on the test split
    assert row["best_submission"] == 3 and row["dev_best"] == pytest.approx(80.0)
    assert row["test_score"] == pytest.approx(70.0) and row["baseline"] == pytest.approx(20.0)
    assert row["end_reason"].startswith("orchestrator lost at ") and row["success"] is False
    result = json.loads((Path(row["workspace"]) / "result.json").read_text())
    assert [s["status"] for s in result["submissions"]] == ["done"] * 3
    assert not marked(mark)

    again = json.loads(cli("recover", run_id, "--json", env=env, check=True).stdout)
    assert [d["action"] for d in again] == ["already recorded"]
    assert json.loads(cli("results", "--json", env=env, check=True).stdout) == json.loads(
        cli("results", "--json", env=env, check=True).stdout
    )
    assert json.loads(cli("recover", "--all", "--json", env=env, check=True).stdout) == []
    doctor = json.loads(cli("doctor", "--json", env=env, check=True).stdout)
    assert not any(c["name"] == "lost runs" for c in doctor)


@pytest.mark.e2e
def test_a_run_killed_before_its_baseline_is_recorded_as_lost(home: Path, tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    slow_base = write_stub_checkpoint(tmp_path / "slow-base", echo_answers(5), {"sleep": 60})
    agent = agent_folder(tmp_path / "agents", "never", 'touch "$WORKSPACE/code/started"\n')
    run = start_run(home, agent, slow_base, mark, "--timeout", "60", "--sandbox", "none")
    try:
        wait_for("grader/*/grader.db", home, 60, run)
        time.sleep(1.0)
        run.send_signal(signal.SIGKILL)
        run.wait()
        assert not gone_within(mark, 10)
    finally:
        run.kill()
        kill_marked(mark)
    env = {"AUTORL_HOME": str(home)}
    out = json.loads(cli("recover", "--all", "--json", env=env, check=True).stdout)
    assert len(out) == 1 and out[0]["action"] == "recorded"
    row = json.loads(cli("results", "--json", env=env, check=True).stdout)[-1]
    assert row["end_reason"].startswith("orchestrator lost at ") and "before its baseline" in row["end_reason"]
    assert row["submissions"] == 0 and row["success"] is False and row["baseline"] is None
    assert not list(home.glob("runs/echo/*/code/started"))


@pytest.mark.e2e
def test_grader_killed_mid_run_is_restarted_and_the_run_keeps_every_submission(
    home: Path, tmp_path: Path, stub_base: Path
) -> None:
    mark = uuid.uuid4().hex
    agent = agent_folder(
        tmp_path / "agents",
        "survivor",
        """
        make_ckpt v1 8 null 9
        submit v1
        touch "$WORKSPACE/code/first"
        while [ ! -e "$WORKSPACE/code/go" ]; do sleep 0.2; done
        make_ckpt v2 14 null 18
        for i in $(seq 1 100); do
            out=$(submit v2)
            case "$out" in *'"status":"done"'*|*'"status": "done"'*) break;; esac
            sleep 0.3
        done
        echo "$out" > "$WORKSPACE/code/second.json"
    """,
    )
    run = start_run(home, agent, stub_base, mark, "--timeout", "120", "--sandbox", "none")
    try:
        first = wait_for("runs/echo/*/code/first", home, 120, run)
        graders = [pid for pid, c in marked(mark) if "autorl.grader.server" in c]
        assert len(graders) == 1
        os.kill(graders[0], signal.SIGKILL)
        (first.parent / "go").touch()
        stdout, stderr = run.communicate(timeout=200)
    finally:
        run.kill()
        kill_marked(mark)
    assert run.returncode == 0, stderr
    row = json.loads(stdout)
    assert row["submissions"] == 2 and row["dev_k"] == 2 and row["best_submission"] == 2
    assert row["test_score"] == pytest.approx(60.0)
    second = json.loads((first.parent / "second.json").read_text())
    assert second["submission_id"] == 2 and second["status"] == "done"
    assert not gone_within(mark, 10)


@pytest.mark.e2e
def test_a_grader_that_keeps_dying_ends_the_run_recorded_from_its_store(
    home: Path, tmp_path: Path, stub_base: Path
) -> None:
    mark = uuid.uuid4().hex
    agent = agent_folder(
        tmp_path / "agents",
        "orphaned",
        """
        make_ckpt v1 8 null 9
        submit v1
        touch "$WORKSPACE/code/first"
        while [ ! -e "$WORKSPACE/code/go" ]; do sleep 0.2; done
    """,
    )
    run = start_run(home, agent, stub_base, mark, "--timeout", "120", "--sandbox", "none")
    try:
        first = wait_for("runs/echo/*/code/first", home, 120, run)
        killed: set[int] = set()
        end = time.monotonic() + 60
        while time.monotonic() < end:
            graders = [pid for pid, c in marked(mark) if "autorl.grader.server" in c and pid not in killed]
            if graders:
                os.kill(graders[0], signal.SIGKILL)
                killed.add(graders[0])
                end = time.monotonic() + 8  # the next one, if it is started again
            time.sleep(0.1)
        assert 2 <= len(killed) <= 4
        (first.parent / "go").touch()
        stdout, stderr = run.communicate(timeout=120)
    finally:
        run.kill()
        kill_marked(mark)
    assert run.returncode == 0, stderr
    row = json.loads(stdout)
    assert row["end_reason"].startswith("grader lost (") and row["end_reason"].endswith("recorded from its store")
    assert row["submissions"] == 1 and row["dev_k"] == 1 and row["dev_best"] == pytest.approx(40.0)
    assert row["success"] is False and row["test_score"] is None
    recorded = json.loads(cli("results", "--json", env={"AUTORL_HOME": str(home)}, check=True).stdout)
    assert [r["run_id"] for r in recorded] == [row["run_id"]]
    assert not gone_within(mark, 10)


@pytest.mark.e2e
def test_grader_killed_during_the_baseline_is_restarted_and_the_run_goes_on(home: Path, tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    slow_base = write_stub_checkpoint(
        tmp_path / "slow-base", {**echo_answers(5), **echo_answers(6, "test")}, {"sleep": 3}
    )
    agent = agent_folder(tmp_path / "agents", "after", "make_ckpt v1 8 null 9\nsubmit v1\n")
    run = start_run(home, agent, slow_base, mark, "--timeout", "60", "--sandbox", "none")
    try:
        wait_for("grader/*/logs/baseline-dev.log", home, 60, run)
        graders = [pid for pid, c in marked(mark) if "autorl.grader.server" in c]
        assert len(graders) == 1
        os.kill(graders[0], signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=200)
    finally:
        run.kill()
        kill_marked(mark)
    assert run.returncode == 0, stderr
    row = json.loads(stdout)
    assert row["dev_baseline"] == pytest.approx(25.0) and row["baseline"] == pytest.approx(20.0)
    assert row["submissions"] == 1 and row["test_score"] == pytest.approx(30.0)
    result = json.loads((Path(row["workspace"]) / "result.json").read_text())
    assert len(result["meta"]["grader"]["restarts"]) == 1
