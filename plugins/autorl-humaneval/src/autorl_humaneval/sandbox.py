"""Runs model-written code in a separate, resource-limited, network-less process with a timeout.

Each program gets its own process and private temporary directory, and never runs as root (it is
dropped to ``nobody``). Limits (address space, CPU time, processes, file size, open files) are set
with ``setrlimit`` before exec. With bubblewrap (``bwrap``, the default and the only mode used unless
the operator names a weaker one) the program runs under autorl's policy of model-generated programs
(:mod:`autorl.sandbox.program`, applied by autorl's one launcher): new user/pid/net/ipc namespaces, only the
system's folders and its interpreter read-only, its work folder as the only place it writes, a private /tmp,
no home and no view of the paths passed as ``hidden`` (the grader's storage, evaluation data). ``unshare`` (a
new network namespace only) and ``limits`` (rlimits only) run model code only when the operator asks for them
by name (:func:`resolve_isolation`).

A problem's tests never run in the process of the model's code (:func:`run_check`): the model's
program is served from the sandbox, one call a line, and the problem's ``check`` runs in a separate
checker process that the model's code cannot reach (another user id when the grader is root, another
pid namespace under bubblewrap, never dumpable), with plain data (numbers, strings, lists, tuples,
dicts, sets, None) as the only thing that crosses between them. The checker writes a per-run random
token, which only it and the grader know, after ``check`` returns; a program passes only then. Exiting
early, printing, patching builtins or ``check``, returning objects that equal everything, or reading the
test's file cannot make a program pass, since none of it reaches the checker. Output of model code
(stdout and stderr) is read up to :data:`OUTPUT_CAP` bytes and the rest discarded.

About 500 lines: the model's process, the checker's process and the wire between them (capped plain
data, the token) are one security boundary, read and reviewed as one file.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from autorl import ResourceError, UsageError
from autorl.sandbox import bwrap_binary, launch, program_env, program_policy

T = TypeVar("T")

#: The operator's choice of isolation when the benchmark option ``isolation`` is not given.
ISOLATION_ENV = "AUTORL_HUMANEVAL_ISOLATION"
ISOLATION_MODES = ("bwrap", "unshare", "limits")
#: Bytes of a program's stdout/stderr kept (the tail); the rest is read and discarded.
OUTPUT_CAP = 64 * 1024
#: The longest reply (one call's return value, encoded) the checker accepts from a program.
REPLY_CAP = 1024 * 1024


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
    bwrap = bwrap_binary()
    if shutil.which(bwrap) and _probe([bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"]):
        return "bwrap"
    if shutil.which("unshare") and _probe(["unshare", "--net", "--map-root-user", "true"]):
        return "unshare"
    return "limits"


def resolve_isolation(requested: str | None = None) -> str:
    """The isolation model code runs under: bubblewrap unless the operator names a weaker mode.

    ``requested`` (the benchmark option ``isolation``), else ``$AUTORL_HUMANEVAL_ISOLATION``, else
    ``bwrap``. A mode that cannot run here is a one-line error, never a silent fall-back."""
    wanted = str(requested or os.environ.get(ISOLATION_ENV) or "bwrap").strip()
    if wanted not in ISOLATION_MODES:
        raise UsageError(f"humaneval isolation {wanted!r} is not one of {', '.join(ISOLATION_MODES)}")
    best = isolation()
    if wanted == "bwrap" and best != "bwrap":
        raise ResourceError(
            "humaneval runs model-written code only under bubblewrap, which cannot run here: install bubblewrap "
            f"(with unprivileged user namespaces allowed), or accept weaker isolation explicitly with {ISOLATION_ENV}"
            "=unshare (no network only) or =limits (resource limits only), or the benchmark option isolation=...")
    if wanted == "unshare" and best == "limits":
        raise ResourceError(f"humaneval isolation 'unshare' cannot run here (unshare --net fails); "
                            f"set {ISOLATION_ENV}=limits to run model code with resource limits only")
    return wanted


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


def _reachable(path: Path) -> bool:
    """Whether the sandbox's unprivileged user can reach ``path`` (every parent searchable by others);
    without root the sandbox runs as this user, who can."""
    if os.getuid() != 0:
        return True
    try:
        return all(parent.stat().st_mode & 0o001 for parent in path.parents)
    except OSError:
        return False


def _argv(args: Sequence[str], workdir: Path, hidden: Sequence[Path], mode: str) -> list[str]:
    python = [interpreter(), "-I", "-B", *args]
    if mode == "bwrap":
        policy = program_policy(workdir, hidden=hidden, reachable=_reachable)
        return launch(policy, python, mode="bwrap", executable=bwrap_binary()).argv
    if mode == "unshare":
        return ["unshare", "--net", "--map-root-user", *python]
    return python


#: Plain data as JSON, on both sides of the model's process: tuples, dicts with any keys and sets tagged so
#: that they come back as what they were, and nothing else accepted. ``NOT_PLAIN`` (set by the script) words
#: the refusal to encode. encode and decode share the walk (JSON's own values as they are, lists item by item)
#: and the tags; each is the other's inverse.
CODEC = r'''
TAGS = {tuple: "t", dict: "d", set: "s", frozenset: "s"}

def convert(v, tagged):
    if v is None or type(v) in (bool, int, float, str):
        return v
    if type(v) is list:
        return [convert(x, tagged) for x in v]
    return tagged(v)

def encode(v):
    return convert(v, encode_tagged)

def encode_tagged(v):
    tag = TAGS.get(type(v))
    if tag is None:
        raise TypeError(NOT_PLAIN.format(type(v).__name__))
    return {tag: encode([[k, x] for k, x in v.items()] if tag == "d" else list(v))}

class NotPlain(Exception):
    pass

def decode(v):
    return convert(v, decode_tagged)

def decode_tagged(v):
    if type(v) is dict and len(v) == 1:
        (tag, body), = v.items()
        if type(body) is list:
            if tag == "t":
                return tuple(decode(x) for x in body)
            if tag == "s":
                return {decode(x) for x in body}
            if tag == "d" and all(type(p) is list and len(p) == 2 for p in body):
                return {decode(k): decode(x) for k, x in body}
    raise NotPlain("the reply is not plain data")
'''

#: Runs in the sandbox, as the model's process: executes the model's program, then answers one call of
#: the entry point a line (arguments in, the return value out), all as plain data.
SERVER = (
    r'''
import json, os, sys
replies = os.fdopen(os.dup(1), "w", buffering=1)
calls = os.fdopen(os.dup(0), "r")
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
os.dup2(2, 1)

NOT_PLAIN = "returned a {}, which is not plain data"
'''
    + CODEC
    + r'''

namespace = {"__name__": "__main__"}
try:
    exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), namespace)
    function = namespace[sys.argv[2]]
except BaseException as exc:
    replies.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]}) + "\n")
    os._exit(1)
for line in calls:
    try:
        call = json.loads(line)
        reply = json.dumps({"value": encode(function(*decode(call["args"]), **decode(call["kwargs"])))})
    except BaseException as exc:
        reply = json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]})
    replies.write(reply + "\n")
'''
)

#: Runs outside the model's sandbox, executing only the problem's own code (its prompt and its tests):
#: ``check`` gets a stand-in for the candidate that calls the model's process and decodes its replies
#: as plain data. The token (known to this process and the grader only) is written after ``check``
#: returns, on a descriptor the model's process never holds.
CHECKER = (
    r'''
import ctypes, json, os, sys
try:
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem
except Exception:
    pass
job = json.loads(sys.stdin.readline())
result = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
calls = os.fdopen(job["call_fd"], "w", buffering=1)
replies = os.fdopen(job["reply_fd"], "rb")
CAP = job["reply_cap"]

NOT_PLAIN = "cannot pass a {} to the program"
'''
    + CODEC
    + r'''

class CandidateFailed(Exception):
    pass


def candidate(*args, **kwargs):
    try:
        calls.write(json.dumps({"args": encode(list(args)), "kwargs": encode(kwargs)}) + "\n")
    except OSError:
        raise CandidateFailed("the program stopped taking calls") from None
    line = replies.readline(CAP + 1)
    if not line.endswith(b"\n"):
        raise CandidateFailed("the program stopped answering" if len(line) <= CAP else "the program's reply is too long")
    try:
        reply = json.loads(line)
    except (ValueError, RecursionError):
        raise CandidateFailed("the program's reply is not JSON") from None
    if type(reply) is not dict or not ("value" in reply or "error" in reply):
        raise CandidateFailed("the program's reply is not a reply")
    if "error" in reply:
        raise CandidateFailed(str(reply["error"])[:300])
    try:
        return decode(reply["value"])
    except NotPlain:
        raise CandidateFailed("the program's reply is not plain data") from None
    except RecursionError:
        raise CandidateFailed("the program's reply is nested too deep") from None

namespace = {"__name__": "__check__"}
exec(compile(job["prompt"], "prompt.py", "exec"), namespace)
namespace[job["entry_point"]] = candidate  # tests that call the function by its name call the model's
exec(compile(job["test"], "test.py", "exec"), namespace)
namespace["check"](candidate)
result.write(job["token"] + "\n")
result.flush()
'''
)

CHECKER_PROCESSES = 1024  # the checkers share one user id when the grader is root; each is one process


def _drain(stream: IO[bytes], cap: int) -> tuple[threading.Thread, bytearray]:
    """Read ``stream`` to its end in a thread, keeping only its last ``cap`` bytes."""
    kept = bytearray()

    def read() -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
                kept.extend(chunk)
                if len(kept) > cap:
                    del kept[: len(kept) - cap]

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, kept


def _last_line(data: bytes | bytearray) -> str:
    lines = bytes(data).decode(errors="replace").strip().splitlines()
    return lines[-1][:300] if lines else ""


def _sandbox_env(workdir: Path) -> dict[str, str]:
    return program_env(workdir)


def _workdir(uid: int) -> Path:
    workdir = Path(tempfile.mkdtemp(prefix="autorl-sandbox-"))
    if os.getuid() == 0:
        os.chown(workdir, uid, uid)
    return workdir


def _timed_out(proc: subprocess.Popen[bytes], timeout_s: float) -> Outcome | None:
    """Wait for ``proc``: the timeout's outcome when it has not ended within ``timeout_s``, else None."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Outcome(False, "timeout", f"no result within {timeout_s:.0f} s")
    return None


def _verdict(passed: bool, returncode: int, stderr: bytearray, who: str = "") -> Outcome:
    """The outcome of a process that ended in time: ``passed``, else killed by a signal (``who`` named), else
    failed with the last line of its ``stderr``."""
    if passed:
        return Outcome(True, "passed")
    if returncode < 0:
        return Outcome(False, "killed", f"{who}killed by {signal.Signals(-returncode).name}")
    return Outcome(False, "failed", _last_line(stderr))


def run_program(source: str, *, limits: Limits = Limits(), hidden: Sequence[Path] = (),
                mode: str | None = None) -> Outcome:
    """Run ``source`` as a Python program in the sandbox; passed means it exited with status 0 in time.

    This is the sandbox itself; scoring never uses an exit status (see :func:`run_check`)."""
    mode = mode or resolve_isolation()
    uid = _free_uids.get()
    workdir = _workdir(uid)
    try:
        program = workdir / "program.py"
        program.write_text(source)
        proc = subprocess.Popen(
            _argv([str(program)], workdir, hidden, mode), cwd=workdir, env=_sandbox_env(workdir),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=lambda: _set_limits(limits, uid),
        )
        assert proc.stderr is not None
        reader, err = _drain(proc.stderr, OUTPUT_CAP)
        try:
            timeout = _timed_out(proc, limits.timeout_s)
        finally:
            _kill(proc)
            reader.join(timeout=5)
        return timeout or _verdict(proc.returncode == 0, proc.returncode, err)
    finally:
        if os.getuid() == 0:
            _reap(uid)
        shutil.rmtree(workdir, ignore_errors=True)
        _free_uids.put(uid)


@dataclass(frozen=True)
class Check:
    """One problem's code: the prompt (the problem's own, trusted), the model's completion and the tests."""

    prompt: str
    completion: str
    test: str
    entry_point: str


def run_check(check: Check, *, limits: Limits = Limits(), hidden: Sequence[Path] = (),
              mode: str | None = None) -> Outcome:
    """Passed means the problem's ``check`` ran to its end against the model's function, and nothing else.

    The model's program (prompt + completion, never the tests) runs in the sandbox and serves calls;
    ``check`` runs in a checker process outside it, which alone knows the per-run token it writes when
    ``check`` returns."""
    mode = mode or resolve_isolation()
    uid = _free_uids.get()
    workdir = _workdir(uid)
    token = secrets.token_hex(32)
    server = checker = None
    readers: list[threading.Thread] = []
    try:
        program = workdir / "program.py"
        program.write_text(f"{check.prompt}{check.completion}\n")
        server = subprocess.Popen(
            _argv(["-c", SERVER, str(program), check.entry_point], workdir, hidden, mode), cwd=workdir,
            env=_sandbox_env(workdir), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            preexec_fn=lambda: _set_limits(limits, uid),
        )
        assert server.stdin is not None and server.stdout is not None and server.stderr is not None
        call_fd, reply_fd = server.stdin.fileno(), server.stdout.fileno()
        checker_uid = NOBODY
        checker_limits = Limits(timeout_s=limits.timeout_s, memory_mb=limits.memory_mb,
                                processes=CHECKER_PROCESSES, file_mb=1, open_files=64)
        checker = subprocess.Popen(
            [interpreter(), "-I", "-B", "-c", CHECKER], cwd="/", env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(call_fd, reply_fd),
            preexec_fn=lambda: _set_limits(checker_limits, checker_uid),
        )
        server.stdin.close()  # the checker holds the only ends of the model's stdin and stdout now
        server.stdout.close()
        assert checker.stdin is not None and checker.stdout is not None and checker.stderr is not None
        server_reader, _ = _drain(server.stderr, OUTPUT_CAP)
        result_reader, result = _drain(checker.stdout, 4096)
        error_reader, error = _drain(checker.stderr, OUTPUT_CAP)
        readers = [server_reader, result_reader, error_reader]
        job = {"token": token, "prompt": check.prompt, "test": check.test, "entry_point": check.entry_point,
               "call_fd": call_fd, "reply_fd": reply_fd, "reply_cap": REPLY_CAP}
        with contextlib.suppress(OSError):
            checker.stdin.write((json.dumps(job) + "\n").encode())
            checker.stdin.close()
        try:
            timeout = _timed_out(checker, limits.timeout_s)
        finally:
            _kill(checker)
            _kill(server)
            if os.getuid() == 0:
                _reap(uid)  # what the program forked holds its stderr open: gone before the readers finish
            for reader in readers:
                reader.join(timeout=5)
        passed = checker.returncode == 0 and bytes(result) == f"{token}\n".encode()
        return timeout or _verdict(passed, checker.returncode, error, "checker ")
    finally:
        for proc in (checker, server):
            if proc is not None and proc.returncode is None:
                _kill(proc)
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
             workers: int | None = None, mode: str | None = None) -> list[Outcome]:
    """Run programs in parallel, up to the core count (exit status only: see :func:`run_program`)."""
    run = functools.partial(run_program, limits=limits, hidden=hidden, mode=mode or resolve_isolation())
    return _in_parallel(run, sources, workers)


def run_checks(checks: Sequence[Check], *, limits: Limits = Limits(), hidden: Sequence[Path] = (),
               workers: int | None = None, mode: str | None = None) -> list[Outcome]:
    """:func:`run_check` for each, in parallel up to the core count."""
    run = functools.partial(run_check, limits=limits, hidden=hidden, mode=mode or resolve_isolation())
    return _in_parallel(run, checks, workers)


def _in_parallel(run: Callable[[T], Outcome], jobs: Sequence[T], workers: int | None) -> list[Outcome]:
    """``run`` over ``jobs`` in threads: up to the core count, and never more than the sandbox users."""
    workers = min(workers or max(1, os.cpu_count() or 1), len(UID_POOL))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run, jobs))
