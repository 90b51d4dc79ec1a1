"""The model's process: the isolation it runs under (bubblewrap unless the operator names a weaker mode), its
resource limits and its unprivileged user. What crosses to the checker is :mod:`autorl_humaneval.wire`; running
programs and checks is :mod:`autorl_humaneval.sandbox`."""

from __future__ import annotations

import functools
import os
import queue
import resource
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autorl import ResourceError, UsageError
from autorl.sandbox import bwrap_binary, launch, program_policy

#: The operator's choice of isolation when the benchmark option ``isolation`` is not given.
ISOLATION_ENV = "AUTORL_HUMANEVAL_ISOLATION"
ISOLATION_MODES = ("bwrap", "unshare", "limits")


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0
    memory_mb: int = 1024
    processes: int = 64
    file_mb: int = 16
    open_files: int = 64


NOBODY = 65534
#: Unprivileged ids programs run as when started by root: one per program running at a time, so that
#: RLIMIT_NPROC (counted per user, system-wide) binds each program on its own.
UID_POOL = range(61_000, 61_064)
free_uids: queue.Queue[int] = queue.Queue()
for _uid in UID_POOL:
    free_uids.put(_uid)


def drop_privileges(uid: int = NOBODY) -> None:
    # RLIMIT_NPROC does not bind root, and root could write anywhere: programs never run as root
    if os.getuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def probe(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=20, preexec_fn=drop_privileges).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.cache
def isolation() -> str:
    """``bwrap`` (namespaces and a masked file system), ``unshare`` (no network) or ``limits`` only."""
    bwrap = bwrap_binary()
    if shutil.which(bwrap) and probe([bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"]):
        return "bwrap"
    if shutil.which("unshare") and probe(["unshare", "--net", "--map-root-user", "true"]):
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
            "=unshare (no network only) or =limits (resource limits only), or the benchmark option isolation=..."
        )
    if wanted == "unshare" and best == "limits":
        raise ResourceError(
            f"humaneval isolation 'unshare' cannot run here (unshare --net fails); "
            f"set {ISOLATION_ENV}=limits to run model code with resource limits only"
        )
    return wanted


@functools.cache
def interpreter() -> str:
    """A Python the unprivileged sandbox user can execute: this one, else the system's."""
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3", shutil.which("python3") or ""):
        if candidate and probe([candidate, "-I", "-c", "pass"]):
            return candidate
    raise RuntimeError("no Python interpreter that an unprivileged user may run was found for the sandbox")


def set_limits(limits: Limits, uid: int) -> None:
    os.setsid()
    mb = 1024 * 1024
    cpu = int(limits.timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * mb, limits.file_mb * mb))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    drop_privileges(uid)


def reachable(path: Path) -> bool:
    """Whether the sandbox's unprivileged user can reach ``path`` (every parent searchable by others);
    without root the sandbox runs as this user, who can."""
    if os.getuid() != 0:
        return True
    try:
        return all(parent.stat().st_mode & 0o001 for parent in path.parents)
    except OSError:
        return False


def sandboxed_argv(args: Sequence[str], workdir: Path, hidden: Sequence[Path], mode: str) -> list[str]:
    python = [interpreter(), "-I", "-B", *args]
    if mode == "bwrap":
        policy = program_policy(workdir, hidden=hidden, reachable=reachable)
        return launch(policy, python, mode="bwrap", executable=bwrap_binary()).argv
    if mode == "unshare":
        return ["unshare", "--net", "--map-root-user", *python]
    return python
