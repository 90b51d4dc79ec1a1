"""`autorl run` end to end: real subprocess agents, a real grader process, the ledger and results.csv."""

from __future__ import annotations

import csv
import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from .conftest import cli, echo_answers, write_stub_checkpoint

SUBMIT = 'curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Content-Type: application/json" ' \
         '-H "Authorization: Bearer $AUTORL_TOKEN" -d "{\\"model_path\\": \\"$OUTPUT_DIR/$1\\"}"'


def agent_folder(root: Path, name: str, body: str, env_vars: dict[str, str] | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(json.dumps({"name": f"test agent {name}", "start": "start.sh",
                                                    "env_vars": env_vars or {}}))
    script = textwrap.dedent(f"""\
        #!/usr/bin/env bash
        submit() {{ {SUBMIT}; echo; }}
        make_ckpt() {{ "$AUTORL_PYTHON" -c "import sys, json; sys.path.insert(0, '$TESTS_DIR'); \\
            from tests.conftest import write_stub_checkpoint, echo_answers; \\
            write_stub_checkpoint(__import__('pathlib').Path('$OUTPUT_DIR') / '$1', echo_answers($2), json.loads('${{3:-null}}'))"; }}
        """) + textwrap.dedent(body)
    (folder / "start.sh").write_text(script.replace("$TESTS_DIR", str(Path(__file__).resolve().parent.parent)))
    return folder


@pytest.fixture
def stub_base(tmp_path: Path) -> Path:
    return write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))


def run_json(home: Path, *args: str, timeout: float = 600) -> dict[str, object]:
    proc = cli("run", *args, "--json", env={"AUTORL_HOME": str(home)}, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_agent_environment_workspace_and_results_from_the_grader(home: Path, tmp_path: Path, stub_base: Path) -> None:
    agent = agent_folder(tmp_path / "agents", "envcheck", """
        env > "$WORKSPACE/code/env.txt"
        ls -la "$WORKSPACE" > "$WORKSPACE/code/ls.txt"
        make_ckpt v1 12
        submit v1 > "$WORKSPACE/code/submit.json"
        chmod u+w "$WORKSPACE/scores.json"; echo '[{"submission_id": 1, "score": 100.0}]' > "$WORKSPACE/scores.json"
        echo '{"row": {"best_score": 100}}' > "$WORKSPACE/result.json"
    """, env_vars={"FROM_CONFIG": "cfg-$TASK", "OVERRIDDEN": "no"})
    os.environ["SECRET_API_KEY"] = "must-not-leak"
    try:
        row = run_json(home, "--agent", str(agent), "--task", "echo", "--model", str(stub_base), "--timeout", "60",
                       "--backend", "scripted", "--agent-env", "OVERRIDDEN=yes", "--seed", "7")
    finally:
        del os.environ["SECRET_API_KEY"]
    ws = Path(str(row["workspace"]))
    env = dict(line.split("=", 1) for line in (ws / "code" / "env.txt").read_text().splitlines() if "=" in line)
    for key in ("TASK", "BASE_MODEL", "WORKSPACE", "MODEL_PATH", "DATA_PATH", "OUTPUT_DIR", "GRADING_SERVER_URL",
                "AUTORL_TOKEN", "AUTORL_DEADLINE"):
        assert env[key], key
    assert env["TASK"] == "echo" and env["BASE_MODEL"] == "stub-base" and env["AUTORL_SEED"] == "7"
    assert env["MODEL_PATH"] == str(ws / "models" / "stub-base") and env["DATA_PATH"] == str(ws / "data")
    assert env["FROM_CONFIG"] == "cfg-echo" and env["OVERRIDDEN"] == "yes"
    assert "SECRET_API_KEY" not in env
    assert float(env["AUTORL_DEADLINE"]) > time.time() - 600
    assert (ws / "models" / "stub-base").resolve() == stub_base.resolve()
    assert (ws / "data" / "train.jsonl").is_file()
    instructions = (ws / "instructions.md").read_text()
    assert "$GRADING_SERVER_URL/submit" in instructions and "Authorization: Bearer $AUTORL_TOKEN" in instructions
    assert "60 seconds" in instructions and "max new tokens: 4" in instructions
    assert (ws / "description.md").read_text().startswith("# echo")
    # hidden data is neither in the workspace nor reachable through its links
    hidden_root = (home / "hidden").resolve()
    for p in ws.rglob("*"):
        assert hidden_root not in p.resolve().parents, p
    for p in ws.rglob("*"):
        if p.is_file() and not p.is_symlink() and p.name not in ("env.txt",):
            assert "say 19" not in p.read_text(errors="ignore") or p.name in ("submit.json", "answers.json"), p
    # the agent forged scores.json and result.json; the run's numbers are the grader's
    assert row["best_score"] == pytest.approx(60.0)
    assert row["baseline"] == pytest.approx(25.0) and row["improvement"] == pytest.approx(35.0)
    assert row["success"] is True and row["submissions"] == 1 and row["seed"] == 7
    assert json.loads((ws / "result.json").read_text())["row"]["best_score"] == pytest.approx(60.0)


@pytest.mark.parametrize(
    ("name", "body", "success", "reason"),
    [
        ("crasher", "make_ckpt v1 10\nsubmit v1\nexit 3\n", False, "agent exited with code 3"),
        ("idle", "echo nothing to do\n", False, "no scored submission"),
        ("broken-ckpt", "mkdir -p $OUTPUT_DIR/bad && echo x > $OUTPUT_DIR/bad/config.json\nsubmit bad\n", False,
         "no scored submission"),
    ],
)
def test_agents_that_fail_end_the_run_cleanly(home: Path, tmp_path: Path, stub_base: Path, name: str, body: str,
                                              success: bool, reason: str) -> None:
    agent = agent_folder(tmp_path / "agents", name, body)
    row = run_json(home, "--agent", str(agent), "--task", "echo", "--model", str(stub_base), "--timeout", "60",
                   "--backend", "scripted")
    assert row["success"] is success and row["end_reason"] == reason


def test_overrunning_agent_and_its_children_are_stopped(home: Path, tmp_path: Path, stub_base: Path) -> None:
    agent = agent_folder(tmp_path / "agents", "overrun", """
        make_ckpt v1 9
        submit v1
        sleep 1000 &
        echo $! >> "$WORKSPACE/code/pids"
        "$AUTORL_PYTHON" -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(1000)' &
        echo $! >> "$WORKSPACE/code/pids"
        echo $$ >> "$WORKSPACE/code/pids"
        trap '' TERM
        # a last submission sent just before the deadline is still evaluated and counts
        while [ "$(date +%s)" -lt "$(( ${AUTORL_DEADLINE%.*} - 2 ))" ]; do sleep 0.2; done
        make_ckpt late 15 '{"sleep": 4}'
        submit late
        sleep 1000
    """)
    started = time.time()
    row = run_json(home, "--agent", str(agent), "--task", "echo", "--model", str(stub_base), "--timeout", "15",
                   "--backend", "scripted")
    assert time.time() - started < 120
    ws = Path(str(row["workspace"]))
    assert len((ws / "code" / "pids").read_text().split()) == 3
    # pids inside a sandbox are those of its own namespace: look for any live process of this run's agent
    # by the environment every one of them inherits
    marker = f"WORKSPACE={ws}".encode() + b"\0"
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                environ, status = (proc / "environ").read_bytes(), (proc / "status").read_text()
            except OSError:
                continue
            assert marker not in environ or "zombie" in status.lower(), status
    assert row["end_reason"] == "timeout" and row["success"] is True
    assert row["submissions"] == 2 and row["best_score"] == pytest.approx(75.0)


def test_demo_run_improves_on_its_baseline(shared_home: Path, tiny_model: Path, tmp_path: Path) -> None:
    """A shorter version of the README's demo: the example GRPO agent on arith with autorl:tiny."""
    row = run_json(shared_home, "--agent", "example", "--task", "arith", "--model", "autorl:tiny",
                   "--timeout", "240", "--runs-dir", str(tmp_path / "runs"), "--agent-env", "GRPO_SUBMIT_EVERY_S=40")
    assert row["success"] is True
    assert row["best_score"] > row["baseline"]
    lo, _hi = row["improvement_ci95"]
    assert lo > 0, row
    assert row["test_score"] is not None and row["test_improvement"] is not None
    results = json.loads(cli("results", "--json", env={"AUTORL_HOME": str(shared_home)}, check=True).stdout)
    assert results[-1]["run_id"] == row["run_id"] and results[-1]["best_score"] == row["best_score"]
    assert results[-1]["audit_flags"] == []  # a clean run raises no audit flag
    with (shared_home / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    mine = next(r for r in rows if r["run_id"] == row["run_id"])
    for column in ("run_id", "timestamp", "task", "agent", "base_model", "baseline", "best_score", "improvement",
                   "submissions", "duration_s", "success", "workspace", "improvement_ci95"):
        assert column in mine
    assert mine["success"] == "True" and json.loads(mine["improvement_ci95"])[0] > 0
