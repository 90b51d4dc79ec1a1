"""`autorl run` end to end: real subprocess agents, a real grader process, the ledger and results.csv."""

from __future__ import annotations

import csv
import io
import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from autorl.record.display import fmt_p

from .conftest import cli, echo_answers, write_stub_checkpoint

SUBMIT = (
    'curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Content-Type: application/json" '
    '-H "Authorization: Bearer $AUTORL_TOKEN" -d "{\\"model_path\\": \\"$OUTPUT_DIR/$1\\"}"'
)


def agent_folder(root: Path, name: str, body: str, env_vars: dict[str, str] | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(
        json.dumps({"name": f"test agent {name}", "start": "start.sh", "env_vars": env_vars or {}})
    )
    script = textwrap.dedent(f"""\
        #!/usr/bin/env bash
        submit() {{ {SUBMIT}; echo; }}
        make_ckpt() {{ "$AUTORL_PYTHON" -c "import sys, json; sys.path.insert(0, '$TESTS_DIR'); \\
            from tests.conftest import write_stub_checkpoint, echo_answers; \\
            write_stub_checkpoint(__import__('pathlib').Path('$OUTPUT_DIR') / '$1', \\
                {{**echo_answers($2), **echo_answers(${{4:-0}}, 'test')}}, json.loads('${{3:-null}}'))"; }}
        """) + textwrap.dedent(body)
    (folder / "start.sh").write_text(script.replace("$TESTS_DIR", str(Path(__file__).resolve().parent.parent)))
    return folder


@pytest.fixture
def stub_base(tmp_path: Path) -> Path:
    # 5 of 20 dev items (25%), 6 of 30 test items (20%)
    return write_stub_checkpoint(tmp_path / "stub-base", {**echo_answers(5), **echo_answers(6, "test")})


def run_json(home: Path, *args: str, timeout: float = 600) -> dict[str, object]:
    proc = cli("run", *args, "--json", env={"AUTORL_HOME": str(home)}, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


@pytest.mark.e2e
def test_agent_environment_workspace_and_results_from_the_grader(home: Path, tmp_path: Path, stub_base: Path) -> None:
    agent = agent_folder(
        tmp_path / "agents",
        "envcheck",
        """
        env > "$WORKSPACE/code/env.txt"
        ls -la "$WORKSPACE" > "$WORKSPACE/code/ls.txt"
        make_ckpt v1 12 null 21
        submit v1 > "$WORKSPACE/code/submit.json"
        chmod u+w "$WORKSPACE/scores.json"; echo '[{"submission_id": 1, "score": 100.0}]' > "$WORKSPACE/scores.json"
        echo '{"row": {"best_score": 100}}' > "$WORKSPACE/result.json"
    """,
        env_vars={"FROM_CONFIG": "cfg-$TASK", "OVERRIDDEN": "no"},
    )
    os.environ["SECRET_API_KEY"] = "must-not-leak"
    try:
        row = run_json(
            home,
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
            "--agent-env",
            "OVERRIDDEN=yes",
            "--seed",
            "7",
        )
    finally:
        del os.environ["SECRET_API_KEY"]
    ws = Path(str(row["workspace"]))
    env = dict(line.split("=", 1) for line in (ws / "code" / "env.txt").read_text().splitlines() if "=" in line)
    for key in (
        "TASK",
        "BASE_MODEL",
        "WORKSPACE",
        "MODEL_PATH",
        "DATA_PATH",
        "OUTPUT_DIR",
        "GRADING_SERVER_URL",
        "AUTORL_TOKEN",
        "AUTORL_DEADLINE",
    ):
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
    # the agent forged scores.json and result.json; the run's numbers are the grader's. The headline is the
    # dev-selected checkpoint on the hidden test split against the test baseline; dev figures are named so
    assert row["best_score"] == pytest.approx(70.0) and row["test_score"] == pytest.approx(70.0)
    assert row["baseline"] == pytest.approx(20.0) and row["improvement"] == pytest.approx(50.0)
    assert row["improvement_ci95"] == row["test_improvement_ci95"] and row["improvement_ci95"][0] > 0
    assert row["p_value"] is not None and row["p_value"] < 0.05
    assert row["dev_best"] == pytest.approx(60.0) and row["dev_baseline"] == pytest.approx(25.0)
    assert row["dev_improvement"] == pytest.approx(35.0) and row["dev_k"] == 1
    assert row["sandbox"] in ("bwrap", "none") and row["llm_usage_source"] is None
    assert row["success"] is True and row["submissions"] == 1 and row["seed"] == 7
    assert json.loads((ws / "result.json").read_text())["row"]["best_score"] == pytest.approx(70.0)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("name", "body", "success", "reason"),
    [
        ("crasher", "make_ckpt v1 10\nsubmit v1\nexit 3\n", False, "agent exited with code 3"),
        ("idle", "echo nothing to do\n", False, "no scored submission"),
        (
            "broken-ckpt",
            "mkdir -p $OUTPUT_DIR/bad && echo x > $OUTPUT_DIR/bad/config.json\nsubmit bad\n",
            False,
            "no scored submission",
        ),
    ],
)
def test_agents_that_fail_end_the_run_cleanly(
    home: Path, tmp_path: Path, stub_base: Path, name: str, body: str, success: bool, reason: str
) -> None:
    agent = agent_folder(tmp_path / "agents", name, body)
    row = run_json(
        home,
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
    )
    assert row["success"] is success and row["end_reason"] == reason


@pytest.mark.e2e
def test_overrunning_agent_and_its_children_are_stopped(home: Path, tmp_path: Path, stub_base: Path) -> None:
    agent = agent_folder(
        tmp_path / "agents",
        "overrun",
        """
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
        make_ckpt late 15 '{"sleep": 4}' 24
        submit late
        sleep 1000
    """,
    )
    started = time.time()
    row = run_json(
        home,
        "--agent",
        str(agent),
        "--task",
        "echo",
        "--model",
        str(stub_base),
        "--timeout",
        "15",
        "--backend",
        "scripted",
    )
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
    assert row["submissions"] == 2 and row["dev_best"] == pytest.approx(75.0) and row["dev_k"] == 2
    assert row["best_submission"] == 2 and row["best_score"] == pytest.approx(80.0)


@pytest.mark.e2e
def test_demo_run_improves_on_its_baseline(shared_home: Path, tiny_model: Path, tmp_path: Path) -> None:
    """A shorter version of the README's demo: the example GRPO agent on arith with autorl:tiny."""
    row = run_json(
        shared_home,
        "--agent",
        "example",
        "--task",
        "arith",
        "--model",
        "autorl:tiny",
        "--timeout",
        "240",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--agent-env",
        "GRPO_SUBMIT_EVERY_S=40",
        "--off-target",
        "basics",
    )
    assert row["success"] is True
    # the Quick start's off-target check can show a change: the base model scores above 0 there
    (basics,) = row["off_target"]  # type: ignore[misc]
    assert basics["task"] == "basics" and basics["base"] > 0 and basics["error"] is None, basics
    # the headline is the held-out test split: the dev-selected checkpoint against the test baseline
    assert row["test_score"] is not None and row["best_score"] == row["test_score"]
    assert row["best_score"] > row["baseline"] == row["test_baseline"]
    lo, _hi = row["test_improvement_ci95"]
    assert lo > 0, row
    assert row["improvement_ci95"] == row["test_improvement_ci95"] and row["p_value"] < 0.05
    assert row["dev_k"] >= 1 and row["dev_best"] is not None
    results = json.loads(cli("results", "--json", env={"AUTORL_HOME": str(shared_home)}, check=True).stdout)
    assert results[-1]["run_id"] == row["run_id"] and results[-1]["best_score"] == row["best_score"]
    assert results[-1]["audit_flags"] == []  # a clean run raises no audit flag
    with (shared_home / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    mine = next(r for r in rows if r["run_id"] == row["run_id"])
    for column in (
        "run_id",
        "timestamp",
        "task",
        "agent",
        "base_model",
        "baseline",
        "best_score",
        "improvement",
        "submissions",
        "duration_s",
        "success",
        "workspace",
        "improvement_ci95",
        "p_value",
        "dev_baseline",
        "dev_best",
        "dev_improvement",
        "dev_improvement_ci95",
        "dev_k",
        "sandbox",
        "llm_usage_source",
    ):
        assert column in mine
    assert mine["success"] == "True" and json.loads(mine["improvement_ci95"])[0] > 0
    assert mine["test_score"] == mine["best_score"] and int(mine["dev_k"]) == row["dev_k"]


def _state(dev_scores: list[float], dev_baseline: float = 25.0) -> dict[str, object]:
    # the grader's records: each scored submission carries its improvement over the dev baseline
    subs = [
        {
            "submission_id": i + 1,
            "status": "done",
            "score": s,
            "improvement": s - dev_baseline,
            "improvement_ci95": [1.0, 9.0],
            "p_value": 0.01,
        }
        for i, s in enumerate(dev_scores)
    ]
    best = max(subs, key=lambda s: s["score"]) if subs else None  # type: ignore[arg-type, return-value]
    return {
        "submissions": subs,
        "baseline_score": dev_baseline,
        "baseline": {"config_hash": "h"},
        "best": {"submission_id": best["submission_id"], "score": best["score"]} if best else None,
    }


@pytest.mark.parametrize(
    "test",
    [
        None,
        {
            "submission_id": 2,
            "status": "failed",
            "score": None,
            "error": "worker died",
            "baseline_score": None,
            "improvement": None,
        },
    ],
)
def test_a_run_without_a_test_score_has_no_headline(tmp_path: Path, test: dict[str, object] | None) -> None:
    """Best of k on dev is biased upward: it never stands in for the held-out number."""
    from autorl.record.row import run_row

    now = time.time()
    row = run_row(
        run_id="r",
        started=now,
        finished=now,
        task="echo",
        agent="a",
        base_model="m",
        workspace=str(tmp_path),
        seed=0,
        sandbox="none",
        state=_state([30.0, 55.0, 40.0]),
        test=test,
        outcome={"timed_out": True, "exit_code": None, "reason": "timed out"},
    ).record()
    assert row["improvement"] is None and row["improvement_ci95"] is None and row["p_value"] is None
    assert row["baseline"] is None and row["best_score"] is None and row["success"] is False
    assert row["dev_best"] == 55.0 and row["dev_improvement"] == 30.0 and row["dev_k"] == 3
    assert row["dev_improvement_ci95"] == [1.0, 9.0] and row["end_reason"].startswith("no test score")
    assert row["sandbox"] == "none"


def test_results_show_the_test_headline_and_upgrade_older_rows(home: Path) -> None:
    from autorl.record.ledger import Ledger

    old = {
        "run_id": "old",
        "timestamp": "2026-01-01 00:00:00",
        "task": "echo",
        "agent": "a",
        "base_model": "m",
        "baseline": 25.0,
        "best_score": 60.0,
        "improvement": 35.0,
        "improvement_ci95": [20.0, 50.0],
        "p_value": 0.001,
        "submissions": 2,
        "success": True,
        "workspace": "/x",
        "test_baseline": 20.0,
        "test_score": 22.0,
        "test_improvement": 2.0,
        "test_improvement_ci95": [-5.0, 9.0],
    }
    untested = {
        **old,
        "run_id": "untested",
        "test_baseline": None,
        "test_score": None,
        "test_improvement": None,
        "test_improvement_ci95": None,
    }
    subs = [
        {"submission_id": 1, "status": "done", "score": 60.0},
        {"submission_id": 2, "status": "failed", "score": None},
    ]
    ledger = Ledger(home / "autorl.db")
    for row in (old, untested):
        ledger.ingest({"row": row, "submissions": subs})
    ledger.export_csv(home / "results.csv")
    ledger.close()
    rows = {r["run_id"]: r for r in json.loads(cli("results", "--json", check=True).stdout)}
    assert rows["old"]["improvement"] == 2.0 and rows["old"]["baseline"] == 20.0 and rows["old"]["best_score"] == 22.0
    assert rows["old"]["improvement_ci95"] == [-5.0, 9.0] and rows["old"]["p_value"] is None
    assert rows["old"]["dev_improvement"] == 35.0 and rows["old"]["dev_best"] == 60.0 and rows["old"]["dev_k"] == 1
    assert rows["untested"]["improvement"] is None and rows["untested"]["success"] is False
    with (home / "results.csv").open() as f:
        csv_rows = {r["run_id"]: r for r in csv.DictReader(f)}
    assert csv_rows["old"]["improvement"] == "2.0" and csv_rows["old"]["dev_improvement"] == "35.0"
    assert csv_rows["untested"]["improvement"] == "" and csv_rows["untested"]["success"] == "False"
    out = cli("results", "--format", "csv", check=True).stdout
    assert next(iter(csv.DictReader(io.StringIO(out))))["improvement"] == "2.0"
    md = cli("results", "--format", "markdown", check=True).stdout.splitlines()
    header = [c.strip() for c in md[0].strip("|").split("|")]
    cells = [c.strip() for c in md[2].strip("|").split("|")]
    assert dict(zip(header, cells, strict=True))["improvement"] == "2.00"
    assert dict(zip(header, cells, strict=True))["dev best (k)"] == "60.00 (1)"
    table = cli("results", "--wide", check=True, env={"COLUMNS": "300"}).stdout
    assert "held-out test" in table and "35.00" in table


def test_the_e2e_session_selects_the_end_to_end_runs() -> None:
    """`nox -s e2e` runs `pytest -m e2e`: the marker is registered and carried by the `autorl run` tests."""
    import subprocess
    import sys

    from .conftest import ROOT

    assert '"-m", "e2e"' in (ROOT / "noxfile.py").read_text()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-m",
            "e2e",
            "--strict-markers",
            "tests/test_run.py",
            "tests/test_audit.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    selected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert any("test_demo_run_improves_on_its_baseline" in t for t in selected)
    assert any("test_hidden_items_the_agent_hid_are_found" in t for t in selected)
    assert not any("test_a_run_without_a_test_score_has_no_headline" in t for t in selected)


@pytest.mark.e2e
def test_a_run_without_a_sandbox_says_so_everywhere(home: Path, tmp_path: Path, stub_base: Path) -> None:
    """`--sandbox auto` where bubblewrap cannot run: a warning naming the strict mode, the mode in the row,
    results.csv and `autorl results`, and a high audit flag."""
    agent = agent_folder(tmp_path / "agents", "plain", "make_ckpt v1 12 null 21\nsubmit v1\n")
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
        "--sandbox",
        "auto",
        "--json",
        env={"AUTORL_HOME": str(home), "AUTORL_BWRAP": str(tmp_path / "no-bwrap-here")},
    )
    assert proc.returncode == 0, proc.stderr
    assert "--sandbox bwrap refuses to run without a sandbox" in proc.stderr
    row = json.loads(proc.stdout)
    assert row["sandbox"] == "none" and row["improvement"] == pytest.approx(50.0)
    assert row["timeout_s"] == 60.0  # the budget is recorded: runs of other budgets are not pooled with it
    results = json.loads(cli("results", "--json", env={"AUTORL_HOME": str(home)}, check=True).stdout)
    assert results[-1]["sandbox"] == "none" and "no-sandbox(high)" in results[-1]["audit_flags"]
    with (home / "results.csv").open() as f:
        assert next(csv.DictReader(f))["sandbox"] == "none"
    table = cli("results", "--wide", env={"AUTORL_HOME": str(home), "COLUMNS": "300"}, check=True).stdout
    assert " none " in table and fmt_p(results[-1]["p_value"]) in table


def test_runs_started_in_the_same_second_get_their_own_run_ids(tmp_path: Path) -> None:
    """A study's slots start runs together, each with its own runs folder but one home: the run id (the ledger's
    key, the grader store's name) is claimed in the home, so none is shared."""
    from concurrent.futures import ThreadPoolExecutor

    from autorl.runs.place import new_run_id

    home = tmp_path / "home"
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda i: new_run_id(tmp_path / f"runs{i % 2}" / "arith", "copier", home), range(16)))
    ids = [run_id for run_id, _ in got]
    assert len(set(ids)) == 16 and all(root.is_dir() for _, root in got)
