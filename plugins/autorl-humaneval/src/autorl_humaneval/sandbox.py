"""Runs model-written code in a separate, resource-limited, network-less process with a timeout.

Each program gets its own process and private temporary directory, and never runs as root (it is
dropped to ``nobody``). Limits (address space, CPU time, processes, file size, open files) are set
with ``setrlimit`` before exec. Where bubblewrap (``bwrap``)
can run, the program also gets new user/pid/net/ipc namespaces, a read-only view of the system, a
private /tmp and no view of the paths passed as ``hidden`` (the grader's storage, evaluation data).
Without bubblewrap the isolation is the limits plus a new network namespace where ``unshare`` works;
:func:`isolation` says which one is in force.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0
    memory_mb: int = 1024
    processes: int = 64
    file_mb: int = 16
    open_files: int = 64


@dataclass(frozen=True)
class Outcome:
    passed: bool
    status: str  # "passed", "failed", "timeout", "killed"
    detail: str = ""


NOBODY = 65534
#: Unprivileged ids programs run as when started by root: one per program running at a time, so that
#: RLIMIT_NPROC (counted per user, system-wide) binds each program on its own.
UID_POOL = range(61_000, 61_064)
_free_uids: queue.Queue[int] = queue.Queue()
for _uid in UID_POOL:
    _free_uids.put(_uid)


def _drop_privileges(uid: int = NOBODY) -> None:
    # RLIMIT_NPROC does not bind root, and root could write anywhere: programs never run as root
    if os.getuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def _probe(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=20, preexec_fn=_drop_privileges).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.cache
def isolation() -> str:
    """``bwrap`` (namespaces and a masked file system), ``unshare`` (no network) or ``limits`` only."""
    if shutil.which("bwrap") and _probe(["bwrap", "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"]):
        return "bwrap"
    if shutil.which("unshare") and _probe(["unshare", "--net", "--map-root-user", "true"]):
        return "unshare"
    return "limits"


@functools.cache
def interpreter() -> str:
    """A Python the unprivileged sandbox user can execute: this one, else the system's."""
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3", shutil.which("python3") or ""):
        if candidate and _probe([candidate, "-I", "-c", "pass"]):
            return candidate
    raise RuntimeError("no Python interpreter that an unprivileged user may run was found for the sandbox")


def _set_limits(limits: Limits, uid: int) -> None:
    os.setsid()
    mb = 1024 * 1024
    cpu = int(limits.timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * mb, limits.file_mb * mb))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _drop_privileges(uid)


def _argv(program: Path, workdir: Path, hidden: Sequence[Path]) -> list[str]:
    python = [interpreter(), "-I", "-B", str(program)]
    mode = isolation()
    if mode == "bwrap":
        argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                "--bind", str(workdir), str(workdir), "--chdir", str(workdir), "--unshare-all",
                "--die-with-parent", "--new-session", "--setenv", "HOME", str(workdir)]
        for path in hidden:
            if path.is_dir():
                argv += ["--tmpfs", str(path)]
            elif path.exists():
                argv += ["--ro-bind", "/dev/null", str(path)]
        return [*argv, *python]
    if mode == "unshare":
        return ["unshare", "--net", "--map-root-user", *python]
    return python


def run_program(source: str, *, limits: Limits = Limits(), hidden: Sequence[Path] = ()) -> Outcome:
    """Run ``source`` as a Python program; passed means exit status 0 within the time limit."""
    uid = _free_uids.get()
    workdir = Path(tempfile.mkdtemp(prefix="autorl-sandbox-"))
    if os.getuid() == 0:
        os.chown(workdir, uid, uid)
    try:
        program = workdir / "program.py"
        program.write_text(source)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
        proc = subprocess.Popen(
            _argv(program, workdir, hidden), cwd=workdir, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=lambda: _set_limits(limits, uid),
        )
        try:
            _, err = proc.communicate(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            return Outcome(False, "timeout", f"no result within {limits.timeout_s:.0f} s")
        finally:
            _kill(proc)
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
        if proc.returncode == 0:
            return Outcome(True, "passed")
        if proc.returncode < 0:
            return Outcome(False, "killed", f"killed by {signal.Signals(-proc.returncode).name}")
        return Outcome(False, "failed", tail[0][:300])
    finally:
        if os.getuid() == 0:
            _reap(uid)
        shutil.rmtree(workdir, ignore_errors=True)
        _free_uids.put(uid)


def _processes_of(uid: int) -> list[int]:
    """Live processes of ``uid`` (zombies hold no resources but a process slot, and init reaps them)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    pids.append(int(entry.name))
            except (OSError, IndexError):
                pass
    return pids


def _reap(uid: int, timeout_s: float = 10.0) -> None:
    """Kill whatever a program left behind (forked children, daemons) before its id is reused."""
    end = time.monotonic() + timeout_s
    while (pids := _processes_of(uid)) and time.monotonic() < end:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_many(sources: Sequence[str], *, limits: Limits = Limits(), hidden: Sequence[Path] = (),
             workers: int | None = None) -> list[Outcome]:
    """Run programs in parallel, up to the core count."""
    workers = min(workers or max(1, os.cpu_count() or 1), len(UID_POOL))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda s: run_program(s, limits=limits, hidden=hidden), sources))
