"""The coding-CLI agents (claude, codex, gemini, opencode, openhands, rdagent) with fake CLIs on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autorl.default_plugins.agents import CODING_AGENTS, CODING_FOLDER
from autorl.plugins.agent_folder import CommandAgent

from .conftest import ROOT, cli, echo_answers, write_stub_checkpoint

FAKE = Path(__file__).with_name("fake_cli.py")


def fake_bin(root: Path, *names: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        exe = root / name
        exe.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
        exe.chmod(0o755)
    return root


def contract_workspace(tmp_path: Path) -> dict[str, str]:
    ws = tmp_path / "ws"
    (ws / "code").mkdir(parents=True)
    (ws / "models" / "base").mkdir(parents=True)
    (ws / "description.md").write_text("# echo\nSay the number.\n")
    (ws / "instructions.md").write_text("# Instructions\nSubmit to $GRADING_SERVER_URL.\n")
    return {
        "WORKSPACE": str(ws),
        "TASK": "echo",
        "BASE_MODEL": "base",
        "MODEL_PATH": str(ws / "models" / "base"),
        "DATA_PATH": str(ws / "data"),
        "OUTPUT_DIR": str(ws / "output"),
        "GRADING_SERVER_URL": "http://127.0.0.1:9",
        "AUTORL_TOKEN": "t",
        "AUTORL_DEADLINE": "0",
    }


#: what each adapter must put on the command line (beyond the prompt)
EXPECTED_ARGS = {
    "claude": ["-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"],
    "codex": ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"],
    "gemini": ["--yolo", "--output-format", "stream-json", "-p"],
    "opencode": ["run", "--format", "json"],
    "openhands": ["--headless", "--json", "--override-with-envs", "-t"],
    "rdagent": ["-m", "rdagent.app.rl.loop", "--base-model", "base", "--benchmark", "echo"],
}


@pytest.mark.parametrize("name", CODING_AGENTS)
@pytest.mark.parametrize("status", [0, 5])
def test_each_adapter_builds_the_prompt_and_keeps_the_exit_status(tmp_path: Path, name: str, status: int) -> None:
    folder = CODING_FOLDER / name
    agent = CommandAgent.from_folder(folder, name=name)()
    assert agent.config()["requires"], name
    env = contract_workspace(tmp_path)
    exe = "python3" if name == "rdagent" else name
    bins = fake_bin(tmp_path / "bin", exe)
    env.update(
        PATH=f"{bins}:{os.environ['PATH']}", AUTORL_AGENT_DIR=str(folder), FAKE_CLI_EXIT=str(status), HOME=str(tmp_path)
    )
    proc = subprocess.run(
        ["bash", str(folder / "start.sh")], env=env, cwd=env["WORKSPACE"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == status, proc.stderr
    ws = Path(env["WORKSPACE"])
    rec = json.loads((ws / "code" / f"{exe}.invocation.json").read_text())
    argv = rec["argv"]
    for arg in EXPECTED_ARGS[name]:
        assert arg in argv, (name, arg, argv)
    if name != "rdagent":
        prompt = max(argv, key=len)
        assert "# echo" in prompt and "# Instructions" in prompt and "autonomous ML engineer" in prompt
    assert rec["stdin_is_tty"] is False and rec["stdin"] == ""
    # the CLI's output is both in the agent's log (stdout) and in the transcript
    transcript = (ws / "transcript.jsonl").read_text().splitlines()
    assert [json.loads(line)["type"] for line in transcript] == ["system", "result"]
    assert '"subtype": "success"' in proc.stdout
    assert f"exited with status {status}" in proc.stderr


@pytest.mark.parametrize("name", CODING_AGENTS)
def test_missing_cli_stops_at_once_naming_what_to_install(tmp_path: Path, name: str) -> None:
    folder = CODING_FOLDER / name
    env = contract_workspace(tmp_path)
    env.update(PATH="/usr/bin:/bin", AUTORL_AGENT_DIR=str(folder), HOME=str(tmp_path))
    if name == "rdagent":
        env["RDAGENT_PYTHON"] = str(tmp_path / "no-such-python")
    proc = subprocess.run(["bash", str(folder / "start.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 127
    assert len(proc.stderr.strip().splitlines()) == 1 and "not found" in proc.stderr


def test_readiness_reflects_cli_and_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    claude = CommandAgent.from_folder(CODING_FOLDER / "claude", name="claude")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("CLAUDE_CODE_OAUTH_TOKEN", raising=False)
    assert claude().ready() == (False, "claude not found")
    bins = fake_bin(tmp_path / "bin", "claude")
    monkeypatch.setenv("PATH", f"{bins}:/usr/bin:/bin")
    ok, why = claude().ready()
    assert not ok and why.startswith("no key: set ANTHROPIC_API_KEY")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert claude().ready() == (True, "ready")
    # an executable named by the override variable counts, wherever it is
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert claude({"env": {"CLAUDE_BIN": str(bins / "claude")}}).ready() == (True, "ready")
    proc = cli("list", "agents", "--json", env={"PATH": f"{bins}:/usr/bin:/bin", "ANTHROPIC_API_KEY": "k"})
    listed = {a["name"]: a for a in json.loads(proc.stdout)}
    assert set(CODING_AGENTS) <= set(listed)
    assert listed["claude"]["ready"] is True and listed["codex"]["ready"] is False


def test_run_with_missing_cli_fails_fast_and_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = cli(
        "run",
        "--agent",
        "codex",
        "--task",
        "echo",
        "--model",
        "autorl:tiny",
        "--timeout",
        "60",
        env={"AUTORL_HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: agent codex cannot start: the `codex` command is not installed (or set CODEX_BIN to its path): "
        "npm install -g @openai/codex"
    ]
    assert not (home / "runs").exists()


@pytest.mark.parametrize("status", [0, 3])
def test_claude_through_autorl_run(tmp_path: Path, status: int) -> None:
    home = tmp_path / "home"
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    bins = fake_bin(tmp_path / "bin", "claude")
    env = {
        "AUTORL_HOME": str(home),
        "PATH": f"{bins}:{os.environ['PATH']}",
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "OPENAI_API_KEY": "sk-other-vendor",
        "SOME_SECRET": "must-not-leak",
        "FAKE_CLI_TESTS": str(ROOT),
    }
    proc = cli(
        "run",
        "--agent",
        "claude",
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "60",
        "--backend",
        "scripted",
        "--json",
        "--agent-env",
        "CLAUDE_MODEL=claude-test-model",
        "--agent-env",
        f"FAKE_CLI_EXIT={status}",
        "--agent-env",
        "FAKE_CLI_SUBMIT=12",
        "--agent-env",
        f"FAKE_CLI_TESTS={ROOT}",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    ws = Path(row["workspace"])
    rec = json.loads((ws / "code" / "claude.invocation.json").read_text())
    argv = rec["argv"]
    assert argv[argv.index("--model") + 1] == "claude-test-model"
    assert (ws / "description.md").read_text().strip() in argv[argv.index("-p") + 1]
    assert rec["cwd"] == str(ws)
    child_env = rec["env"]
    # no upstream key: every API's key is the run's LLM gateway token, every base URL the gateway's
    assert child_env["ANTHROPIC_API_KEY"] == child_env["OPENAI_API_KEY"] == child_env["AUTORL_LLM_TOKEN"]
    assert child_env["ANTHROPIC_BASE_URL"] == child_env["AUTORL_LLM_GATEWAY"] + "/anthropic"
    assert not {"sk-ant-test", "sk-other-vendor"} & set(child_env.values()) and "SOME_SECRET" not in child_env
    assert child_env["CLAUDE_CONFIG_DIR"] == str(ws / ".claude") and child_env["TASK"] == "echo"
    # the grader recorded the submission the CLI made; the run keeps the CLI's exit status
    assert row["submissions"] == 1 and row["dev_best"] == pytest.approx(60.0)  # the stub answers dev items only
    result = json.loads((ws / "result.json").read_text())
    assert result["agent"]["exit_code"] == status
    assert row["success"] is (status == 0)
    if status:
        assert row["end_reason"] == "agent exited with code 3"
    log = (ws / "agent.log").read_text()
    assert '"type": "result"' in log and f"exited with status {status}" in log
    assert (ws / "transcript.jsonl").read_text().count("\n") == 3
