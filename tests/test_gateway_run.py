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


def run(tmp_path: Path, home: Path, *args: str, env: dict[str, str],
        audit: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    proc = cli("run", "--task", "arith", "--model", "autorl:tiny", "--timeout", "120", "--sandbox", "bwrap",
               "--network", "off", "--runs-dir", str(tmp_path / "runs"), *([] if audit else ["--no-audit"]),
               "--json", *args,
               env={"AUTORL_HOME": str(home), **env})
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    result = json.loads((Path(row["workspace"]) / "result.json").read_text())
    return row, result


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def test_llm_agent_reaches_its_model_only_through_the_gateway(shared_home: Path, tiny_model: Path,
                                                               tmp_path: Path) -> None:
    with scripted_server([]) as (url, requests):
        script = [reply(call("run_shell", {"command": PROBE.replace("UPSTREAM", url)}), prompt_tokens=150),
                  reply(call("time_left"), prompt_tokens=200, completion_tokens=30),
                  reply(call("finish", {"summary": "done"}), prompt_tokens=250, completion_tokens=40)]
        with scripted_server(script) as (url2, requests):
            row, result = run(tmp_path, shared_home, "--agent", "llm",
                              env={"OPENAI_API_BASE": url2, "OPENAI_API_KEY": SECRET, "CHAT_MODEL": "scripted"})
    assert len(requests) == 3 and requests[0]["model"] == "scripted"
    # the ledger's columns: the upstream's usage fields summed, as the gateway counted them
    assert row["llm_tokens"] == 150 + 20 + 200 + 30 + 250 + 40 and row["llm_usage_source"] == "gateway"
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


def test_budget_spent_mid_run_ends_in_the_refusal(shared_home: Path, tiny_model: Path, tmp_path: Path) -> None:
    with scripted_server([reply(call("time_left"))] * 6) as (url, requests):
        row, result = run(tmp_path, shared_home, "--agent", "llm", "--llm-budget-tokens", "300",
                          env={"OPENAI_API_BASE": url, "OPENAI_API_KEY": SECRET})
    # 120 tokens a call: the third starts at 240 and ends at 360; the fourth is refused
    assert len(requests) == 3 and row["llm_tokens"] == 360 and row["llm_usage_source"] == "gateway"
    assert result["meta"]["llm_usage"]["refused"] == 1 and result["meta"]["llm_gateway"]["budget_tokens"] == 300
    calls = read_calls(Path(result["meta"]["llm_gateway"]["record_dir"]))
    assert [c["outcome"] for c in calls] == ["ok", "ok", "ok", "refused"]
    assert calls[-1]["status"] == 429 and "token budget is spent (360 of 300 tokens)" in calls[-1]["error"]
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


def test_claude_cli_through_the_gateway_and_a_forged_usage_file(shared_home: Path, tiny_model: Path,
                                                                 tmp_path: Path) -> None:
    bins = tmp_path / "bin"
    bins.mkdir()
    exe = bins / "claude"
    exe.write_text(FAKE_CLAUDE.replace("PYTHON", sys.executable))
    exe.chmod(0o755)
    with scripted_upstream() as (base, up):
        row, result = run(tmp_path, shared_home, "--agent", "claude",
                          env={"CLAUDE_BIN": str(exe), "ANTHROPIC_API_KEY": SECRET, "ANTHROPIC_BASE_URL": base,
                               "AUTORL_SANDBOX_RO": os.pathsep.join([str(ROOT / "tests"), str(bins)])})
    assert result["agent"]["exit_code"] == 0, (Path(row["workspace"]) / "agent.log").read_text()[-2000:]
    assert len(up.requests) == 1 and up.requests[0]["headers"]["x-api-key"] == SECRET
    # the streamed message's usage fields: 13 input + 3 cached, 9 output; the forged file changed nothing
    assert row["llm_tokens"] == 25 and row["llm_usage_source"] == "gateway"
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
        row, result = run(tmp_path, shared_home, "--agent", str(agent), audit=True,
                          env={"OPENAI_API_BASE": url, "OPENAI_API_KEY": SECRET})
    assert len(requests) == 1 and row["llm_tokens"] == 120
    assert "huggingface-cli" not in "".join(p.read_text(errors="replace") for p in files_under(Path(row["workspace"])))
    (flag,) = [f for f in result["audit"] if f["name"] == "suspicious-download"]
    assert "someone/arith-hidden-test" in flag["detail"]
    assert any(e.startswith("llm gateway call ") and "(answer)" in e for e in flag["evidence"])
