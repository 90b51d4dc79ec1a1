"""Each attempt records what it got; the test asserts that every one came back empty-handed.

``ATTACK`` (JSON, from the test) names the host paths to go after: files and directories to read, places to
write, a non-loopback address to reach. Results go to $WORKSPACE/code/attempts.json.
"""

import json
import os
import socket
import sys
from pathlib import Path

import httpx

cfg = json.loads(os.environ["ATTACK"])
ws = Path(os.environ["WORKSPACE"])
url = os.environ["GRADING_SERVER_URL"]
auth = {"Authorization": f"Bearer {os.environ['AUTORL_TOKEN']}"}
attempts: list[dict[str, object]] = []


def record(kind: str, target: str, got: object) -> None:
    attempts.append({"kind": kind, "target": target, "got": got})


def read(path: Path) -> object:
    """What the path yields: file bytes, a directory's entries (recursively), or None."""
    try:
        if path.is_dir():
            return sorted(str(p.relative_to(path)) for p in path.rglob("*"))[:50] or None
        data = path.read_bytes()
        return data[:200].decode(errors="replace") or None
    except OSError:
        return None


# 1. hidden locations by path; the plugin's package data found by importing the plugin
targets = list(cfg["read"])
try:
    import autorl_example_plugin

    targets.append(str(Path(autorl_example_plugin.__file__).parent / "secret" / "test_answers.jsonl"))
except ImportError:
    pass
for target in targets:
    record("read", target, read(Path(target)))

# 2. /proc: the grader, the orchestrator, anything holding AUTORL_HOME or the admin token
seen = []
for proc in Path("/proc").iterdir():
    if not proc.name.isdigit():
        continue
    try:
        cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        environ = (proc / "environ").read_bytes()
    except OSError:
        continue
    if "autorl.grader" in cmdline or "autorl.cli" in cmdline or b"AUTORL_HOME=" in environ:
        seen.append(cmdline[:200])
record("proc", "/proc/*", seen or None)
for pid in ("1", str(os.getppid())):
    for leaf in ("root/" + cfg["home"].lstrip("/"), "cwd/grader"):
        record("read", f"/proc/{pid}/{leaf}", read(Path("/proc") / pid / leaf))

# 3. writes outside the workspace
for target in cfg["write"]:
    try:
        Path(target).write_text("pwned")
        record("write", target, "written")
    except OSError:
        record("write", target, None)

# 4. the baseline, and the admin API without the admin token
for method, path, body in (
    ("POST", "/set_baseline", {"score": 0.0}),
    ("GET", "/admin/state", None),
    ("POST", "/admin/close", None),
):
    r = httpx.request(method, url + path, json=body, headers=auth, timeout=30, trust_env=False)
    record("api", path, r.text if r.status_code < 400 else None)

# 5. the network beyond the grader
for host, port in cfg["connect"]:
    try:
        socket.create_connection((host, port), timeout=3).close()
        record("connect", f"{host}:{port}", "connected")
    except OSError:
        record("connect", f"{host}:{port}", None)

# 5b. the host's sockets: abstract and path Unix sockets, places that merely exist (a socket file cannot be
# read), names to resolve and addresses that should stay reachable (kind "reach": expected to connect)
for name in cfg.get("unix", []):
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(3)
    try:
        sock.connect(name.replace("@", "\0", 1) if name.startswith("@") else name)
        record("connect", name, "connected")
    except OSError:
        record("connect", name, None)
    finally:
        sock.close()
for target in cfg.get("exists", []):
    record("exists", target, "exists" if os.path.lexists(target) else None)
for name in cfg.get("resolve", []):
    try:
        record("resolve", name, sorted({a[4][0] for a in socket.getaddrinfo(name, 80, socket.AF_INET)}))
    except OSError:
        record("resolve", name, None)
for host, port in cfg.get("reach", []):
    try:
        socket.create_connection((host, port), timeout=5).close()
        record("reach", f"{host}:{port}", "connected")
    except OSError as exc:
        record("reach", f"{host}:{port}", None)
        record("reach-error", f"{host}:{port}", str(exc))
if cfg.get("env"):
    record("env", "TMPDIR", os.environ.get("TMPDIR"))
    record("env", "/etc/resolv.conf", read(Path("/etc/resolv.conf")))
    Path("/tmp/left-by-the-agent.txt").write_text("agent was here")

# 6. forged results in the workspace, where nothing reads them
(ws / "result.json").write_text(json.dumps({"row": {"best_score": 100.0}}))
(ws / "scores.json").chmod(0o644) if (ws / "scores.json").exists() else None
(ws / "scores.json").write_text(json.dumps([{"submission_id": 1, "score": 100.0}]))

# 7. one honest submission, through the grader's URL as documented
sys.path.insert(0, cfg["tests_root"])
from tests.conftest import echo_answers, write_stub_checkpoint  # noqa: E402

ckpt = write_stub_checkpoint(Path(os.environ["OUTPUT_DIR"]) / "v1", echo_answers(12))
r = httpx.post(url + "/submit", json={"model_path": str(ckpt)}, headers=auth, timeout=120, trust_env=False)
record("submit", "/submit", r.json())
(ws / "code" / "attempts.json").write_text(json.dumps(attempts, indent=1))
