"""The agent's sandbox: a malicious agent run through `autorl run` finds nothing, changes nothing, and the
run records only its real submission. Skipped, with the reason, where bubblewrap cannot run."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from autorl.sandbox import SandboxSpec, bwrap_argv, bwrap_available

from .conftest import ROOT, cli, echo_answers, write_stub_checkpoint

MALICIOUS = Path(__file__).with_name("malicious_agent")
BWRAP, WHY = bwrap_available()
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason=f"bubblewrap cannot run here: {WHY}")


def non_loopback_ip() -> str | None:
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    except OSError:
        out = []
    return next((ip for ip in out if ":" not in ip and not ip.startswith("127.")), None)


@pytest.fixture
def listener() -> tuple[str, int] | None:
    """A TCP server on a non-loopback address of this machine (what the network-off agent must not reach)."""
    ip = non_loopback_ip()
    if ip is None:
        yield None
        return
    srv = socket.create_server((ip, 0))
    srv.settimeout(0.5)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                srv.accept()[0].close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    socket.create_connection((ip, srv.getsockname()[1]), timeout=3).close()  # reachable from here
    yield ip, srv.getsockname()[1]
    stop.set()
    srv.close()


@needs_bwrap
def test_malicious_agent_gets_nothing_and_the_results_are_its_real_submissions(
        tmp_path: Path, listener: tuple[str, int] | None) -> None:
    home = tmp_path / "autorl-home"
    user_home = tmp_path / "user-home"
    (user_home / ".ssh").mkdir(parents=True)
    (user_home / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    hf = tmp_path / "hf-cache"
    (hf / "hub").mkdir(parents=True)
    (hf / "hub" / "token").write_text("hf_secret")
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    env = {"AUTORL_HOME": str(home), "HOME": str(user_home), "HF_HOME": str(hf)}
    # an earlier run whose workspace the agent must not see
    first = cli("run", "--agent", str(MALICIOUS), "--task", "echo", "--model", str(base), "--timeout", "60",
                "--backend", "scripted", "--sandbox", "none", "--json", "--agent-env",
                "ATTACK=" + json.dumps({"read": [], "write": [], "connect": [], "home": str(home),
                                        "tests_root": str(ROOT)}), env=env)
    assert first.returncode == 0, first.stderr
    old_ws = Path(json.loads(first.stdout)["workspace"])
    (old_ws / "code" / "notes.txt").write_text("the other run's secret")
    hidden_test = home / "hidden" / "echo"
    before = sorted(p.name for p in hidden_test.rglob("*")) if hidden_test.exists() else []

    model_dir = base
    attack = {
        "home": str(home),
        "tests_root": str(ROOT),
        "read": [str(home / "grader"), str(home / "hidden"), str(home / "baselines"), str(home / "autorl.db"),
                 str(home / "results.csv"), str(old_ws), str(old_ws / "code" / "notes.txt"),
                 str(user_home / ".ssh" / "id_rsa"), str(hf), str(hf / "hub" / "token")],
        "write": [str(home / "pwned"), str(model_dir / "pwned"), str(home / "datasets" / "pwned"),
                  str(ROOT / "pwned"), "/etc/autorl-pwned", str(Path(sys.prefix) / "pwned"),
                  str(user_home / "pwned")],
        "connect": [[*listener]] if listener else [["192.0.2.1", 80]],
    }
    proc = cli("run", "--agent", str(MALICIOUS), "--task", "echo", "--model", str(base), "--timeout", "90",
               "--backend", "scripted", "--sandbox", "bwrap", "--network", "off", "--json",
               "--agent-env", "ATTACK=" + json.dumps(attack), env=env)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    ws = Path(row["workspace"])
    attempts = json.loads((ws / "code" / "attempts.json").read_text())
    # a leak is anything of the real secrets in what an attempt got: file contents, or the names of the
    # files in a hidden place (writes may land on the sandbox's private tmpfs: they are checked on the host)
    markers = ["PRIVATE KEY", "hf_secret", "the other run's secret", '"say 20"', "grader.db", "admin_token",
               *[p.name for p in (home / "hidden").rglob("*") if p.is_file()],
               *[p.name for p in (home / "baselines").rglob("*") if p.is_file()]]
    leaks = [a for a in attempts if a["kind"] in ("read", "proc", "api", "connect") and a["got"] is not None
             and (a["kind"] != "read" or any(m in json.dumps(a["got"]) for m in markers))]
    assert not leaks, leaks
    # by path, every hidden place is simply not there
    assert all(a["got"] is None for a in attempts if a["kind"] == "read" and not a["target"].startswith("/proc/"))
    kinds = {a["kind"] for a in attempts}
    assert kinds == {"read", "proc", "write", "api", "connect", "submit"}
    assert any("test_answers.jsonl" in a["target"] for a in attempts)  # the plugin's package data was tried
    # nothing outside the workspace changed
    for target in attack["write"]:
        assert not Path(target).exists(), target
    assert sorted(p.name for p in hidden_test.rglob("*")) == before
    # the run's numbers are the grader's: the real submission, against the real baseline
    submit = next(a for a in attempts if a["kind"] == "submit")["got"]
    assert submit["score"] == pytest.approx(60.0)
    assert row["baseline"] == pytest.approx(25.0) and row["best_score"] == pytest.approx(60.0)
    assert row["submissions"] == 1 and row["success"] is True
    result = json.loads((ws / "result.json").read_text())
    assert result["row"]["best_score"] == pytest.approx(60.0)
    assert result["meta"]["sandbox"] == {"mode": "bwrap", "network": "off", "warning": None}


@needs_bwrap
def test_network_on_reaches_the_grader_directly_and_hides_the_same_things(tmp_path: Path) -> None:
    home = tmp_path / "autorl-home"
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    attack = {"home": str(home), "tests_root": str(ROOT), "read": [str(home / "grader"), str(home / "hidden")],
              "write": [str(home / "pwned")], "connect": []}
    proc = cli("run", "--agent", str(MALICIOUS), "--task", "echo", "--model", str(base), "--timeout", "60",
               "--backend", "scripted", "--json", "--agent-env", "ATTACK=" + json.dumps(attack),
               env={"AUTORL_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    attempts = json.loads((Path(row["workspace"]) / "code" / "attempts.json").read_text())
    assert not [a for a in attempts if a["got"] is not None and a["kind"] in ("read", "proc", "api")
                and not a["target"].startswith("/proc/1/root")]  # that is the sandbox's own root
    assert not (home / "pwned").exists()
    assert row["best_score"] == pytest.approx(60.0)
    assert "bwrap sandbox, network on" in proc.stderr


def test_sandbox_choice_errors_and_fallback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    common = ["--task", "echo", "--model", str(base), "--timeout", "30", "--backend", "scripted"]
    env = {"AUTORL_HOME": str(home), "AUTORL_BWRAP": str(tmp_path / "no-bwrap")}
    proc = cli("run", "--agent", "example", *common, "--sandbox", "bwrap", env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: --sandbox bwrap: {tmp_path / 'no-bwrap'} not found "
                                                "(install bubblewrap: apt install bubblewrap / dnf install bubblewrap)"]
    proc = cli("run", "--agent", "example", *common, "--network", "off", env=env)
    assert proc.returncode == 2 and "--network off needs the bwrap sandbox" in proc.stderr
    proc = cli("run", "--agent", "example", *common, "--sandbox", "none", "--network", "off")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    for flag, value in (("--sandbox", "docker"), ("--network", "maybe")):
        proc = cli("run", "--agent", "example", *common, flag, value)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (home / "runs").exists()
    # auto falls back to no sandbox, says so, and records it
    agent = tmp_path / "agents" / "quick"
    agent.mkdir(parents=True)
    (agent / "config.yaml").write_text("name: quick\nstart: start.sh\n")
    (agent / "start.sh").write_text("echo done\n")
    proc = cli("run", "--agent", str(agent), *common, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "warning: no sandbox for the agent" in proc.stderr
    result = json.loads((Path(json.loads(proc.stdout)["workspace"]) / "result.json").read_text())
    assert result["meta"]["sandbox"]["mode"] == "none"


def test_bwrap_command_reexposes_only_what_lies_strictly_under_hidden_places(tmp_path: Path) -> None:
    user_home = tmp_path / "home"
    venv = user_home / "venv"
    autorl_home = user_home / ".autorl"
    model = autorl_home / "models" / "tiny"
    ws = autorl_home / "runs" / "t" / "r1"
    secret_pkg = venv / "lib" / "pkg" / "test.jsonl"
    for d in (venv / "bin", model, ws, secret_pkg.parent):
        d.mkdir(parents=True)
    secret_pkg.write_text("x")
    spec = SandboxSpec(workspace=ws, read_only=[model, user_home, venv], hidden=[user_home, autorl_home],
                       always_hidden=[secret_pkg], network=True, gpus=False)
    argv = bwrap_argv(spec, ["bash", "start.sh"], executable="bwrap", environ_path=f"{venv / 'bin'}:/usr/bin")
    pairs = [(argv[i], argv[i + 1], argv[i + 2]) for i in range(len(argv) - 2) if argv[i] == "--ro-bind"]
    ro_targets = [t for _, _, t in pairs]
    assert str(venv) in ro_targets and str(model) in ro_targets
    assert str(user_home) not in ro_targets  # it would uncover the whole home
    assert argv.index(str(user_home)) < argv.index(str(venv))  # hidden first, then re-exposed
    assert ("--ro-bind", "/dev/null", str(secret_pkg)) in pairs
    assert argv.index(str(secret_pkg)) > argv.index(str(venv))  # masked again after the venv came back
    assert argv[argv.index("--bind") + 1] == str(ws)
    assert argv[-3:] == ["--", "bash", "start.sh"] and "--unshare-net" not in argv
    off = bwrap_argv(SandboxSpec(workspace=ws, network=False, grader_port=4321, socket_dir=tmp_path, gpus=False),
                     ["bash"], executable="bwrap")
    assert "--unshare-net" in off
    assert off[off.index("--") + 1:][:3] == [sys.executable, "-m", "autorl.sandbox.relay"]
    assert os.fspath(tmp_path) in off


def test_gpus_pass_through_only_when_the_agent_has_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import autorl.sandbox as sandbox

    nodes = ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    monkeypatch.setattr(sandbox, "gpu_devices", lambda: nodes)
    with_gpus = bwrap_argv(SandboxSpec(workspace=tmp_path, gpus=True), ["x"], executable="bwrap")
    for node in nodes:
        assert ["--dev-bind-try", node, node] == with_gpus[with_gpus.index(node) - 1:with_gpus.index(node) + 2]
    without = bwrap_argv(SandboxSpec(workspace=tmp_path, gpus=False), ["x"], executable="bwrap")
    assert not any(n in without for n in nodes)


def test_gpu_assignment_decides_what_the_agent_sees() -> None:
    from autorl.gpus import GpuAssignment, parse_gpus

    two = [("0", "GPU-a"), ("1", "GPU-b")]
    assert GpuAssignment().agent_env() == {} and GpuAssignment().agent_has_gpus
    only_grader = parse_gpus("grader=1", two)
    assert only_grader.agent_env() == {"CUDA_VISIBLE_DEVICES": ""} and not only_grader.agent_has_gpus
    split = parse_gpus("agent=0,grader=1", two)
    assert split.agent_env() == {"CUDA_VISIBLE_DEVICES": "0"} and split.agent_has_gpus
