"""The agent's sandbox: a malicious agent run through `autorl run` finds nothing, changes nothing, and the
run records only its real submission. Skipped, with the reason, where bubblewrap cannot run."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autorl.sandbox import INNER_SOCKET_DIR, Binding, Policy, Relay, bwrap_argv, bwrap_available
from autorl.sandbox.netns import DNS_ADDRESS, GATEWAY_ADDRESS, NETNS_MAIN, slirp_available
from autorl.sandbox.policy import HOST_VIEW, MASKED, MASKED_AGAIN, READ_ONLY, READ_WRITE, SHOWN_LAST
from autorl.sandbox.relay import RELAY_MAIN

from .conftest import ROOT, cli, echo_answers, write_stub_checkpoint

MALICIOUS = Path(__file__).with_name("malicious_agent")
BWRAP, WHY = bwrap_available()
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason=f"bubblewrap cannot run here: {WHY}")
SLIRP, SLIRP_WHY = slirp_available(BWRAP) if BWRAP else (None, WHY)
needs_netns = pytest.mark.skipif(SLIRP is None, reason=f"slirp4netns cannot give bubblewrap a network: {SLIRP_WHY}")


def policy(
    workspace: Path,
    *,
    read_only: list[Path] | None = None,
    masked: list[Path] | None = None,
    masked_again: list[Path] | None = None,
    shown: list[Path] | None = None,
    network: str = "off",
    relay: Relay | None = None,
    tmp: Path | None = None,
    gpus: bool = False,
    slirp: str | None = None,
) -> Policy:
    """An agent-like policy of the given paths (the rules' words aside), for the launcher's own tests."""
    files = [
        *(Binding(p, MASKED, "t") for p in masked or []),
        *(Binding(p, READ_ONLY, "t") for p in read_only or []),
        Binding(workspace, READ_WRITE, "t"),
        *(Binding(p, MASKED_AGAIN, "t") for p in masked_again or []),
        *(Binding(p, SHOWN_LAST, "t") for p in shown or []),
    ]
    return Policy(
        kind="agent",
        view=HOST_VIEW,
        files=tuple(files),
        env={},
        cwd=workspace,
        network=network,
        relay=relay or Relay(),
        tmp=tmp,
        gpus=gpus,
        slirp=slirp,
        new_session=False,
    )


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
    tmp_path: Path, listener: tuple[str, int] | None
) -> None:
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
    first = cli(
        "run",
        "--agent",
        str(MALICIOUS),
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "60",
        "--backend",
        "scripted",
        "--sandbox",
        "none",
        "--json",
        "--agent-env",
        "ATTACK=" + json.dumps({"read": [], "write": [], "connect": [], "home": str(home), "tests_root": str(ROOT)}),
        env=env,
    )
    assert first.returncode == 0, first.stderr
    old_ws = Path(json.loads(first.stdout)["workspace"])
    (old_ws / "code" / "notes.txt").write_text("the other run's secret")
    hidden_test = home / "hidden" / "echo"
    before = sorted(p.name for p in hidden_test.rglob("*")) if hidden_test.exists() else []

    model_dir = base
    attack = {
        "home": str(home),
        "tests_root": str(ROOT),
        "read": [
            str(home / "grader"),
            str(home / "hidden"),
            str(home / "baselines"),
            str(home / "autorl.db"),
            str(home / "results.csv"),
            str(old_ws),
            str(old_ws / "code" / "notes.txt"),
            str(user_home / ".ssh" / "id_rsa"),
            str(hf),
            str(hf / "hub" / "token"),
        ],
        "write": [
            str(home / "pwned"),
            str(model_dir / "pwned"),
            str(home / "datasets" / "pwned"),
            str(ROOT / "pwned"),
            "/etc/autorl-pwned",
            str(Path(sys.prefix) / "pwned"),
            str(user_home / "pwned"),
        ],
        "connect": [[*listener]] if listener else [["192.0.2.1", 80]],
    }
    proc = cli(
        "run",
        "--agent",
        str(MALICIOUS),
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "90",
        "--backend",
        "scripted",
        "--sandbox",
        "bwrap",
        "--network",
        "off",
        "--json",
        "--agent-env",
        "ATTACK=" + json.dumps(attack),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    ws = Path(row["workspace"])
    attempts = json.loads((ws / "code" / "attempts.json").read_text())
    # a leak is anything of the real secrets in what an attempt got: file contents, or the names of the
    # files in a hidden place (writes may land on the sandbox's private tmpfs: they are checked on the host)
    markers = [
        "PRIVATE KEY",
        "hf_secret",
        "the other run's secret",
        '"say 20"',
        "grader.db",
        "admin_token",
        *[p.name for p in (home / "hidden").rglob("*") if p.is_file()],
        *[p.name for p in (home / "baselines").rglob("*") if p.is_file()],
    ]
    leaks = [
        a
        for a in attempts
        if a["kind"] in ("read", "proc", "api", "connect")
        and a["got"] is not None
        and (a["kind"] != "read" or any(m in json.dumps(a["got"]) for m in markers))
    ]
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
    # the best of the dev submissions (named dev_* where the headline is the test split)
    assert row.get("dev_baseline", row["baseline"]) == pytest.approx(25.0)
    assert row.get("dev_best", row["best_score"]) == pytest.approx(60.0)
    assert row["submissions"] == 1 and row["success"] is True
    result = json.loads((ws / "result.json").read_text())
    assert result["row"].get("dev_best", result["row"]["best_score"]) == pytest.approx(60.0)
    assert result["meta"]["sandbox"] == {"mode": "bwrap", "network": "off", "warning": None}
    # the agent's log opens with what the agent printed, not with a warning of the relay in front of it
    assert "RuntimeWarning" not in (ws / "agent.log").read_text()


class HostSockets:
    """What the host offers that no sandboxed agent may reach: a service on loopback, an abstract Unix
    socket, a socket file under /run (like the user's D-Bus), a file in /dev/shm and a private TMPDIR."""

    def __init__(self, tmp_path: Path) -> None:
        tag = f"autorl-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._servers: list[socket.socket] = []
        self._cleanup: list[Path] = []
        self.loopback = self._serve(socket.create_server(("127.0.0.1", 0))).getsockname()[1]
        self.abstract = "@" + tag
        sock = socket.socket(socket.AF_UNIX)
        sock.bind("\0" + tag)
        sock.listen()
        self._serve(sock)
        self.run_socket: str | None = None
        run_dir = next(
            (
                Path(d)
                for d in (os.environ.get("XDG_RUNTIME_DIR"), "/run")
                if d and d.startswith("/run") and os.access(d, os.W_OK)
            ),
            None,
        )
        if run_dir is not None:
            bus = run_dir / tag / "bus"
            bus.parent.mkdir()
            self._cleanup.append(bus.parent)
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(str(bus))
            sock.listen()
            self._serve(sock)
            self.run_socket = str(bus)
        self.shm_file = Path("/dev/shm") / tag
        self.shm_file.write_text("host shared memory secret")
        self._cleanup.append(self.shm_file)
        self.tmpdir = tmp_path / "host-tmpdir"
        (self.tmpdir / "humaneval-work").mkdir(parents=True)
        (self.tmpdir / "humaneval-work" / "program.py").write_text("host tmpdir secret")
        for target in (("127.0.0.1", self.loopback), self.abstract, self.run_socket):
            if target is not None:  # all reachable from here
                conn = socket.socket(socket.AF_INET if isinstance(target, tuple) else socket.AF_UNIX)
                conn.connect(target if isinstance(target, tuple) else target.replace("@", "\0", 1))
                conn.close()

    def _serve(self, srv: socket.socket) -> socket.socket:
        srv.settimeout(0.5)
        self._servers.append(srv)

        def serve() -> None:
            while not self._stop.is_set():
                with contextlib.suppress(OSError):
                    srv.accept()[0].close()

        threading.Thread(target=serve, daemon=True).start()
        return srv

    def attack(self) -> dict[str, list[object]]:
        """The agent's targets: each must come back empty-handed."""
        paths = [str(self.shm_file), str(self.tmpdir / "humaneval-work" / "program.py"), str(self.tmpdir)]
        return {
            "connect": [["127.0.0.1", self.loopback], [GATEWAY_ADDRESS, self.loopback]],
            "unix": [self.abstract, *([self.run_socket] if self.run_socket else [])],
            "exists": [*paths, *([self.run_socket] if self.run_socket else [])],
            "read": paths,
        }

    def close(self) -> None:
        self._stop.set()
        for srv in self._servers:
            srv.close()
        for p in self._cleanup:
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)


@pytest.fixture
def host_sockets(tmp_path: Path) -> Iterator[HostSockets]:
    host = HostSockets(tmp_path)
    yield host
    host.close()


def resolvable_names() -> list[str]:
    """``localhost``, and a public name where the host resolves it through DNS (not /etc/hosts)."""
    names = ["localhost"]
    with contextlib.suppress(OSError):
        socket.getaddrinfo("pypi.org", 443, socket.AF_INET)
        names.append("pypi.org")
    return names


def run_attack(
    tmp_path: Path,
    home: Path,
    host: HostSockets,
    network: str,
    extra: dict[str, object],
    env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    attack: dict[str, object] = {
        "home": str(home),
        "tests_root": str(ROOT),
        "write": [str(home / "pwned")],
        "env": True,
        **host.attack(),
    }
    for key, value in extra.items():
        attack[key] = [*attack.get(key, []), *value] if isinstance(value, list) else value  # type: ignore[misc]
    proc = cli(
        "run",
        "--agent",
        str(MALICIOUS),
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "90",
        "--backend",
        "scripted",
        "--sandbox",
        "bwrap",
        "--network",
        network,
        "--json",
        "--agent-env",
        "ATTACK=" + json.dumps(attack),
        env={"AUTORL_HOME": str(home), "TMPDIR": str(host.tmpdir), **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    ws = Path(json.loads(proc.stdout)["workspace"])
    return proc, json.loads((ws / "code" / "attempts.json").read_text())


def got(attempts: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return {a["target"]: a["got"] for a in attempts if a["kind"] == kind}


def assert_host_sockets_hidden(attempts: list[dict[str, Any]], host: HostSockets) -> None:
    targets = host.attack()
    assert got(attempts, "connect") == {
        **{f"{h}:{p}": None for h, p in targets["connect"]},  # type: ignore[misc]
        **{name: None for name in targets["unix"]},
    }
    assert got(attempts, "exists") == {p: None for p in targets["exists"]}
    assert all(got(attempts, "read")[p] is None for p in targets["read"])  # type: ignore[index]
    env = got(attempts, "env")
    assert env["TMPDIR"] == "/tmp"


@needs_netns
def test_network_on_keeps_host_sockets_out_of_reach_and_the_route_out(
    tmp_path: Path, host_sockets: HostSockets, listener: tuple[str, int] | None
) -> None:
    home = tmp_path / "autorl-home"
    names = resolvable_names()
    proc, attempts = run_attack(
        tmp_path,
        home,
        host_sockets,
        "on",
        {
            "read": [str(home / "grader"), str(home / "hidden")],
            "resolve": names,
            "reach": [[*listener]] if listener else [],
        },
    )
    assert_host_sockets_hidden(attempts, host_sockets)
    assert not [a for a in attempts if a["got"] is not None and a["kind"] in ("proc", "api")]
    # the route out: DNS through slirp4netns's forwarder, the host's own address (not its loopback)
    assert got(attempts, "env")["/etc/resolv.conf"].strip() == f"nameserver {DNS_ADDRESS}"
    resolved = got(attempts, "resolve")
    assert resolved["localhost"] == ["127.0.0.1"]
    for name in names[1:]:
        assert resolved[name], name
    if listener:
        assert got(attempts, "reach") == {f"{listener[0]}:{listener[1]}": "connected"}, attempts
    assert not (home / "pwned").exists()
    row = json.loads(proc.stdout)
    assert got(attempts, "submit")["/submit"]["score"] == pytest.approx(60.0)  # the grader, through the relay
    assert row["submissions"] == 1
    assert "bwrap sandbox, network on" in proc.stderr and "warning" not in proc.stderr
    result = json.loads((Path(row["workspace"]) / "result.json").read_text())
    assert result["meta"]["sandbox"] == {"mode": "bwrap", "network": "on", "warning": None}


@needs_bwrap
def test_network_off_keeps_host_sockets_out_of_reach(tmp_path: Path, host_sockets: HostSockets) -> None:
    _, attempts = run_attack(tmp_path, tmp_path / "autorl-home", host_sockets, "off", {"resolve": ["localhost"]})
    assert_host_sockets_hidden(attempts, host_sockets)
    assert got(attempts, "resolve") == {"localhost": ["127.0.0.1"]}


@needs_bwrap
def test_without_slirp4netns_network_on_shares_the_host_network_and_says_so(
    tmp_path: Path, host_sockets: HostSockets
) -> None:
    home = tmp_path / "autorl-home"
    proc, attempts = run_attack(tmp_path, home, host_sockets, "on", {}, env={"AUTORL_SLIRP4NETNS": "none"})
    assert "warning: the sandboxed agent shares the host's network" in proc.stderr
    row = json.loads(proc.stdout)
    assert got(attempts, "submit")["/submit"]["score"] == pytest.approx(60.0)
    meta = json.loads((Path(row["workspace"]) / "result.json").read_text())["meta"]["sandbox"]
    assert meta["mode"] == "bwrap+hostnet" and "AUTORL_SLIRP4NETNS=none" in meta["warning"]
    # what lies in the file system stays hidden; the host's loopback is what this mode gives away
    assert got(attempts, "connect")[f"127.0.0.1:{host_sockets.loopback}"] == "connected"
    assert all(v is None for v in got(attempts, "exists").values())
    assert got(attempts, "env")["TMPDIR"] == "/tmp"


def test_sandbox_choice_errors_and_fallback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    common = ["--task", "echo", "--model", str(base), "--timeout", "30", "--backend", "scripted"]
    env = {"AUTORL_HOME": str(home), "AUTORL_BWRAP": str(tmp_path / "no-bwrap")}
    proc = cli("run", "--agent", "example", *common, "--sandbox", "bwrap", env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: --sandbox bwrap: {tmp_path / 'no-bwrap'} not found "
        "(install bubblewrap: apt install bubblewrap / dnf install bubblewrap)"
    ]
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
    spec = policy(
        ws,
        read_only=[model, user_home, venv],
        masked=[user_home, autorl_home],
        masked_again=[secret_pkg],
        network="on",
        slirp=None,
    )
    argv = bwrap_argv(spec, ["bash", "start.sh"], executable="bwrap")
    pairs = [(argv[i], argv[i + 1], argv[i + 2]) for i in range(len(argv) - 2) if argv[i] == "--ro-bind"]
    ro_targets = [t for _, _, t in pairs]
    assert str(venv) in ro_targets and str(model) in ro_targets
    assert str(user_home) not in ro_targets  # it would uncover the whole home
    assert argv.index(str(user_home)) < argv.index(str(venv))  # hidden first, then re-exposed
    assert ("--ro-bind", "/dev/null", str(secret_pkg)) in pairs
    assert argv.index(str(secret_pkg)) > argv.index(str(venv))  # masked again after the venv came back
    assert argv[argv.index("--bind") + 1] == str(ws)
    assert argv[-3:] == ["--", "bash", "start.sh"] and "--unshare-net" not in argv
    off = bwrap_argv(policy(ws, relay=Relay(4321, tmp_path)), ["bash"], executable="bwrap")
    assert "--unshare-net" in off
    assert off[off.index("--") + 1 :][:3] == [sys.executable, "-c", RELAY_MAIN]
    assert ("--ro-bind", os.fspath(tmp_path), INNER_SOCKET_DIR) in zip(off, off[1:], off[2:], strict=False)
    # network on with slirp4netns: the launcher outside, its own namespace, the relay inside
    on = bwrap_argv(
        policy(ws, network="on", relay=Relay(4321), slirp="/usr/bin/slirp4netns"), ["bash"], executable="bwrap"
    )
    assert on[:5] == [sys.executable, "-c", NETNS_MAIN, "--slirp", "/usr/bin/slirp4netns"]
    bwrap_part = on[on.index("--") + 1 :]
    assert bwrap_part[0] == "bwrap" and "--unshare-net" in bwrap_part
    assert bwrap_part[bwrap_part.index("--", 1) + 1 :][:3] == [sys.executable, "-c", RELAY_MAIN]
    # /dev/shm is private; TMPDIR names the sandbox's /tmp (the policy masks the host's runtime state and TMPDIR:
    # tests/test_isolation.py)
    assert off[off.index("/dev/shm") - 1 : off.index("/dev/shm") + 1] == ["--tmpfs", "/dev/shm"]
    assert off[off.index("TMPDIR") - 1 : off.index("TMPDIR") + 2] == ["--setenv", "TMPDIR", "/tmp"]


@needs_bwrap
def test_tmp_dir_is_the_agents_tmp_and_var_tmp_and_the_host_tmpdir_is_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "run" / "workspace"
    ws.mkdir(parents=True)
    host_tmp = tmp_path / "host-tmpdir"
    (host_tmp / "grader-work").mkdir(parents=True)
    (host_tmp / "grader-work" / "program.py").write_text("secret")
    monkeypatch.setenv("TMPDIR", str(host_tmp))
    script = (
        f"echo a > /tmp/a.txt; echo b > /var/tmp/b.txt; echo $TMPDIR; "
        f"ls -A {host_tmp} /tmp /var/tmp; cat {host_tmp}/grader-work/program.py"
    )

    def sandboxed(tmp_dir: Path | None) -> subprocess.CompletedProcess[str]:
        spec = policy(ws, masked=[host_tmp], relay=Relay(1, sock), tmp=tmp_dir)
        argv = bwrap_argv(spec, ["sh", "-c", script], executable=str(BWRAP))
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**os.environ, "TMPDIR": "/tmp"})

    sock = tmp_path / "sock"
    sock.mkdir()
    agent_tmp = tmp_path / "run" / "tmp"
    agent_tmp.mkdir(mode=0o700)
    proc = sandboxed(agent_tmp)
    assert proc.stdout.splitlines()[0] == "/tmp"
    assert "secret" not in proc.stdout and "grader-work" not in proc.stdout
    # what the agent left in /tmp and /var/tmp is on the host, in the one directory
    assert (agent_tmp / "a.txt").read_text() == "a\n" and (agent_tmp / "b.txt").read_text() == "b\n"
    # (paths under the host's /tmp bound into the sandbox, here the workspace, leave their empty mount points)
    assert not [p for p in agent_tmp.rglob("*") if p.is_file() and p.suffix != ".txt"]
    for p in agent_tmp.glob("*.txt"):
        p.unlink()
    # without one: a private tmpfs, gone with the sandbox
    proc = sandboxed(None)
    assert proc.stdout.splitlines()[0] == "/tmp" and "secret" not in proc.stdout
    assert not list(agent_tmp.glob("*.txt")) and not list(host_tmp.glob("*.txt"))
    (ws / "tmp").mkdir()
    with pytest.raises(ValueError, match="outside what it writes"):
        bwrap_argv(policy(ws, tmp=ws / "tmp"), ["x"], executable="bwrap")


def test_gpus_pass_through_only_when_the_agent_has_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import autorl.sandbox.launcher as launcher

    nodes = ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    monkeypatch.setattr(launcher, "gpu_devices", lambda: nodes)
    with_gpus = bwrap_argv(policy(tmp_path, gpus=True, relay=Relay(1, tmp_path)), ["x"], executable="bwrap")
    for node in nodes:
        assert ["--dev-bind-try", node, node] == with_gpus[with_gpus.index(node) - 1 : with_gpus.index(node) + 2]
    without = bwrap_argv(policy(tmp_path, relay=Relay(1, tmp_path)), ["x"], executable="bwrap")
    assert not any(n in without for n in nodes)


def test_gpu_assignment_decides_what_the_agent_sees() -> None:
    from autorl.runs.gpus import GpuAssignment, parse_gpus

    two = [("0", "GPU-a"), ("1", "GPU-b")]
    assert GpuAssignment().agent_env() == {} and GpuAssignment().agent_has_gpus
    only_grader = parse_gpus("grader=1", two)
    assert only_grader.agent_env() == {"CUDA_VISIBLE_DEVICES": ""} and not only_grader.agent_has_gpus
    split = parse_gpus("agent=0,grader=1", two)
    assert split.agent_env() == {"CUDA_VISIBLE_DEVICES": "0"} and split.agent_has_gpus


@needs_bwrap
@pytest.mark.parametrize("masked", [True, False])
def test_the_orchestrator_names_more_folders_to_mask(tmp_path: Path, masked: bool) -> None:
    """A study's worker masks its shared home and the study folder (``AUTORL_SANDBOX_HIDE``) wherever they are,
    even where a folder is named readable; without it the folder is readable (the control: the test can fail).
    The folder is made readable explicitly (``AUTORL_SANDBOX_RO``), so the control holds wherever the checkout
    and the temporary directory are (under /tmp or the home folder, both masked whole)."""
    shared = tmp_path / "shared-home"
    (shared / "hidden").mkdir(parents=True)
    (shared / "hidden" / "secret").write_text("THE SHARED SECRET")
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    attack = {
        "home": str(tmp_path / "home"),
        "tests_root": str(ROOT),
        "read": [str(shared / "hidden" / "secret")],
        "write": [],
        "connect": [["192.0.2.1", 80]],
    }
    env = {
        "AUTORL_HOME": str(tmp_path / "home"),
        "AUTORL_SANDBOX_RO": os.pathsep.join([str(ROOT / "tests"), str(shared)]),
        **({"AUTORL_SANDBOX_HIDE": str(shared)} if masked else {}),
    }
    proc = cli(
        "run",
        "--agent",
        str(MALICIOUS),
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
        "--json",
        "--agent-env",
        "ATTACK=" + json.dumps(attack),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    attempts = json.loads((Path(json.loads(proc.stdout)["workspace"]) / "code" / "attempts.json").read_text())
    got = next(a["got"] for a in attempts if a["kind"] == "read" and a["target"].endswith("secret"))
    assert (got is None) if masked else (got == "THE SHARED SECRET")


@needs_bwrap
def test_what_a_benchmark_shows_lands_over_its_own_masks(tmp_path: Path) -> None:
    # a benchmark hides its whole folder (always_hidden) and shows the agent one file of it (agent_paths); the
    # folder lies where nothing else masks it (not under /tmp)
    outside = Path(tempfile.mkdtemp(prefix=".autorl-test-", dir=Path.home()))
    try:
        _show_over_masks(tmp_path, outside)
    finally:
        shutil.rmtree(outside)


def _show_over_masks(tmp_path: Path, outside: Path) -> None:
    ws, sock, folder = tmp_path / "ws", tmp_path / "sock", outside / "bench" / "one"
    for d in (ws, sock, folder / "data"):
        d.mkdir(parents=True)
    (folder / "config.yaml").write_text("shown\n")
    (folder / "data" / "test.jsonl").write_text("hidden\n")
    (outside / "bench" / "two.txt").write_text("other\n")
    spec = policy(
        ws, relay=Relay(1, sock), masked_again=[outside / "bench", folder / "data"], shown=[folder / "config.yaml"]
    )
    script = (
        f"cat {folder}/config.yaml; cat {folder}/data/test.jsonl {outside}/bench/two.txt; ls -A {folder}; "
        f"echo x >> {folder}/config.yaml || echo refused"
    )
    argv = bwrap_argv(spec, ["sh", "-c", script], executable=str(BWRAP))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    # data/ within the masked folder leaves no mount point behind that would give its name away
    assert proc.stdout.splitlines() == ["shown", "config.yaml", "refused"], proc.stdout + proc.stderr
    assert (folder / "config.yaml").read_text() == "shown\n"
