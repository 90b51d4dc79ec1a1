"""The built-in llm agent, driven by a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .conftest import cli
from .scripted_llm import call, reply, scripted_server

TRAIN = """import os, shutil
shutil.copytree(os.environ["MODEL_PATH"], os.path.join(os.environ["OUTPUT_DIR"], "v1"))
print("trained")
"""


def test_realistic_episode_on_the_demo(shared_home: Path, tiny_model: Path, tmp_path: Path) -> None:
    script = [
        reply(call("write_file", {"path": "code/train.py", "content": TRAIN})),
        reply(call("run_shell", {"command": '"$AUTORL_PYTHON" code/train.py'})),
        reply(call("submit", {"model_path": "output/v1"})),
        reply(call("finish", {"summary": "submitted v1"}), prompt_tokens=300),
    ]
    with scripted_server(script) as (url, requests):
        proc = cli(
            "run",
            "--agent",
            "llm",
            "--task",
            "arith",
            "--model",
            "autorl:tiny",
            "--timeout",
            "120",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--json",
            env={
                "AUTORL_HOME": str(shared_home),
                "OPENAI_API_BASE": url,
                "OPENAI_API_KEY": "test-key",
                "CHAT_MODEL": "scripted-model",
            },
        )
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert row["submissions"] == 1 and row["success"] is True
    assert row["best_score"] == row["baseline"]  # the "training" copied the base model
    assert row["llm_tokens"] == 100 + 100 + 100 + 300 + 4 * 20
    assert len(requests) == 4 and requests[0]["model"] == "scripted-model"
    assert row["driver_model"] == "scripted-model"  # the model it called (its configuration names the same)
    assert {t["function"]["name"] for t in requests[0]["tools"]} >= {
        "run_shell",
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "time_left",
        "submit",
        "finish",
    }
    system = requests[0]["messages"][0]["content"]
    assert "# Instructions" in system and "arith" in system
    assert "trained" in requests[2]["messages"][-1]["content"]
    submitted = json.loads(requests[3]["messages"][-1]["content"])
    assert submitted["status"] == "done" and submitted["score"] == row["dev_baseline"]
    steps = [json.loads(x) for x in (Path(row["workspace"]) / "trajectory.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps if "step" in s] == [1, 2, 3, 4]
    assert steps[-1]["event"] == "end" and steps[-1]["stop_reason"] == "finished"


def run_loop(tmp_path: Path, url: str, **limits: str) -> dict[str, Any]:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "instructions.md").write_text("# Instructions\n")
    env = {
        "PATH": os.environ["PATH"],
        "WORKSPACE": str(ws),
        "AUTORL_DEADLINE": str(time.time() + 120),
        "OPENAI_API_BASE": url,
        "OPENAI_API_KEY": "k",
        "CHAT_MODEL": "m",
        "GRADING_SERVER_URL": "http://127.0.0.1:9",
        "AUTORL_TOKEN": "t",
        **limits,
    }
    proc = subprocess.run(
        [sys.executable, "-m", "autorl.agents.llm_loop"], cwd=ws, env=env, capture_output=True, text=True, timeout=300
    )
    usage = json.loads((ws / "llm_usage.json").read_text())
    usage["returncode"] = proc.returncode
    usage["trajectory"] = [json.loads(x) for x in (ws / "trajectory.jsonl").read_text().splitlines()]
    return usage


def test_step_budget(tmp_path: Path) -> None:
    with scripted_server([reply(call("time_left"))] * 5) as (url, requests):
        usage = run_loop(tmp_path, url, AUTORL_LLM_MAX_STEPS="2")
    assert usage["stop_reason"] == "max_steps" and usage["steps"] == 2 and len(requests) == 2


def test_token_and_cost_budgets(tmp_path: Path) -> None:
    with scripted_server([reply(call("time_left"), prompt_tokens=600)] * 5) as (url, _):
        usage = run_loop(tmp_path, url, AUTORL_LLM_MAX_TOKENS="1000")
    assert usage["stop_reason"] == "max_tokens" and usage["steps"] == 2
    with scripted_server([reply(call("time_left"), prompt_tokens=1_000_000, completion_tokens=0)] * 5) as (url, _):
        usage = run_loop(tmp_path / "cost", url, AUTORL_LLM_MAX_COST="2.5", AUTORL_LLM_PRICE_IN="1.0")
    assert usage["stop_reason"] == "max_cost" and usage["steps"] == 3 and usage["cost_usd"] == 3.0


def test_malformed_tool_calls_get_an_error_back(tmp_path: Path) -> None:
    script = [
        reply(call("write_file", "{not json")),
        reply(call("no_such_tool", {})),
        reply(call("read_file", {"path": "../../etc/passwd"})),
        reply(call("finish")),
    ]
    with scripted_server(script) as (url, requests):
        usage = run_loop(tmp_path, url)
    assert usage["stop_reason"] == "finished" and usage["malformed_tool_calls"] == 1
    assert requests[1]["messages"][-1]["role"] == "tool" and requests[1]["messages"][-1]["content"].startswith("error:")
    assert "unknown tool" in requests[2]["messages"][-1]["content"]
    assert "outside the workspace" in requests[3]["messages"][-1]["content"]


def test_server_errors_are_retried(tmp_path: Path) -> None:
    with scripted_server([500, 429, reply(call("finish"))]) as (url, requests):
        usage = run_loop(tmp_path, url)
    assert usage["stop_reason"] == "finished" and usage["retries"] == 2 and len(requests) == 3


def test_context_overflow_compacts_instead_of_failing(tmp_path: Path) -> None:
    big = {"command": "python3 -c \"print('x' * 20000)\""}
    script = [
        reply(call("run_shell", big)),
        reply(call("run_shell", big)),
        reply(call("run_shell", big)),
        reply(call("finish")),
    ]
    with scripted_server(script) as (url, requests):
        usage = run_loop(tmp_path, url, AUTORL_LLM_CONTEXT="5000")
    assert usage["stop_reason"] == "finished" and usage["compactions"] >= 1
    assert any(e.get("event") == "compaction" for e in usage["trajectory"])
    last = requests[-1]["messages"]
    assert any(m["role"] == "tool" and m["content"].startswith("[elided") for m in last)
    assert all(len(m.get("content") or "") <= 8100 for m in last)  # tool output is cut head + tail


def test_agent_lists_as_not_ready_without_credentials() -> None:
    env = {k: "" for k in ("OPENAI_API_KEY", "OPENAI_API_BASE")}
    rows = {r["name"]: r for r in json.loads(cli("list", "agents", "--json", env=env, check=True).stdout)}
    assert rows["llm"]["ready"] is False and "OPENAI_API_KEY" in rows["llm"]["status"]
    rows = {
        r["name"]: r
        for r in json.loads(cli("list", "agents", "--json", env={"OPENAI_API_KEY": "x"}, check=True).stdout)
    }
    assert rows["llm"]["ready"] is True


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_timed_out_shell_command_is_killed_with_everything_it_started(tmp_path: Path) -> None:
    # a "training job" started in the background by the command: it must not outlive the timeout
    job = {"command": "sleep 300 & echo $! > job.pid; wait", "timeout_s": 2}
    with scripted_server([reply(call("run_shell", job)), reply(call("finish"))]) as (url, requests):
        usage = run_loop(tmp_path, url)
    assert usage["stop_reason"] == "finished"
    assert "timed out after 2 s" in requests[1]["messages"][-1]["content"]
    pid = int((tmp_path / "ws" / "job.pid").read_text())
    deadline = time.time() + 10
    while _alive(pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)
