"""The one launcher: a :class:`~autorl.sandbox.policy.Policy` and a command become the bubblewrap command line
that runs it under that policy, or, with the sandbox off (``--sandbox none``), the command itself with the
policy's environment and nothing else of the caller's (:func:`launch`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autorl.sandbox.host import SYSTEM_DIRS, gpu_devices, inside, runtime_dirs
from autorl.sandbox.netns import NETNS_MAIN, RESOLV_NAME, new_socket_dir, slirp_available, slirp_hardened
from autorl.sandbox.policy import (
    HOST_VIEW,
    MASKED,
    MASKED_AGAIN,
    NETWORK_HOST,
    NETWORK_ON,
    READ_ONLY,
    READ_WRITE,
    SHOWN_LAST,
    Policy,
)
from autorl.sandbox.relay import RELAY_MAIN, SOCKET_NAME, socket_name_for

#: Where the grader's socket appears inside the sandbox (on its private /run).
INNER_SOCKET_DIR = "/run/autorl-grader"
_TMP = (Path("/tmp"), Path("/var/tmp"))


@dataclass(frozen=True)
class Launch:
    """What to run: the command line, its whole environment and its working folder."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path


def launch(policy: Policy, argv: Sequence[str], *, mode: str, executable: str | None = None) -> Launch:
    """``argv`` under ``policy``: inside bubblewrap (``mode`` ``bwrap``, ``executable`` its path), or as it is
    (``none``); either way with the policy's environment only."""
    if mode == "bwrap":
        if executable is None:
            raise ValueError("the bwrap sandbox needs its executable")
        return Launch(bwrap_argv(policy, argv, executable=executable), dict(policy.env), policy.cwd)
    if mode != "none":
        raise ValueError(f"unknown sandbox mode {mode!r}")
    return Launch(list(argv), dict(policy.env), policy.cwd)


def _strictly_under(path: Path, roots: Sequence[Path]) -> bool:
    return any(r in path.parents for r in roots)


def _holds(path: Path, roots: Sequence[Path]) -> bool:
    return any(inside(r, path) for r in roots)


def _mask(path: Path, tmp: Path | None) -> list[str]:
    if tmp is not None and path in _TMP:
        return ["--bind", str(tmp), str(path)]
    if path.is_dir():
        return ["--tmpfs", str(path)]
    if path.exists():
        return ["--ro-bind", "/dev/null", str(path)]
    return []


def _base(policy: Policy, executable: str) -> tuple[list[str], list[Path]]:
    """The command's start and the folders in view before any rule: the whole host, or the system's folders."""
    args = [executable]
    if policy.view == HOST_VIEW:
        args += ["--ro-bind", "/", "/"]
        view = [Path("/")]
    else:
        view = []
        for d in SYSTEM_DIRS:
            if d.is_symlink():
                args += ["--symlink", os.readlink(d), str(d)]
            elif d.is_dir():
                args += ["--ro-bind", str(d), str(d)]
                view.append(d)
    args += ["--dev", "/dev", "--tmpfs", "/dev/shm", "--proc", "/proc"]
    if policy.own_pids:
        args.append("--unshare-pid")
    args += [
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--hostname",
        policy.hostname,
    ]
    tmpdir = policy.env.get("TMPDIR")
    if not tmpdir or not any(inside(Path(tmpdir), w) for w in policy.paths(READ_WRITE)):
        args += ["--setenv", "TMPDIR", "/tmp"]  # the host's is not there: the private one
    if policy.new_session:
        args.append("--new-session")
    return args, view


def bwrap_argv(policy: Policy, argv: Sequence[str], *, executable: str) -> list[str]:
    """The bubblewrap command that runs ``argv`` as ``policy`` says."""
    args, view = _base(policy, executable)
    slirp, harden = policy.slirp, True
    if policy.network == NETWORK_ON and slirp == "auto":
        slirp = slirp_available(executable)[0]
        harden = slirp_hardened(executable)
    own_net = policy.network != NETWORK_HOST and (policy.network != NETWORK_ON or slirp is not None)
    if own_net:
        args.append("--unshare-net")
    writable = [p.resolve() for p in policy.paths(READ_WRITE)]
    tmp = policy.tmp.resolve() if policy.tmp is not None else None
    if tmp is not None and (not tmp.is_dir() or any(inside(tmp, w) or inside(w, tmp) for w in writable)):
        raise ValueError(f"the sandbox's tmp folder must be an existing folder outside what it writes: {tmp}")
    # the masks, parents first; in the system's view only what lies in it needs one. /tmp and /run are private
    # whatever the policy says: the sandbox's own /tmp, and the place of the grader's socket
    masks = [p for p in dict.fromkeys([*_TMP, *runtime_dirs(), *policy.paths(MASKED)]) if p.exists() and p != Path("/")]
    masks.sort(key=lambda p: len(p.parts))
    for p in masks:
        if policy.view == HOST_VIEW or _strictly_under(p, view) or p in _TMP or p in runtime_dirs():
            args += _mask(p, tmp)
    for w in writable:
        if _holds(w, masks):
            raise ValueError(f"the sandbox cannot show {w} writable: it holds a masked folder")
    # shown again, read-only: each at its resolved place and at the path as given (links keep working); never
    # a path that is or holds a masked folder, never one that holds what the process writes
    binds: dict[Path, Path] = {}
    for p in policy.paths(READ_ONLY):
        if not p.exists():
            continue
        real = p.resolve()
        for target in (real, p):
            if target in binds or _holds(target, masks) or any(inside(w, target) for w in writable):
                continue
            if policy.view == HOST_VIEW and not _strictly_under(target, masks):
                continue  # in plain view already
            if policy.view != HOST_VIEW and _strictly_under(target, view) and not _strictly_under(target, masks):
                continue
            binds[target] = real
    ordered = sorted(binds.items(), key=lambda kv: len(kv[0].parts))
    for k, (target, source) in enumerate(ordered):
        if target == source and any(t == s and inside(target, t) for t, s in ordered[:k]):
            continue  # shown already, at its own place, with the folder that holds it
        args += ["--ro-bind", str(source), str(target)]
    for given in policy.paths(READ_WRITE):
        real = given.resolve()
        args += ["--bind", str(real), str(real)]
        if real != given:
            args += ["--bind", str(real), str(given)]
    # masked again, whatever showed them; what is absent already stays absent (no mount point appears that would
    # give its name away)
    shown = [*binds, *writable, *policy.paths(READ_WRITE)]
    done: list[Path] = []
    for p in sorted(dict.fromkeys(policy.paths(MASKED_AGAIN)), key=lambda p: len(p.parts)):
        absent = (policy.view == HOST_VIEW and any(inside(p, h) for h in [*masks, *done])) or (
            policy.view != HOST_VIEW and not any(inside(p, v) for v in view)
        )
        visible = not absent or any(inside(p, t) for t in shown)
        if p.exists() and visible and not any(inside(w, p) or inside(p, w) for w in writable):
            args += _mask(p, None)
            done.append(p)
    for real in dict.fromkeys(p.resolve() for p in policy.paths(SHOWN_LAST) if p.exists()):
        if _holds(real, masks):  # the policy's builder refuses such a path first, in words
            raise ValueError(f"the sandbox cannot show {real}: it holds a masked folder")
        if not any(inside(real, w) or inside(w, real) for w in writable):
            args += ["--ro-bind", str(real), str(real)]
    if policy.gpus:
        for dev in gpu_devices():
            args += ["--dev-bind-try", dev, dev]
    return _network(policy, args, argv, masks, own_net=own_net, slirp=slirp, harden=harden)


def _network(
    policy: Policy,
    args: list[str],
    argv: Sequence[str],
    masks: Sequence[Path],
    *,
    own_net: bool,
    slirp: str | None,
    harden: bool,
) -> list[str]:
    """The network's part: the launcher outside (network on), the grader's socket and relay inside."""
    inner, outer = list(argv), []
    relay = policy.relay
    resolv = Path(os.path.realpath("/etc/resolv.conf"))
    resolv_masked = any(inside(resolv, h) for h in masks)
    if own_net:
        socket_dir = relay.socket_dir
        if policy.network == NETWORK_ON:  # the launcher creates the folder, the relay and the route out
            assert slirp is not None
            socket_dir = new_socket_dir()
            outer = [
                sys.executable,
                "-c",
                NETNS_MAIN,
                "--slirp",
                slirp,
                "--socket-dir",
                str(socket_dir),
                *(["--port", str(relay.port)] if relay.port is not None else []),
                *[a for p in relay.also for a in ("--also-port", str(p))],
                *([] if harden else ["--no-harden"]),
                "--",
            ]
            if resolv.exists() or resolv_masked:
                args += ["--ro-bind", str(socket_dir / RESOLV_NAME), str(resolv)]
        elif relay.port is not None and socket_dir is None:
            raise ValueError("network off with a grader needs the grader's socket folder")
        if socket_dir is not None:
            args += ["--ro-bind", str(socket_dir), INNER_SOCKET_DIR]  # a socket connects on a read-only mount
        if relay.port is not None:
            also = [a for p in relay.also for a in ("--also", f"{p}={INNER_SOCKET_DIR}/{socket_name_for(p)}")]
            inner = [
                sys.executable,
                "-c",
                RELAY_MAIN,
                "--port",
                str(relay.port),
                "--socket",
                f"{INNER_SOCKET_DIR}/{SOCKET_NAME}",
                *also,
                "--",
                *inner,
            ]
    elif resolv_masked and resolv.is_file():  # the host's network: its resolver file stays readable
        args += ["--ro-bind", str(resolv), str(resolv)]
    args += ["--chdir", str(policy.cwd), "--", *inner]
    return [*outer, *args]
