"""slirp4netns attached to a sandbox's network namespace: bubblewrap started held before it runs anything
(``--block-fd``), its namespace's pid read from ``--info-fd``, slirp4netns joined to the user namespace that owns
that network namespace and waited for until it has configured it, then bubblewrap let go. A try that fails before
the release leaves nothing run, so it is tried again (the last time without slirp4netns's own sandbox). The process
that does this, and what it relays, is :mod:`autorl.sandbox.netns`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

_READY_TIMEOUT_S = 30.0
_NS_GET_USERNS = 0xB701  # ioctl: the user namespace that owns a namespace
#: slirp4netns parses the agent's packets outside the sandbox: where it can, it runs in an empty mount
#: namespace of its own, its capabilities dropped, its system calls filtered (without them where they fail)
HARDENING = ("--enable-sandbox", "--enable-seccomp")


def _read_child_pid(fd: int, timeout: float) -> int | None:
    """bwrap's ``--info-fd`` JSON: the sandbox's pid (in our namespace), or None when bwrap failed first."""
    data = b""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        with contextlib.suppress(ValueError):
            pid = json.loads(data).get("child-pid")
            return pid if isinstance(pid, int) else None
    return None


def _wait_loopback(pid: int, timeout: float) -> bool:
    """bubblewrap brings the new namespace's loopback up after it reports the pid; slirp4netns configuring
    the namespace at the same time makes that fail, so wait until 127.0.0.1 is routed there."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if "127.0.0.1" in Path(f"/proc/{pid}/net/fib_trie").read_text():
                return True
        except OSError:
            return False  # bwrap is gone
        time.sleep(0.005)
    return False


def _owning_userns(pid: int) -> int | None:
    """A descriptor of the user namespace that owns ``pid``'s network namespace, where it is not ours.

    Unprivileged bubblewrap nests a second user namespace inside the one that owns the network namespace (to
    map the uid back after mounting devpts), so the pid's own user namespace is not the one to join."""
    try:
        net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        owner = fcntl.ioctl(net, _NS_GET_USERNS)
    except OSError:
        return None
    finally:
        os.close(net)
    if os.fstat(owner).st_ino == os.stat("/proc/self/ns/user").st_ino:
        os.close(owner)
        return None
    return owner


def _wait_readable(fd: int, timeout: float) -> bool:
    ready, _, _ = select.select([fd], [], [], timeout)
    return bool(ready) and os.read(fd, 1) == b"1"


class Attached:
    """bubblewrap started held, slirp4netns attached to its network namespace; ``release`` lets it run."""

    def __init__(self, slirp: str, bwrap_argv: Sequence[str], *, harden: bool = True, quiet: bool = False) -> None:
        info_r, info_w = os.pipe()
        block_r, self._block_w = os.pipe()
        argv = [bwrap_argv[0], "--info-fd", str(info_w), "--block-fd", str(block_r), *bwrap_argv[1:]]
        self.slirp: subprocess.Popen[bytes] | None = None
        self._slirp_log: IO[bytes] | None = None
        self._exit_w: int | None = None
        try:
            self.bwrap = subprocess.Popen(
                argv, pass_fds=(info_w, block_r), stderr=subprocess.DEVNULL if quiet else None
            )
        finally:
            os.close(info_w)
            os.close(block_r)
        try:
            pid = _read_child_pid(info_r, _READY_TIMEOUT_S)
        finally:
            os.close(info_r)
        if pid is None:
            self.error = "bubblewrap did not start"
            return
        if not _wait_loopback(pid, _READY_TIMEOUT_S):
            self.error = "bubblewrap did not set up the network namespace"
            return
        ready_r, ready_w = os.pipe()
        exit_r, self._exit_w = os.pipe()
        argv = [
            slirp,
            "--configure",
            "--mtu=65520",
            "--disable-host-loopback",
            *(HARDENING if harden else ()),
            "--ready-fd",
            str(ready_w),
            "--exit-fd",
            str(exit_r),
        ]
        owner = _owning_userns(pid)
        if owner is not None:
            argv.append(f"--userns-path=/proc/self/fd/{owner}")
        # slirp4netns's own words ("do_slirp is exiting") are not the agent's: they stay out of its log, and
        # their tail joins the error where it fails to configure the network
        self._slirp_log = log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        try:
            self.slirp = subprocess.Popen(
                [*argv, str(pid), "tap0"],
                pass_fds=(ready_w, exit_r, *([owner] if owner is not None else [])),
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        except OSError as exc:
            self.error = f"{slirp} cannot start: {exc}"
            return
        finally:
            os.close(ready_w)
            os.close(exit_r)
            if owner is not None:
                os.close(owner)
        try:
            ok = _wait_readable(ready_r, _READY_TIMEOUT_S)
        finally:
            os.close(ready_r)
        if not ok:
            log.seek(0)
            said = log.read()[-2000:].decode("utf-8", "replace").strip().splitlines()
            self.error = f"{slirp} did not configure the network" + (f" ({said[-1]})" if said else "")
            return
        self.error = ""

    def release(self) -> None:
        """Let bubblewrap run the command; it exits with an error of its own if it failed meanwhile."""
        with contextlib.suppress(BrokenPipeError):
            os.write(self._block_w, b"go")
        os.close(self._block_w)
        self._block_w = -1

    def close(self) -> None:
        if self._block_w >= 0:  # never released: bwrap must not go on without its network
            self.bwrap.kill()
            os.close(self._block_w)
            self._block_w = -1
        self.bwrap.wait()
        if self._exit_w is not None:
            os.close(self._exit_w)  # slirp4netns exits when this closes
            self._exit_w = None
        if self.slirp is not None:
            try:
                self.slirp.wait(10)
            except subprocess.TimeoutExpired:
                self.slirp.kill()
                self.slirp.wait()
        if self._slirp_log is not None:
            self._slirp_log.close()


def attach(slirp: str, bwrap_argv: Sequence[str], *, harden: bool, quiet: bool = False) -> Attached:
    """:class:`Attached`, tried again (bubblewrap held, so nothing ran yet) where setting up the network
    failed; the last try without slirp4netns's own sandbox, which can fail where the rest works."""
    tries = [harden, harden, False]
    for k, hardened in enumerate(tries):
        attached = Attached(slirp, bwrap_argv, harden=hardened, quiet=quiet)
        if not attached.error or k == len(tries) - 1:
            return attached
        attached.close()
        if not quiet:
            print(f"autorl: the sandbox's network: {attached.error}; trying again", file=sys.stderr)
    raise AssertionError("unreachable")
