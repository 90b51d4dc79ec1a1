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

The boundary is three modules: the model's process (:mod:`autorl_humaneval.isolation`: isolation, limits, its
user), the wire between it and the checker (:mod:`autorl_humaneval.wire`: capped plain data, both scripts) and,
here, running programs and checks with their outcomes.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from autorl.sandbox import program_env
from autorl_humaneval.isolation import (
    ISOLATION_ENV,
    ISOLATION_MODES,
    NOBODY,
    UID_POOL,
    Limits,
    free_uids,
    interpreter,
    isolation,
    resolve_isolation,
    sandboxed_argv,
    set_limits,
)
from autorl_humaneval.wire import CHECKER, REPLY_CAP, SERVER

__all__ = [
    "ISOLATION_ENV",
    "ISOLATION_MODES",
    "OUTPUT_CAP",
    "UID_POOL",
    "Check",
    "Limits",
    "Outcome",
    "isolation",
    "resolve_isolation",
    "run_check",
    "run_checks",
    "run_many",
    "run_program",
]

T = TypeVar("T")

#: Bytes of a program's stdout/stderr kept (the tail); the rest is read and discarded.
OUTPUT_CAP = 64 * 1024


@dataclass(frozen=True)
class Outcome:
    passed: bool
    status: str  # "passed", "failed", "timeout", "killed"
    detail: str = ""


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


def run_program(
    source: str, *, limits: Limits = Limits(), hidden: Sequence[Path] = (), mode: str | None = None
) -> Outcome:
    """Run ``source`` as a Python program in the sandbox; passed means it exited with status 0 in time.

    This is the sandbox itself; scoring never uses an exit status (see :func:`run_check`)."""
    mode = mode or resolve_isolation()
    uid = free_uids.get()
    workdir = _workdir(uid)
    try:
        program = workdir / "program.py"
        program.write_text(source)
        proc = subprocess.Popen(
            sandboxed_argv([str(program)], workdir, hidden, mode),
            cwd=workdir,
            env=_sandbox_env(workdir),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: set_limits(limits, uid),
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
        free_uids.put(uid)


@dataclass(frozen=True)
class Check:
    """One problem's code: the prompt (the problem's own, trusted), the model's completion and the tests."""

    prompt: str
    completion: str
    test: str
    entry_point: str


def run_check(
    check: Check, *, limits: Limits = Limits(), hidden: Sequence[Path] = (), mode: str | None = None
) -> Outcome:
    """Passed means the problem's ``check`` ran to its end against the model's function, and nothing else.

    The model's program (prompt + completion, never the tests) runs in the sandbox and serves calls;
    ``check`` runs in a checker process outside it, which alone knows the per-run token it writes when
    ``check`` returns."""
    mode = mode or resolve_isolation()
    uid = free_uids.get()
    workdir = _workdir(uid)
    token = secrets.token_hex(32)
    server = checker = None
    readers: list[threading.Thread] = []
    try:
        program = workdir / "program.py"
        program.write_text(f"{check.prompt}{check.completion}\n")
        server = subprocess.Popen(
            sandboxed_argv(["-c", SERVER, str(program), check.entry_point], workdir, hidden, mode),
            cwd=workdir,
            env=_sandbox_env(workdir),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: set_limits(limits, uid),
        )
        assert server.stdin is not None and server.stdout is not None and server.stderr is not None
        call_fd, reply_fd = server.stdin.fileno(), server.stdout.fileno()
        checker_uid = NOBODY
        checker_limits = Limits(
            timeout_s=limits.timeout_s,
            memory_mb=limits.memory_mb,
            processes=CHECKER_PROCESSES,
            file_mb=1,
            open_files=64,
        )
        checker = subprocess.Popen(
            [interpreter(), "-I", "-B", "-c", CHECKER],
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(call_fd, reply_fd),
            preexec_fn=lambda: set_limits(checker_limits, checker_uid),
        )
        server.stdin.close()  # the checker holds the only ends of the model's stdin and stdout now
        server.stdout.close()
        assert checker.stdin is not None and checker.stdout is not None and checker.stderr is not None
        server_reader, _ = _drain(server.stderr, OUTPUT_CAP)
        result_reader, result = _drain(checker.stdout, 4096)
        error_reader, error = _drain(checker.stderr, OUTPUT_CAP)
        readers = [server_reader, result_reader, error_reader]
        job = {
            "token": token,
            "prompt": check.prompt,
            "test": check.test,
            "entry_point": check.entry_point,
            "call_fd": call_fd,
            "reply_fd": reply_fd,
            "reply_cap": REPLY_CAP,
        }
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
        free_uids.put(uid)


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


def run_many(
    sources: Sequence[str],
    *,
    limits: Limits = Limits(),
    hidden: Sequence[Path] = (),
    workers: int | None = None,
    mode: str | None = None,
) -> list[Outcome]:
    """Run programs in parallel, up to the core count (exit status only: see :func:`run_program`)."""
    run = functools.partial(run_program, limits=limits, hidden=hidden, mode=mode or resolve_isolation())
    return _in_parallel(run, sources, workers)


def run_checks(
    checks: Sequence[Check],
    *,
    limits: Limits = Limits(),
    hidden: Sequence[Path] = (),
    workers: int | None = None,
    mode: str | None = None,
) -> list[Outcome]:
    """:func:`run_check` for each, in parallel up to the core count."""
    run = functools.partial(run_check, limits=limits, hidden=hidden, mode=mode or resolve_isolation())
    return _in_parallel(run, checks, workers)


def _in_parallel(run: Callable[[T], Outcome], jobs: Sequence[T], workers: int | None) -> list[Outcome]:
    """``run`` over ``jobs`` in threads: up to the core count, and never more than the sandbox users."""
    workers = min(workers or max(1, os.cpu_count() or 1), len(UID_POOL))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run, jobs))
