"""Canary secrets where operators keep theirs, in the scratch home of ``autorl selftest``, and the probes derived
from the policy of the run it builds.

The run gets a home of its own shaped like an operator's: a tool in ``~/.local/bin`` on its ``PATH`` (so that a
folder of the home is on ``PATH``, as pipx, ``pip --user`` and ``npm -g`` put it), canary values in
``~/.config``, ``~/.local/share``, ``~/.netrc``, ``~/.ssh``, ``~/.aws``, ``~/.cargo``, and canaries in the
environment (a credential variable, a key-named variable of the operator's, and a plain one). The probes are
what the agent's policy shows under the home and autorl's storage (every folder between a masked folder and a
path shown inside it), the files the benchmark shows, and the canaries; the verdicts compare what the red team
got with the policy the run recorded (:func:`leaked_names`).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.selftest.observed import HomeSeen, ScorerCodeSeen
from autorl.selftest.scorer_code import probe_scorer_code

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark

#: where operators keep their keys, relative to the home
FILES = (
    ".config/autorl-selftest/token",
    ".local/share/autorl-selftest/auth.json",
    ".netrc",
    ".ssh/id_rsa",
    ".aws/credentials",
    ".cargo/credentials.toml",
)
#: the environment's canaries: a credential variable, a key-named variable of the operator's, a plain variable
VARIABLES = ("AWS_SECRET_ACCESS_KEY", "SELFTEST_SERVICE_TOKEN", "SELFTEST_OPERATOR_NOTE")
#: the tool on the run's PATH, in the home
TOOL = ".local/bin/autorl-selftest-tool"


@dataclass(frozen=True)
class Canaries:
    """The scratch home, the canary in each of its key files, the environment's canaries and the run's ``PATH``."""

    home: Path
    files: dict[str, str]
    env: dict[str, str]
    path: str

    def values(self) -> list[str]:
        return [*self.files.values(), *self.env.values()]

    def found_in(self, text: str) -> list[str]:
        """Where each canary ``text`` holds was planted (a file or a variable)."""
        where = {**self.files, **{f"${k}": v for k, v in self.env.items()}}
        return [place for place, value in where.items() if value in text]


def plant(home: Path, path: str) -> Canaries:
    """A scratch home at ``home`` with :data:`FILES` and :data:`TOOL`, and the canaries; ``path`` is the operator's
    ``PATH``, the tool's folder goes first."""
    files = {}
    for rel in FILES:
        value = f"autorl-canary-{secrets.token_hex(12)}"
        target = home / rel
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        target.write_text(f"{rel}: {value}\n")
        files[str(target)] = value
    tool = home / TOOL
    tool.parent.mkdir(parents=True, exist_ok=True)
    tool.write_text("#!/bin/sh\necho autorl selftest tool\n")
    tool.chmod(0o755)
    env = {name: f"autorl-canary-{secrets.token_hex(12)}" for name in VARIABLES}
    return Canaries(home, files, env, os.pathsep.join([str(tool.parent), path]))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def probe_folders(roots: Sequence[Path], shown: Iterable[Path]) -> list[str]:
    """The folders to list: each root (the home, autorl's storage) and every folder between it and a path the
    policy shows inside it (where a parent shown to reach a child would show its siblings)."""
    out: dict[str, None] = {str(r): None for r in roots}
    for path in shown:
        for root in roots:
            if root in path.parents:
                for parent in reversed(path.parents):
                    if _inside(parent, root) and parent != path:
                        out.setdefault(str(parent))
    return list(out)


def leaked_names(listed: Mapping[str, Any], policy: Mapping[str, Any]) -> list[str]:
    """``dir/name`` for each name the red team listed that the recorded policy neither shows nor leads to: what a
    parent shown to reach a child gives away. ``policy`` is the run's ``policy.json``."""
    paths: list[Path] = []
    for entry in policy.get("files", []) if isinstance(policy.get("files"), list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            p = Path(entry["path"])
            paths += [p, Path(os.path.realpath(p))]
    for key in ("tmp", "cwd"):
        if isinstance(policy.get(key), str):
            paths.append(Path(policy[key]))
    out = []
    for folder, names in listed.items():
        if not isinstance(names, list):
            continue
        d = Path(str(folder))
        allowed = {p.relative_to(d).parts[0] for p in paths if d in p.parents}
        out += [f"{d}/{n}" for n in names if isinstance(n, str) and n not in allowed]
    return sorted(out)


def environment_leaks(dump: Any, canaries: Canaries, keys: Sequence[str], items: Sequence[Any]) -> list[str]:
    """Each variable of the agent's environment (``dump``, the red team's, hostile) that holds a canary, one of
    ``keys`` (the upstream's, the hidden-item secret) or a hidden item, in words."""
    from autorl.audit.overlap import NgramIndex

    if not isinstance(dump, dict):
        return []
    index = NgramIndex(("hidden", item) for item in items)
    out = []
    for name, value in sorted(dump.items()):
        if not isinstance(value, str):
            continue
        found = canaries.found_in(value)
        if found:
            out.append(f"{name} holds the canary of {found[0]}")
        elif any(k and k.casefold() in value.casefold() for k in keys):
            out.append(f"{name} holds a key of the harness's")
        elif index.matches(value):
            out.append(f"{name} holds {len(index.matches(value))} hidden item(s)")
    return out


def scorer_code_got(got: Mapping[str, Any], canaries: Canaries) -> list[str]:
    """What the probe run as scorer code got (hostile output), in words: canaries, the environment of a process of
    the harness's, names its policy (as the probe's helper recorded it) neither shows nor leads to, a write to its
    own folder, a listener reached."""
    out = []
    text = json.dumps([got.get("read"), got.get("listed")])
    environs = got.get("environ")
    environs = [str(e) for e in environs] if isinstance(environs, list) else []
    found = canaries.found_in(text + "".join(environs))
    if found:
        out.append(f"scorer code got the canary of {found[0]}")
    harness = [e for e in environs if canaries.found_in(e) or "AUTORL_HOME=" in e]
    if harness:
        out.append(f"scorer code read the environment of {len(harness)} process(es) of the harness")
    listed, policy = got.get("listed"), got.get("policy")
    leaked = leaked_names(listed, policy) if isinstance(listed, dict) and isinstance(policy, dict) else []
    if leaked:
        out.append(f"scorer code listed {leaked[0]}, which its policy does not show")
    if got.get("wrote") is True or got.get("changed"):
        out.append("scorer code wrote its own folder")
    connected = got.get("connected")
    if isinstance(connected, list) and connected:
        out.append(f"scorer code reached {connected[0]}")
    return out


def shown_paths(bench: Benchmark) -> list[Path]:
    """What the benchmark shows its agent: its ``agent_paths()`` and exposed files (refused runs show none)."""
    try:
        return [*bench.agent_paths(), *bench.exposed_files().values()]
    except Exception:  # the run refuses such a benchmark itself
        return []


def digests(paths: Sequence[Path]) -> dict[str, str]:
    """sha256 of each file of ``paths`` (a folder's files each), to tell whether the run changed them."""
    import hashlib

    from autorl.sandbox.scorer import file_digests

    out = {}
    for p in paths:
        try:
            if p.is_dir():
                out.update({str(p / rel): d for rel, d in file_digests(p).items()})
            else:
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        except OSError:
            out[str(p)] = "unreadable"
    return out


def home_probes(bench: Benchmark, env: Mapping[str, str], canaries: Canaries, home: Path) -> dict[str, Any]:
    """The red team's probes of the home from the agent's policy: the canaries, the roots (the operator's home,
    autorl's storage), and every folder between them and what the policy shows there (the home's folders on
    PATH, the Python environment, what the benchmark shows)."""
    from autorl.sandbox.agent import agent_masks
    from autorl.sandbox.host import python_paths
    from autorl.sandbox.programs import path_view

    masked = agent_masks(home, home / "runs", env)
    shown = [*path_view(env["PATH"], masked, env).shown, *python_paths(), *shown_paths(bench)]
    roots = [canaries.home, home]
    return {
        "read": list(canaries.files),
        "roots": [str(r) for r in roots],
        "tool": str(canaries.home / TOOL),
        "list": probe_folders(roots, shown),
    }


def home_seen(evidence: Mapping[str, Any] | None, canaries: Canaries, home: Path) -> HomeSeen | None:
    """The red team's evidence about the home, weighed against the policy the run recorded."""
    from autorl.runs.agent import POLICY_RECORD
    from autorl.untrusted import parse_json

    got = evidence.get("home") if evidence else None
    if not isinstance(got, dict):
        return None
    records = sorted((home / "grader").glob(f"*.agent/{POLICY_RECORD}"))
    try:
        policy = parse_json(records[-1].read_bytes()) if records else {}
    except Exception:  # an unreadable record shows nothing
        policy = {}
    listed = got.get("listed")
    listed = listed if isinstance(listed, dict) else {}
    leaked = leaked_names(listed, policy) if isinstance(policy, dict) and policy else []
    return HomeSeen(
        canaries=canaries.found_in(json.dumps(evidence)),
        leaked=leaked,
        probed=len(canaries.files),
        folders=len(listed),
        tool=str(got["tool"])[:80] if got.get("tool") is not None else None,
    )


def scorer_code_seen(
    root: Path, env: Mapping[str, str], canaries: Canaries, home: Path, cfg: Mapping[str, Any], changed: list[str]
) -> ScorerCodeSeen:
    """The probe run as scorer code under its policy, from a process holding the run's environment."""
    from autorl.sandbox.host import common_masks

    folders = [str(p) for p in [canaries.home, home, *common_masks(env)] if p.is_dir()]
    connect = [c for c in (cfg.get("unix"), cfg.get("tcp")) if c]
    got = probe_scorer_code(root, env, read=list(canaries.files), folders=folders, connect=connect)
    error = str(got["error"]) if got.get("error") else None
    return ScorerCodeSeen(got=scorer_code_got(got, canaries), error=error, changed=changed)


def secret_hex(hidden_dir: Path) -> list[str]:
    """The run's hidden-item secret in hex (what would let an agent draw the items), if there is one."""
    try:
        return [(hidden_dir / "secret").read_bytes().hex()]
    except OSError:
        return []
