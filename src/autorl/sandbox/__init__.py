"""The agent's sandbox: isolation by absence.

What the agent cannot see it cannot use. Under bubblewrap the agent gets the system and the Python
environment read-only, its workspace read-write, the base model and the training data read-only, a private
/tmp (or a per-run host directory given as ``tmp_dir``, which ``TMPDIR`` then names) and an empty private
``$HOME``; everything that holds evaluation data is not there at all: the grader's
storage, ``AUTORL_HOME`` (datasets, hidden splits, baselines, the ledger, other runs), the Hugging Face cache,
the installed files that benchmark plugins declare as holding test data, the host's ``TMPDIR`` (where the
grader's HumanEval programs run), and the host's sockets and runtime state: ``/run`` (``/var/run``: the
container runtime's socket, the user's D-Bus, through which ``systemd-run --user`` would run commands
outside) and ``/dev/shm`` are private and empty. It runs in new pid, ipc and uts namespaces (the grader and
the orchestrator are not in its ``/proc``) and dies with the orchestrator.

It always gets a network namespace of its own, so that the host's abstract Unix sockets and whatever listens
on the host's loopback are out of reach. With the network off it has only loopback; with it on,
slirp4netns gives it a route out with the host's loopback refused and a DNS forwarder (see
:mod:`autorl.sandbox.netns`). Either way the grader is reached through a Unix socket bound into the sandbox
and relayed to ``127.0.0.1:<port>`` inside it, so ``GRADING_SERVER_URL`` stays the same. Where slirp4netns
cannot run, network on falls back to the host's network with a warning, and the run records its sandbox
mode as ``bwrap+hostnet``.

``AUTORL_BWRAP`` names the bubblewrap executable (default ``bwrap`` on PATH); ``AUTORL_SANDBOX_RO`` lists
further host paths (``os.pathsep``-separated) the agent may read, e.g. a shared dataset directory.
Evaluation data stays hidden even when one of them holds it.

A little over 300 lines: the spec, the bubblewrap command built from it and the choice of mode are one
policy; the network namespace is :mod:`autorl.sandbox.netns`, the grader relay :mod:`autorl.sandbox.relay`, the
host's places the orchestrator names (caches, ``AUTORL_SANDBOX_*``, a model's repo) :mod:`autorl.sandbox.host`.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autorl.errors import UsageError
from autorl.sandbox.host import extra_hidden, extra_read_only, hf_cache_dirs, model_bind_paths
from autorl.sandbox.netns import (
    NETNS_MAIN,
    RESOLV_NAME,
    new_socket_dir,
    probe_argv,
    slirp_available,
    slirp_hardened,
)
from autorl.sandbox.relay import RELAY_MAIN, SOCKET_NAME, socket_name_for

__all__ = [
    "INNER_SOCKET_DIR",
    "MODES",
    "NETWORKS",
    "RUNTIME_DIRS",
    "SOCKET_NAME",
    "SandboxChoice",
    "SandboxSpec",
    "bwrap_argv",
    "bwrap_available",
    "bwrap_binary",
    "choose",
    "extra_hidden",
    "extra_read_only",
    "gpu_devices",
    "hf_cache_dirs",
    "model_bind_paths",
    "path_dirs",
    "python_paths",
]

MODES = ("auto", "bwrap", "none")
NETWORKS = ("on", "off")
#: Where the grader's socket appears inside the sandbox (on its private /run).
INNER_SOCKET_DIR = "/run/autorl-grader"
#: Host places of sockets and runtime state, private and empty inside.
RUNTIME_DIRS = (Path("/run"), Path("/var/run"))


def bwrap_binary() -> str:
    return os.environ.get("AUTORL_BWRAP", "bwrap")


@functools.cache
def _probe(binary: str) -> tuple[str | None, str]:
    exe = shutil.which(binary)
    if exe is None:
        return None, f"{binary} not found (install bubblewrap: apt install bubblewrap / dnf install bubblewrap)"
    try:
        proc = subprocess.run(probe_argv(exe), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{binary} cannot run: {exc}"
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return None, f"{binary} cannot create namespaces here ({why})"
    return exe, "ok"


def bwrap_available() -> tuple[str | None, str]:
    """The bwrap executable when it can create the namespaces the sandbox needs, else (None, why)."""
    return _probe(bwrap_binary())


@dataclass(frozen=True)
class SandboxChoice:
    mode: str  # "bwrap" or "none"
    network: str  # "on" or "off"
    executable: str | None
    warning: str | None = None
    #: slirp4netns, when the network is on in a namespace of the sandbox's own; None with network on: the
    #: host's network is shared
    slirp: str | None = None

    @property
    def recorded_mode(self) -> str:
        """The mode as runs record it: ``bwrap+hostnet`` when a network-on sandbox shares the host's network."""
        if self.mode == "bwrap" and self.network == "on" and self.slirp is None:
            return "bwrap+hostnet"
        return self.mode


def choose(mode: str, network: str) -> SandboxChoice:
    """Resolve ``--sandbox`` and ``--network`` into what this machine can do, or a one-line UsageError."""
    if mode not in MODES:
        raise UsageError(f"--sandbox must be one of {', '.join(MODES)}, not {mode!r}")
    if network not in NETWORKS:
        raise UsageError(f"--network must be on or off, not {network!r}")
    if mode == "none":
        if network == "off":
            raise UsageError("--network off needs the bwrap sandbox (--sandbox bwrap or auto)")
        return SandboxChoice("none", network, None, "running the agent without a sandbox (--sandbox none)")
    exe, why = bwrap_available()
    if exe is not None:
        if network == "off":
            return SandboxChoice("bwrap", network, exe)
        slirp, why_not = slirp_available(exe)
        if slirp is not None:
            return SandboxChoice("bwrap", network, exe, slirp=slirp)
        return SandboxChoice("bwrap", network, exe, "the sandboxed agent shares the host's network (services on "
                             f"the host's loopback and its abstract Unix sockets are in its reach): {why_not}; "
                             "recorded as bwrap+hostnet")
    if mode == "bwrap":
        raise UsageError(f"--sandbox bwrap: {why}")
    if network == "off":
        raise UsageError(f"--network off needs the bwrap sandbox, which is not usable: {why}")
    return SandboxChoice("none", network, None, f"no sandbox for the agent: {why}; it can read everything you can")


@dataclass
class SandboxSpec:
    """What the agent sees. Paths are host paths; each appears at the same path inside."""

    workspace: Path
    #: shown read-only even where a hidden directory covers them (model, training data, Python environment)
    read_only: list[Path] = field(default_factory=list)
    #: not there at all: directories become empty, files empty; applied before read_only
    hidden: list[Path] = field(default_factory=list)
    #: hidden again after read_only, whatever covers them (evaluation data inside installed packages, storage)
    always_hidden: list[Path] = field(default_factory=list)
    #: shown read-only last, at their resolved place, over every mask (always_hidden included): what the
    #: benchmark names for the agent (:meth:`autorl.Benchmark.agent_paths`), e.g. a few files of a folder
    #: whose data it hides
    shown: list[Path] = field(default_factory=list)
    network: bool = True
    grader_port: int | None = None
    #: host directory holding the grader's Unix socket (network off)
    socket_dir: Path | None = None
    #: further ports of the host's loopback reached the way the grader is (the LLM gateway), each through
    #: the socket ``relay.socket_name_for(port)`` in ``socket_dir``
    relay_ports: list[int] = field(default_factory=list)
    gpus: bool = True
    #: host directory shown read-write as the agent's /tmp and /var/tmp (created by the caller, mode 0700,
    #: outside the workspace), so that what the agent leaves there can be read after the run (paths under the
    #: host's /tmp bound into the sandbox, e.g. a workspace there, leave empty mount-point directories in it);
    #: None: a private tmpfs that vanishes with the sandbox
    tmp_dir: Path | None = None
    #: with the network on: the slirp4netns executable that gives the sandbox's own network namespace a
    #: route out; "auto": the one that works here, if any; None: the host's network is shared
    slirp: str | None = "auto"


def gpu_devices() -> list[str]:
    """The NVIDIA device nodes present (passed through when the agent has GPUs)."""
    return sorted(set(glob.glob("/dev/nvidia*")) | set(glob.glob("/dev/nvidia-caps/*")))


def python_paths() -> list[Path]:
    """What the agent's Python needs: the interpreter's prefixes and every import path (editable sources too)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, str(Path(sys.executable).parent)}
    roots |= {p for p in sys.path if p and os.path.isdir(p)}
    return sorted(Path(p) for p in roots)


def path_dirs(path_var: str) -> list[Path]:
    """PATH entries and their install prefixes (``.../bin`` -> ``...``), so that linked CLIs find their files."""
    out = []
    for entry in filter(None, path_var.split(os.pathsep)):
        p = Path(entry)
        if p.is_dir():
            out += [p.parent, p] if p.name == "bin" else [p]
    return out


def _inside(path: Path, root: Path) -> bool:
    """``path`` is ``root`` or below it."""
    return path == root or root in path.parents


def _reexposable(path: Path, hidden: Sequence[Path]) -> bool:
    """Strictly below a hidden directory, and holding none: exposing it again uncovers nothing else."""
    return any(h in path.parents for h in hidden) and not any(_inside(h, path) for h in hidden)


def _host_tmpdirs() -> list[Path]:
    """The host's temporary directories other than /tmp (``TMPDIR``, where the grader's work files live)."""
    out = []
    for p in (os.environ.get("TMPDIR"), tempfile.gettempdir()):
        if p and os.path.isabs(p):
            out.append(Path(os.path.realpath(p)))
    covered = (Path("/tmp"), Path("/var/tmp"))  # masked whatever they hold
    return [p for p in out if p != Path("/") and not any(_inside(p, c) for c in covered)]


def _runtime_dirs() -> list[Path]:
    """``/run`` and ``/var/run`` as directories to mask (a link to one masked already is covered by it)."""
    return list(dict.fromkeys(Path(os.path.realpath(p)) for p in RUNTIME_DIRS if p.is_dir()))


def _mask(path: Path, tmp_dir: Path | None = None) -> list[str]:
    if tmp_dir is not None and path in (Path("/tmp"), Path("/var/tmp")):
        return ["--bind", str(tmp_dir), str(path)]
    if path.is_dir():
        return ["--tmpfs", str(path)]
    if path.exists():
        return ["--ro-bind", "/dev/null", str(path)]
    return []


def bwrap_argv(spec: SandboxSpec, argv: Sequence[str], *, executable: str, environ_path: str = "") -> list[str]:
    """The bubblewrap command that runs ``argv`` as ``spec`` says."""
    ws = spec.workspace.resolve()
    slirp = spec.slirp
    harden = True
    if spec.network and slirp == "auto":
        slirp = slirp_available(executable)[0]
        harden = slirp_hardened(executable)
    own_net = not spec.network or slirp is not None
    args = [executable, "--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/dev/shm", "--proc", "/proc",
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
            "--hostname", "autorl-agent", "--setenv", "TMPDIR", "/tmp"]
    if own_net:
        args.append("--unshare-net")
    # a private /tmp, /run and host TMPDIR; the hidden directories, parents first
    hidden = [p for p in dict.fromkeys([Path("/tmp"), Path("/var/tmp"), *_runtime_dirs(), *_host_tmpdirs(),
                                        *spec.hidden])
              if p.exists() and p != Path("/")]
    hidden.sort(key=lambda p: len(p.parts))
    tmp_dir = spec.tmp_dir.resolve() if spec.tmp_dir is not None else None
    if tmp_dir is not None and (not tmp_dir.is_dir() or _inside(tmp_dir, ws) or _inside(ws, tmp_dir)):
        raise ValueError(f"the sandbox's tmp_dir must be an existing directory outside the workspace: {tmp_dir}")
    for p in hidden:
        args += _mask(p, tmp_dir)
    # re-expose, read-only, what lies under a hidden directory: Python, CLIs on PATH, the model and data;
    # each at its resolved place and at the path as given (symlinks keep working)
    binds: dict[Path, Path] = {}
    for p in [*python_paths(), *path_dirs(environ_path), *spec.read_only]:
        if not p.exists():
            continue
        real = p.resolve()
        for target in (real, p):
            if target not in binds and _reexposable(target, hidden) and not _inside(ws, target):
                binds[target] = real
    for target, source in sorted(binds.items(), key=lambda kv: len(kv[0].parts)):
        args += ["--ro-bind", str(source), str(target)]
    args += ["--bind", str(ws), str(ws)]
    if ws != spec.workspace:
        args += ["--bind", str(ws), str(spec.workspace)]
    # mask again what is visible after all that; what is already absent stays absent (no mount point
    # appears that would give its name away)
    shown = [*binds, ws, spec.workspace]
    masked: list[Path] = []
    for p in sorted(dict.fromkeys(spec.always_hidden), key=lambda p: len(p.parts)):
        visible = not any(_inside(p, h) for h in [*hidden, *masked]) or any(_inside(p, t) for t in shown)
        if p.exists() and visible and not _inside(ws, p) and not _inside(p, ws):
            args += _mask(p)
            masked.append(p)
    for real in dict.fromkeys(p.resolve() for p in spec.shown if p.exists()):
        if not _inside(real, ws) and not _inside(ws, real):
            args += ["--ro-bind", str(real), str(real)]
    if spec.gpus:
        for dev in gpu_devices():
            args += ["--dev-bind-try", dev, dev]
    inner = list(argv)
    outer: list[str] = []
    resolv = Path(os.path.realpath("/etc/resolv.conf"))
    resolv_masked = any(_inside(resolv, h) for h in hidden)
    if own_net:
        socket_dir = spec.socket_dir
        if spec.network:  # the launcher creates the directory, the relay and the route out
            assert slirp is not None
            socket_dir = new_socket_dir()
            outer = [sys.executable, "-c", NETNS_MAIN, "--slirp", slirp, "--socket-dir",
                     str(socket_dir), *(["--port", str(spec.grader_port)] if spec.grader_port is not None else []),
                     *[a for p in spec.relay_ports for a in ("--also-port", str(p))],
                     *([] if harden else ["--no-harden"]), "--"]
            if resolv.exists() or resolv_masked:
                args += ["--ro-bind", str(socket_dir / RESOLV_NAME), str(resolv)]
        elif socket_dir is None or spec.grader_port is None:
            raise ValueError("network off needs the grader's socket directory and port")
        args += ["--ro-bind", str(socket_dir), INNER_SOCKET_DIR]  # a socket connects on a read-only mount
        if spec.grader_port is not None:  # without a grader (checks of the sandbox itself) nothing to relay
            also = [a for p in spec.relay_ports for a in ("--also", f"{p}={INNER_SOCKET_DIR}/{socket_name_for(p)}")]
            inner = [sys.executable, "-c", RELAY_MAIN, "--port", str(spec.grader_port),
                     "--socket", f"{INNER_SOCKET_DIR}/{SOCKET_NAME}", *also, "--", *inner]
    elif resolv_masked and resolv.is_file():  # the host's network: its resolver file stays readable
        args += ["--ro-bind", str(resolv), str(resolv)]
    args += ["--chdir", str(spec.workspace), "--", *inner]
    return [*outer, *args]
