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

The helper that holds bubblewrap, attaches slirp4netns and relays the grader's socket runs as one process; how
slirp4netns is attached to the held sandbox is :mod:`autorl.sandbox.slirp`.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from autorl.procs import wrapper
from autorl.sandbox.relay import SOCKET_NAME, UnixToTcp, socket_name_for
from autorl.sandbox.slirp import Attached, attach

#: slirp4netns's fixed addresses in its default 10.0.2.0/24 network
DNS_ADDRESS = "10.0.2.3"
GATEWAY_ADDRESS = "10.0.2.2"
RESOLV_NAME = "resolv.conf"
#: What ``python -c`` runs for the launcher (``-m autorl.sandbox.netns`` would warn on stderr, which is the agent's
#: log, that the package imported the module first)
NETNS_MAIN = "import sys; from autorl.sandbox.netns import main; sys.exit(main())"


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
        attached = Attached(exe, probe_argv(bwrap), harden=harden, quiet=True)
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
    """Whether slirp4netns runs sandboxed and seccomp-filtered here (see :data:`autorl.sandbox.slirp.HARDENING`)."""
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
            attached = attach(args.slirp, command, harden=not args.no_harden)
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
