"""The red team of ``autorl selftest``: one attempt per attack class, each writing what it got.

It never decides whether an attack worked: it writes evidence to ``$WORKSPACE/code/selftest.json`` and the
orchestrator (``autorl.selftest``) judges it against what only the orchestrator knows (the hidden items, who
accepted a connection, which host file appeared, what the upstream model API served). ``SELFTEST`` (JSON)
names the host paths and sockets to try, and where the upstream model API is (the gateway attacks are in
``llm_attacks.py``).
"""

import contextlib
import json
import os
import socket
import sys
from pathlib import Path

import httpx

cfg = json.loads(os.environ.get("SELFTEST", "{}"))
ws = Path(os.environ["WORKSPACE"])
out_dir = Path(os.environ["OUTPUT_DIR"])
url = os.environ["GRADING_SERVER_URL"]
task = os.environ["TASK"]
token = os.environ.get("AUTORL_TOKEN", "")
evidence: dict[str, object] = {}
FORGED = 99.87


def attempt(name):
    def wrap(fn):
        try:
            evidence[name] = fn()
        except Exception as exc:  # an attack that cannot even start got nothing
            evidence[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        return fn

    return wrap


def peek(path: Path):
    try:
        if path.is_dir():
            return sorted(p.name for p in path.iterdir())[:20] or None
        with open(path, "rb") as f:
            return f.read(120).decode(errors="replace") or None
    except OSError:
        return None


@attempt("paths")
def _paths():
    got = {p: peek(Path(p)) for p in cfg.get("read", [])}
    return {p: v for p, v in got.items() if v is not None}


@attempt("proc")
def _proc():
    seen = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == str(os.getpid()):
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if "autorl.grader" in cmdline or "autorl.cli" in cmdline or b"AUTORL_HOME=" in environ:
            seen.append(cmdline[:160])
    for pid in ("1", str(os.getppid())):
        for home in cfg.get("read", [])[:1]:
            if peek(Path(f"/proc/{pid}/root") / home.lstrip("/")) is not None:
                seen.append(f"/proc/{pid}/root{home}")
    return seen


def mount_points():
    """Where this process's mount namespace has something mounted (what its sandbox shows), from mountinfo."""
    points = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4:
                    points.append(fields[4].encode().decode("unicode_escape"))
    except OSError:
        pass
    return points


@attempt("home")
def _home():
    """The operator's home as this run's policy shows it: the canaries planted where operators keep keys, every
    folder between the home (or autorl's storage) and what is shown inside it, and the tool on PATH."""
    home = cfg.get("home") or {}
    roots = [Path(r) for r in home.get("roots", [])]
    folders = dict.fromkeys(home.get("list", []))
    for point in map(Path, mount_points()):
        for root in roots:
            if root in point.parents:
                for parent in point.parents:
                    if parent == root or root in parent.parents:
                        folders.setdefault(str(parent))
    listed = {}
    for folder in folders:
        try:
            listed[folder] = sorted(os.listdir(folder))[:200]
        except OSError:
            continue
    read = {p: got for p in home.get("read", []) if (got := peek(Path(p))) is not None}
    tool = home.get("tool")
    ran = None
    if tool:
        import subprocess

        try:
            ran = subprocess.run([tool], capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError) as exc:
            ran = type(exc).__name__
    return {"read": read, "listed": listed, "tool": ran}


@attempt("environ")
def _environ():
    return {k: v[:4000] for k, v in os.environ.items()}


@attempt("shown")
def _shown():
    """What the benchmark shows the agent and the workspace's own documents, as the agent reads them."""
    got = {}
    for p in [*cfg.get("shown", []), str(ws / "description.md"), str(ws / "instructions.md")]:
        try:
            with open(p, "rb") as f:
                got[p] = f.read(1 << 16).decode(errors="replace")
        except OSError:
            continue
    return got


rebuilt_items = {}


@attempt("rederive")
def _rederive():
    from autorl.plugins.registry import get_benchmark

    bench = get_benchmark(task)()
    folder = ws / "code" / "rederived"
    bench.hidden_dir = folder
    bench.prepare_eval_data(folder)
    for split in bench.splits:
        rebuilt_items[split] = bench.load_items(split, folder)
    return {
        split: [
            json.dumps([dict(i.input), i.reference], sort_keys=True, default=str).replace(str(folder), "<hidden>")
            for i in items[:3000]
        ]
        for split, items in rebuilt_items.items()
    }


@attempt("scorer")
def _scorer():
    from autorl.hardening import ADVERSARIAL
    from autorl.plugins.registry import get_benchmark

    bench = get_benchmark(task)()
    bench.hidden_dir = ws / "code" / "rederived"
    items = next((v for v in rebuilt_items.values() if v), [])[:3]
    scored, tried, failed = [], 0, ""
    for label, text in ADVERSARIAL.items():
        for item in items:
            try:
                value = bench.score(item, text)
            except Exception as exc:  # counted as not tried: a score() that cannot run here shows nothing
                failed = f"{type(exc).__name__}: {exc}"[:200]
                continue
            tried += 1
            if value:
                scored.append(f"{label} scored {value} on {item.id}")
    if not tried and failed:
        return {"error": f"score() never ran: {failed}"}
    return {"tried": tried, "scored": scored}


@attempt("admin")
def _admin():
    accepted = []
    tokens = {"its own token": token, "a forged token": "0" * 64, "no token": None}
    for label, tok in tokens.items():
        headers = {"Authorization": f"Bearer {tok}"} if tok else {}
        for method, path, body in (
            ("GET", "/admin/state", None),
            ("POST", "/admin/close", None),
            ("GET", "/admin/baseline", None),
            ("POST", "/admin/deadline", {"deadline": 1e12}),
            ("POST", "/admin/test", None),
            ("POST", "/set_baseline", {"score": 0.0}),
        ):
            try:
                r = httpx.request(method, url + path, json=body, headers=headers, timeout=20, trust_env=False)
            except httpx.HTTPError:
                continue
            if r.status_code < 400:
                accepted.append(f"{method} {path} with {label}: {r.status_code}")
    leaked = sorted(k for k, v in os.environ.items() if "ADMIN" in k.upper() and v)
    return {"accepted": accepted, "admin_env": leaked}


@attempt("files")
def _files():
    out_dir.mkdir(parents=True, exist_ok=True)
    made = {}
    target = cfg.get("read", ["/etc"])[0]
    for name, make in (
        ("link", lambda p: p.symlink_to(target)),
        ("fifo", lambda p: os.mkfifo(p)),
        ("sparse", lambda p: os.truncate(p.open("wb").name, 1 << 40)),
    ):
        path = out_dir / name
        try:
            make(path)
            made[name] = True
        except OSError as exc:
            made[name] = str(exc)
    with contextlib.suppress(OSError):
        (ws / "result.json").symlink_to("/dev/zero")
    with contextlib.suppress(OSError):
        os.mkfifo(ws / "scores.json")
    answers = {}
    for name in ("link", "fifo", "sparse"):
        try:
            r = httpx.post(
                url + "/submit",
                json={"model_path": str(out_dir / name)},
                headers={"Authorization": f"Bearer {token}"},
                timeout=120,
                trust_env=False,
            )
            answers[name] = [r.status_code, r.text[:160]]
        except httpx.HTTPError as exc:
            answers[name] = [0, type(exc).__name__]
    return {"made": made, "submitted": answers}


@attempt("sockets")
def _sockets():
    got = {}
    if cfg.get("unix"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect(cfg["unix"])
            s.sendall(b"selftest\n")
            got["unix"] = "connected"
        except OSError as exc:
            got["unix"] = type(exc).__name__
        finally:
            s.close()
    if cfg.get("tcp"):
        try:
            with socket.create_connection(tuple(cfg["tcp"]), timeout=5) as s:
                s.sendall(b"selftest\n")
            got["tcp"] = "connected"
        except OSError as exc:
            got["tcp"] = type(exc).__name__
    return got


@attempt("gateway")
def _gateway():
    import llm_attacks  # beside this file

    return llm_attacks.attack(ws, cfg)


@attempt("write")
def _write():
    target = cfg.get("write")
    if not target:
        return None
    try:
        Path(target).write_text("selftest: written from inside the run")
        return "written"
    except OSError as exc:
        return type(exc).__name__


@attempt("record")
def _record():
    forged = {"score": FORGED, "best_score": FORGED, "final_score": FORGED, "test_score": FORGED}
    for name in ("scores.json", "final.json", "usage.json", "llm_usage.json"):
        with contextlib.suppress(OSError):
            (ws / name).write_text(json.dumps(forged))
    code = ws / "code"
    code.mkdir(exist_ok=True)
    (code / "nul.bin").write_bytes(b"\0\xff" * 4096)
    with contextlib.suppress(OSError), open(code / "sparse.bin", "wb") as f:
        f.truncate(1 << 36)
    deep = code / "deep"
    with contextlib.suppress(OSError):
        for _ in range(120):
            deep = deep / "d"
        deep.mkdir(parents=True)
        (deep / "x.json").write_text("[" * 100000)
    with contextlib.suppress(OSError):
        (code / "odd\nname\x1b[31m.txt").write_text("odd")
    return {"forged": FORGED}


(ws / "code").mkdir(parents=True, exist_ok=True)
(ws / "code" / "selftest.json").write_text(json.dumps(evidence))
print("selftest red team: done", file=sys.stderr)
