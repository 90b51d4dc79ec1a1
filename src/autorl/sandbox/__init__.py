"""Isolation of untrusted processes: one policy per kind, one launcher, and the choice of sandbox.

What an untrusted process cannot see it cannot use. Each kind has a policy module that describes everything it
may see (:class:`~autorl.sandbox.policy.Policy`): the agent (:mod:`autorl.sandbox.agent`), third-party scorer
code such as a smith folder's ``eval.py`` (:mod:`autorl.sandbox.scorer`) and model-generated programs
(:mod:`autorl.sandbox.program`). One launcher (:mod:`autorl.sandbox.launcher`) turns a policy into the bubblewrap
command line, or, with the sandbox off, into the command with the policy's environment only. The trust model
(docs/sandbox.md) is rendered from the kinds (:func:`~autorl.sandbox.policy.trust_table`).

Under bubblewrap the agent gets the system and the Python environment read-only, its workspace read-write, the
base model and the training data read-only, a private /tmp (or a per-run host directory, which ``TMPDIR`` then
names) and an empty private ``$HOME``; everything that holds evaluation data is not there at all: the grader's
storage, ``AUTORL_HOME``, the Hugging Face cache, the installed files that benchmark plugins declare as holding
test data, the host's ``TMPDIR`` and the host's sockets and runtime state (``/run``, ``/dev/shm``). It runs in
new pid, ipc and uts namespaces and dies with the orchestrator.

It always gets a network namespace of its own, so that the host's abstract Unix sockets and whatever listens
on the host's loopback are out of reach. With the network off it has only loopback; with it on,
slirp4netns gives it a route out with the host's loopback refused and a DNS forwarder (see
:mod:`autorl.sandbox.netns`). Either way the grader is reached through a Unix socket bound into the sandbox
and relayed to ``127.0.0.1:<port>`` inside it (:mod:`autorl.sandbox.relay`), so ``GRADING_SERVER_URL`` stays
the same. Where slirp4netns cannot run, network on falls back to the host's network with a warning, and the run
records its sandbox mode as ``bwrap+hostnet``.

``AUTORL_BWRAP`` names the bubblewrap executable (default ``bwrap`` on PATH); ``AUTORL_SANDBOX_RO`` lists
further host paths (``os.pathsep``-separated) the agent may read, e.g. a shared dataset directory.
Evaluation data stays hidden even when one of them holds it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass

from autorl.errors import UsageError
from autorl.sandbox.host import (
    RUNTIME_DIRS,
    extra_hidden,
    extra_read_only,
    gpu_devices,
    hf_cache_dirs,
    model_bind_paths,
    python_paths,
)
from autorl.sandbox.launcher import INNER_SOCKET_DIR, Launch, bwrap_argv, launch
from autorl.sandbox.netns import probe_argv, slirp_available
from autorl.sandbox.policy import Binding, Kind, Policy, Relay, Rule, trust_table
from autorl.sandbox.relay import SOCKET_NAME

__all__ = [
    "INNER_SOCKET_DIR",
    "MODES",
    "NETWORKS",
    "RUNTIME_DIRS",
    "SOCKET_NAME",
    "Binding",
    "Kind",
    "Launch",
    "Policy",
    "Relay",
    "Rule",
    "SandboxChoice",
    "bwrap_argv",
    "bwrap_available",
    "bwrap_binary",
    "choose",
    "extra_hidden",
    "extra_read_only",
    "gpu_devices",
    "hf_cache_dirs",
    "launch",
    "model_bind_paths",
    "python_paths",
    "trust_table",
]

MODES = ("auto", "bwrap", "none")
NETWORKS = ("on", "off")


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
