"""The agent's network with ``--network on``: a network namespace of its own with a user-mode route out.

Sharing the host's network namespace would leave the host's abstract Unix sockets (D-Bus, X11, container
runtimes) and every service listening on the host's loopback in the agent's reach. Instead the sandbox gets
its own namespace, and `slirp4netns <https://github.com/rootless-containers/slirp4netns>`_ gives it a route
out through the host's network stack with the host's loopback refused (``--disable-host-loopback``) and a
DNS forwarder at ``10.0.2.3`` (the sandbox's ``/etc/resolv.conf``). The grader is reached as with the
network off, through the Unix-socket relay, at the same ``GRADING_SERVER_URL``.

``python -m autorl.sandbox.netns --slirp EXE --socket-dir D [--port P] -- BWRAP ARGV...`` runs outside the
sandbox: it creates ``D`` (0700) with the grader's socket and the resolver file, starts bubblewrap held before
it runs anything (``--block-fd``), attaches slirp4netns to its network namespace, lets it go, and exits as it
does. ``AUTORL_SLIRP4NETNS`` names the slirp4netns executable (default ``slirp4netns`` on PATH; ``none``
turns the namespace off, the host's network then stays shared).

A little over 300 lines: the helper that holds bubblewrap, attaches slirp4netns and relays the grader's
socket runs as one process, so its parts live in one module.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from autorl.procs import wrapper
from autorl.sandbox.relay import SOCKET_NAME, UnixToTcp, socket_name_for

#: slirp4netns's fixed addresses in its default 10.0.2.0/24 network
DNS_ADDRESS = "10.0.2.3"
GATEWAY_ADDRESS = "10.0.2.2"
RESOLV_NAME = "resolv.conf"
#: What ``python -c`` runs for the launcher (``-m autorl.sandbox.netns`` would warn on stderr, which is the agent's
#: log, that the package imported the module first)
NETNS_MAIN = "import sys; from autorl.sandbox.netns import main; sys.exit(main())"
_READY_TIMEOUT_S = 30.0
_NS_GET_USERNS = 0xB701  # ioctl: the user namespace that owns a namespace
#: slirp4netns parses the agent's packets outside the sandbox: where it can, it runs in an empty mount
#: namespace of its own, its capabilities dropped, its system calls filtered (without them where they fail)
HARDENING = ("--enable-sandbox", "--enable-seccomp")


def probe_argv(bwrap: str) -> list[str]:
    """The smallest bubblewrap command with the namespaces a sandbox needs (its own pid and network ones): what
    tells whether bubblewrap, and slirp4netns on its network namespace, work here."""
    return [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
        "true",
    ]


def slirp_binary() -> str:
    return os.environ.get("AUTORL_SLIRP4NETNS", "slirp4netns")


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


class _Attached:
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


def _attach(slirp: str, bwrap_argv: Sequence[str], *, harden: bool, quiet: bool = False) -> _Attached:
    """:class:`_Attached`, tried again (bubblewrap held, so nothing ran yet) where setting up the network
    failed; the last try without slirp4netns's own sandbox, which can fail where the rest works."""
    tries = [harden, harden, False]
    for k, hardened in enumerate(tries):
        attached = _Attached(slirp, bwrap_argv, harden=hardened, quiet=quiet)
        if not attached.error or k == len(tries) - 1:
            return attached
        attached.close()
        if not quiet:
            print(f"autorl: the sandbox's network: {attached.error}; trying again", file=sys.stderr)
    raise AssertionError("unreachable")


@functools.cache
def _probe(bwrap: str, slirp: str) -> tuple[str | None, str, bool]:
    """(slirp4netns, "ok", hardened) where it configures a bubblewrap network namespace here, else (None, why, _)."""
    exe, why = _try(bwrap, slirp, harden=True)
    if exe is not None:
        return exe, why, True
    exe, why = _try(bwrap, slirp, harden=False)
    return exe, why, False


def _try(bwrap: str, slirp: str, *, harden: bool) -> tuple[str | None, str]:
    if slirp in ("", "none"):
        return None, "a network namespace is turned off (AUTORL_SLIRP4NETNS=none)"
    exe = shutil.which(slirp)
    if exe is None:
        return None, f"{slirp} not found (install it: apt install slirp4netns / dnf install slirp4netns)"
    try:
        attached = _Attached(exe, probe_argv(bwrap), harden=harden, quiet=True)
    except OSError as exc:
        return None, f"{slirp} cannot run: {exc}"
    try:
        if attached.error:
            return None, f"{attached.error} here"
        attached.release()
    finally:
        attached.close()
    if attached.bwrap.returncode != 0:
        return None, f"bubblewrap with a network namespace exited with status {attached.bwrap.returncode}"
    return exe, "ok"


def slirp_available(bwrap: str) -> tuple[str | None, str]:
    """The slirp4netns executable when it gives a bubblewrap sandbox a network here, else (None, why)."""
    exe, why, _ = _probe(bwrap, slirp_binary())
    return exe, why


def slirp_hardened(bwrap: str) -> bool:
    """Whether slirp4netns runs sandboxed and seccomp-filtered here (see :data:`HARDENING`)."""
    return _probe(bwrap, slirp_binary())[2]


def new_socket_dir() -> Path:
    """A fresh path (not yet created) for the grader's socket and the resolver file of one sandbox."""
    return Path(tempfile.gettempdir()) / f"autorl-net-{os.urandom(8).hex()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autorl.sandbox.netns")
    parser.add_argument("--slirp", required=True)
    parser.add_argument("--port", type=int, help="the grader's port on the host's loopback (none: no grader)")
    parser.add_argument("--socket-dir", type=Path, required=True)
    parser.add_argument("--no-harden", action="store_true", help="run slirp4netns without its own sandbox")
    parser.add_argument(
        "--also-port",
        type=int,
        action="append",
        default=[],
        help="a further port of the host's loopback relayed like the grader's (the LLM gateway's)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = wrapper.command_after(parser, args.command, "the bubblewrap command")
    sock_dir: Path = args.socket_dir
    try:
        sock_dir.mkdir(mode=0o700)
        fd = os.open(sock_dir / RESOLV_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"nameserver {DNS_ADDRESS}\n")
        os.chmod(sock_dir, 0o755)  # the sandbox's user (root in its namespace) reads it
    except OSError as exc:
        print(f"autorl: cannot create the sandbox's network directory {sock_dir}: {exc}", file=sys.stderr)
        return 125
    relay = UnixToTcp(sock_dir / SOCKET_NAME, args.port) if args.port is not None else None
    # the relay and the route out outlive a SIGTERM to the process group so that the agent can still submit
    # in its grace period; SIGKILL ends them with the rest (bwrap dies with us, slirp4netns with its exit fd)
    # (a handler, not SIG_IGN, which bubblewrap would inherit)
    signal.signal(signal.SIGTERM, lambda *_: None)
    also = [UnixToTcp(sock_dir / socket_name_for(p), p) for p in args.also_port]
    try:
        if relay is not None:
            relay.start()
        for extra in also:
            extra.start()
        try:
            attached = _attach(args.slirp, command, harden=not args.no_harden)
        except OSError as exc:
            print(f"autorl: cannot start the sandbox: {exc}", file=sys.stderr)
            return 125
        try:
            if attached.error:
                print(f"autorl: the sandbox's network: {attached.error}", file=sys.stderr)
                return 125
            attached.release()
        finally:
            attached.close()
        code = attached.bwrap.returncode
    finally:
        if relay is not None:
            relay.stop()
        for extra in also:
            extra.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)
    return wrapper.end_as(code)  # die the way the sandbox died, so that the run records it


if __name__ == "__main__":
    sys.exit(main())
