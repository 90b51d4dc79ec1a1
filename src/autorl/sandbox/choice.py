"""The choice of sandbox: what ``--sandbox`` and ``--network`` resolve to on this machine, and whether bubblewrap
can create the namespaces a sandbox needs here."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass

from autorl.errors import UsageError
from autorl.sandbox.netns import probe_argv, slirp_available

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
        return SandboxChoice(
            "bwrap",
            network,
            exe,
            "the sandboxed agent shares the host's network (services on "
            f"the host's loopback and its abstract Unix sockets are in its reach): {why_not}; "
            "recorded as bwrap+hostnet",
        )
    if mode == "bwrap":
        raise UsageError(f"--sandbox bwrap: {why}")
    if network == "off":
        raise UsageError(f"--network off needs the bwrap sandbox, which is not usable: {why}")
    return SandboxChoice("none", network, None, f"no sandbox for the agent: {why}; it can read everything you can")
