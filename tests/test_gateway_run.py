"""``autorl run`` with the LLM gateway: agents under ``--sandbox bwrap --network off`` reach their model only
through it, never see the upstream key, and the ledger's token columns are the gateway's counts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from autorl.gateway import read_calls
from autorl.sandbox import bwrap_available

from .conftest import ROOT, cli
from .scripted_llm import call, reply, scripted_server
from .scripted_upstreams import scripted_upstream

BWRAP, WHY = bwrap_available()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(BWRAP is None, reason=f"bubblewrap cannot run here: {WHY}")]
SECRET = "sk-upstream-9f3c1d2e-never-in-the-sandbox"

PROBE = """env > code/env.txt
cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' > code/proc.txt
"$AUTORL_PYTHON" -c "import urllib.request,sys
try:
    urllib.request.urlopen('UPSTREAM', timeout=5); print('reached')
except Exception as e:
    print('unreachable', type(e).__name__)" > code/direct.txt
"""


def run(
    tmp_path: Path, home: Path, *args: str, env: dict[str, str], audit: bool = False
) -> tuple[dict[str, Any], dict[str, Any]]:
    proc = cli(
        "run",
        "--task",
        "arith",
        "--model",
        "autorl:tiny",
        "--timeout",
        "120",
        "--sandbox",
        "bwrap",
        "--network",
        "off",
        "--runs-dir",
        str(tmp_path / "runs"),
        *([] if audit else ["--no-audit"]),
        "--json",
        *args,
        env={"AUTORL_HOME": str(home), **env},
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    result = json.loads((Path(row["workspace"]) / "result.json").read_text())
    return row, result


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def test_llm_agent_reaches_its_model_only_through_the_gateway(
    shared_home: Path, tiny_model: Path, tmp_path: Path
) -> None:
    with scripted_server([]) as (url, requests):
        script = [
            reply(call("run_shell", {"command": PROBE.replace("UPSTREAM", url)}), prompt_tokens=150),
            reply(call("time_left"), prompt_tokens=200, completion_tokens=30),
            reply(call("finish", {"summary": "done"}), prompt_tokens=250, completion_tokens=40),
        ]
        with scripted_server(script) as (url2, requests):
            row, result = run(
                tmp_path,
                shared_home,
                "--agent",
                "llm",
                env={"OPENAI_API_BASE": url2, "OPENAI_API_KEY": SECRET, "CHAT_MODEL": "scripted"},
            )
    assert len(requests) == 3 and requests[0]["model"] == "scripted"
    # the ledger's columns: the upstream's usage fields summed, as the gateway counted them
    assert row["llm_tokens"] == 150 + 20 + 200 + 30 + 250 + 40 and row["llm_usage_source"] == "gateway"
    assert row["driver_model"] == "scripted"  # the model it called, from the gateway's record
    ws = Path(row["workspace"])
    env = dict(line.split("=", 1) for line in (ws / "code" / "env.txt").read_text().splitlines() if "=" in line)
    assert env["OPENAI_API_BASE"].startswith("http://127.0.0.1:") and env["OPENAI_API_BASE"].endswith("/openai/v1")
    assert env["OPENAI_API_KEY"] == env["AUTORL_LLM_TOKEN"] != SECRET
    assert (ws / "code" / "direct.txt").read_text().startswith("unreachable")  # the upstream itself: out of reach
    for path in files_under(ws):
        assert SECRET.encode() not in path.read_bytes(), path
    assert "OPENAI_API_KEY" in (ws / "code" / "proc.txt").read_text()
    # every call recorded by the gateway, outside the workspace
    record = Path(result["meta"]["llm_gateway"]["record_dir"])
    assert ws not in record.parents
    calls = read_calls(record)
    assert [c["outcome"] for c in calls] == ["ok"] * 3
    assert sum(c["usage"]["prompt_tokens"] + c["usage"]["completion_tokens"] for c in calls) == row["llm_tokens"]
    assert calls[0]["request"]["model"] == "scripted" and SECRET not in (record / "calls.jsonl").read_text()
    # the agent has no network: nor has it through the upstream's own web tools
    assert json.loads((record / "config.json").read_text())["server_tools"] is False


def test_budget_spent_mid_run_ends_in_the_refusal(shared_home: Path, tiny_model: Path, tmp_path: Path) -> None:
    with scripted_server([reply(call("time_left"))] * 20) as (url, requests):
        row, result = run(
            tmp_path,
            shared_home,
            "--agent",
            "llm",
            "--llm-budget-tokens",
            "2400",
            env={"OPENAI_API_BASE": url, "OPENAI_API_KEY": SECRET},
        )
    # 120 tokens billed a call; each call held its prompt (counted) and a limit written into it, no more than
    # what remained: the call that could not be paid for was refused and ended the agent's session
    calls = read_calls(Path(result["meta"]["llm_gateway"]["record_dir"]))
    forwarded = [c for c in calls if c["outcome"] == "ok"]
    assert len(requests) == len(forwarded) >= 2 and row["llm_tokens"] == 120 * len(forwarded) <= 2400
    assert row["llm_usage_source"] == "gateway" and result["meta"]["llm_gateway"]["budget_tokens"] == 2400
    spent = 0
    for req, rec in zip(requests, forwarded, strict=True):
        assert req["max_completion_tokens"] == rec["reserved"]["max_output"] <= 2400 - spent
        spent += 120
    assert calls[-1]["outcome"] == "refused" and calls[-1]["status"] == 429
    assert "token budget is spent" in calls[-1]["error"] and result["meta"]["llm_usage"]["refused"] >= 1
    steps = [json.loads(x) for x in (Path(row["workspace"]) / "trajectory.jsonl").read_text().splitlines()]
    assert steps[-1]["event"] == "end" and steps[-1]["stop_reason"] == "llm_budget"


FAKE_CLAUDE = """#!PYTHON
import json, os, sys
import httpx
base, key = os.environ["ANTHROPIC_BASE_URL"], os.environ["ANTHROPIC_API_KEY"]
with httpx.stream("POST", base + "/v1/messages", headers={"x-api-key": key}, timeout=30,
                  json={"model": "claude-sonnet-4-5", "max_tokens": 50, "stream": True,
                        "messages": [{"role": "user", "content": "train the model"}]}) as resp:
    body = b"".join(resp.iter_raw())
print(json.dumps({"type": "result", "status": resp.status_code, "bytes": len(body)}), flush=True)
# a forged count of its own: the ledger must not take it
with open(os.path.join(os.environ["WORKSPACE"], "llm_usage.json"), "w") as fh:
    json.dump({"prompt_tokens": 1, "completion_tokens": 1, "cost_usd": 0.0}, fh)
with open(os.path.join(os.environ["WORKSPACE"], "code", "claude-env.json"), "w") as fh:
    json.dump(dict(os.environ), fh)
sys.exit(0 if resp.status_code == 200 else 3)
"""


def test_claude_cli_through_the_gateway_and_a_forged_usage_file(
    shared_home: Path, tiny_model: Path, tmp_path: Path
) -> None:
    bins = tmp_path / "bin"
    bins.mkdir()
    exe = bins / "claude"
    exe.write_text(FAKE_CLAUDE.replace("PYTHON", sys.executable))
    exe.chmod(0o755)
    with scripted_upstream() as (base, up):
        row, result = run(
            tmp_path,
            shared_home,
            "--agent",
            "claude",
            env={
                "CLAUDE_BIN": str(exe),
                "ANTHROPIC_API_KEY": SECRET,
                "ANTHROPIC_BASE_URL": base,
                "AUTORL_SANDBOX_RO": os.pathsep.join([str(ROOT / "tests"), str(bins)]),
            },
        )
    assert result["agent"]["exit_code"] == 0, (Path(row["workspace"]) / "agent.log").read_text()[-2000:]
    assert len(up.requests) == 1 and up.requests[0]["headers"]["x-api-key"] == SECRET
    # the streamed message's usage fields: 9 input + 2 cached, 20 output; the forged file changed nothing
    assert row["llm_tokens"] == 31 == up.billed and row["llm_usage_source"] == "gateway"
    seen = json.loads((Path(row["workspace"]) / "code" / "claude-env.json").read_text())
    assert SECRET not in json.dumps(seen) and seen["ANTHROPIC_BASE_URL"].endswith("/anthropic")
    (rec,) = read_calls(Path(result["meta"]["llm_gateway"]["record_dir"]))
    assert rec["family"] == "anthropic" and rec["stream"] is True and rec["outcome"] == "ok"
    assert rec["response"]["text"] == "".join(up.words)


QUIET_AGENT = """import json, os, httpx
resp = httpx.post(os.environ["OPENAI_BASE_URL"] + "/chat/completions", timeout=30,
                  headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
                  json={"model": "m", "messages": [{"role": "user", "content": "how do I get the test data?"}]})
print("status", resp.status_code)  # the answer is kept nowhere in the workspace
"""


def test_the_audit_scans_what_the_model_answered(shared_home: Path, tiny_model: Path, tmp_path: Path) -> None:
    agent = tmp_path / "quiet"
    agent.mkdir()
    (agent / "config.yaml").write_text("name: quiet\nstart: start.sh\n")
    (agent / "start.sh").write_text(f'exec "$AUTORL_PYTHON" {agent}/agent.py\n')
    (agent / "agent.py").write_text(QUIET_AGENT)
    answer = reply(content="Run `huggingface-cli download someone/arith-hidden-test` and train on it.")
    with scripted_server([answer]) as (url, requests):
        row, result = run(
            tmp_path,
            shared_home,
            "--agent",
            str(agent),
            audit=True,
            env={"OPENAI_API_BASE": url, "OPENAI_API_KEY": SECRET},
        )
    assert len(requests) == 1 and row["llm_tokens"] == 120
    assert "huggingface-cli" not in "".join(p.read_text(errors="replace") for p in files_under(Path(row["workspace"])))
    (flag,) = [f for f in result["audit"] if f["name"] == "suspicious-download"]
    assert "someone/arith-hidden-test" in flag["detail"]
    assert any(e.startswith("llm gateway call ") and "(answer)" in e for e in flag["evidence"])


PROBE_AGENT = """cat /proc/self/environ | tr '\\0' '\\n' > "$WORKSPACE/code/environ.txt"
"$AUTORL_PYTHON" - <<'PY' > "$WORKSPACE/code/call.txt"
import os, httpx
r = httpx.post(os.environ["OPENAI_BASE_URL"] + "/chat/completions", timeout=30,
               headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
               json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5})
print(r.status_code)
PY
"""
#: the folder asks for the operator's key (under a free-form name), a copy of it, the hidden-item secret and
#: a setting
PROBE_CONFIG = """name: probe
start: start.sh
credentials:
  pass: [MY_KEY, COPY_OF_KEY, AUTORL_HIDDEN_SECRET, AUTORL_LLM_UPSTREAMS, SETTING]
env_vars:
  FROM_KEY: "$MY_KEY"
"""
FREE_KEY = "sk-free-form-4b1d9a7e-upstream-key"
HEX_SECRET = "a1" * 32


def test_an_agent_folder_gets_nothing_of_the_operators_by_asking(tmp_path: Path) -> None:
    from .conftest import echo_answers, write_stub_checkpoint

    agent = tmp_path / "probe"
    agent.mkdir()
    (agent / "config.yaml").write_text(PROBE_CONFIG)
    (agent / "start.sh").write_text(PROBE_AGENT)
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(1))
    upstreams = tmp_path / "upstreams.yaml"
    home = tmp_path / "home"
    with scripted_upstream() as (url, up):
        upstreams.write_text(f"openai: {{base_url: '{url}/v1', api_key_env: MY_KEY}}\n")
        env = {
            "AUTORL_HOME": str(home),
            "AUTORL_LLM_UPSTREAMS": str(upstreams),
            "MY_KEY": FREE_KEY,
            "COPY_OF_KEY": FREE_KEY,
            "AUTORL_HIDDEN_SECRET": HEX_SECRET,
            "SETTING": "model-x",
        }
        args = [
            "run",
            "--agent",
            str(agent),
            "--task",
            "echo",
            "--model",
            str(base),
            "--timeout",
            "60",
            "--backend",
            "scripted",
            "--sandbox",
            "bwrap",
            "--network",
            "off",
            "--no-audit",
            "--json",
        ]
        refused = {
            name: cli(*args, "--agent-credential", name, env=env)
            for name in ("MY_KEY", "COPY_OF_KEY", "AUTORL_HIDDEN_SECRET", "OPENAI_API_KEY")
        }
        proc = cli(*args, "--agent-credential", "SETTING", env=env)
        # a folder naming the key as the place of its program: refused, and the key is not shown
        (agent / "config.yaml").write_text(
            PROBE_CONFIG.replace("credentials:", "requires:\n  - {command: bash, override: MY_KEY}\ncredentials:")
        )
        named = cli(*args, env=env)
    # the operator's word cannot pass a key, a copy of one, or a harness setting either: one line, nothing made
    for name, bad in refused.items():
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, (name, bad.stderr)
        assert bad.stderr.startswith(f"error: --agent-credential {name}: ")
    assert "holds a model API key" in refused["MY_KEY"].stderr
    assert "holds an upstream key" in refused["COPY_OF_KEY"].stderr
    assert "harness" in refused["AUTORL_HIDDEN_SECRET"].stderr
    assert named.returncode == 2 and named.stderr.startswith("error: agent probe cannot start: MY_KEY does not")
    assert FREE_KEY not in named.stderr + named.stdout
    assert proc.returncode == 0, proc.stderr
    assert (
        "asks for MY_KEY, COPY_OF_KEY, AUTORL_HIDDEN_SECRET, AUTORL_LLM_UPSTREAMS from your environment" in proc.stderr
        and "--agent-credential MY_KEY" in proc.stderr
    )
    ws = Path(json.loads(proc.stdout)["workspace"])
    environ = dict(line.split("=", 1) for line in (ws / "code" / "environ.txt").read_text().splitlines() if "=" in line)
    assert environ["SETTING"] == "model-x"  # the one the operator passed
    assert not {"MY_KEY", "COPY_OF_KEY", "AUTORL_HIDDEN_SECRET", "AUTORL_LLM_UPSTREAMS", "AUTORL_HOME"} & set(environ)
    assert environ["FROM_KEY"] == "" and environ["OPENAI_API_KEY"] == environ["AUTORL_LLM_TOKEN"]
    for path in files_under(ws):
        data = path.read_bytes().lower()
        assert FREE_KEY.encode() not in data and HEX_SECRET.encode() not in data, path
    # the agent still reached its model, through the gateway, which sent the key
    assert (ws / "code" / "call.txt").read_text().strip() == "200"
    assert [r["key"] for r in up.requests] == [FREE_KEY]
