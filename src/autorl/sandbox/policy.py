"""The one description of what an untrusted process may see: :class:`Policy`.

Every kind of untrusted process (the agent, third-party scorer code, model-generated programs) has a module
of its own that builds its policy (:mod:`autorl.sandbox.agent`, :mod:`autorl.sandbox.scorer`,
:mod:`autorl.sandbox.program`) from the rules it declares (a :class:`Kind`), and one launcher
(:mod:`autorl.sandbox.launcher`) turns a policy into the command that runs under it. Nothing else decides binds or
environment. The trust model's table in docs/sandbox.md is rendered from the same kinds (:func:`trust_table`).

Paths are host paths; each appears at the same path inside. The file rules apply in this order: the view
(``host``: the host's file system read-only; ``system``: only the system's folders and what the policy shows),
then ``masked`` (not there at all), ``read-only`` and ``read-write`` (shown again, exactly these paths, never a
parent), ``masked-again`` (absent whatever showed them), and ``shown-last`` (read-only over every mask).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the file accesses of a :class:`Binding`, in the order the launcher applies them
MASKED, READ_ONLY, READ_WRITE, MASKED_AGAIN, SHOWN_LAST = (
    "masked",
    "read-only",
    "read-write",
    "masked-again",
    "shown-last",
)
ACCESSES = (MASKED, READ_ONLY, READ_WRITE, MASKED_AGAIN, SHOWN_LAST)
#: the views a policy starts from
HOST_VIEW, SYSTEM_VIEW = "host", "system"
#: the networks: ``off`` (loopback of its own only), ``on`` (a namespace of its own with a route out),
#: ``host`` (the host's network, shared)
NETWORK_OFF, NETWORK_ON, NETWORK_HOST = "off", "on", "host"


@dataclass(frozen=True)
class Rule:
    """One rule of a kind: what the trust table says (``words``) and how the paths it names are shown."""

    key: str
    access: str
    words: str


@dataclass(frozen=True)
class Kind:
    """A kind of untrusted process and its rules, as the trust table shows them."""

    name: str
    title: str
    view: str
    rules: tuple[Rule, ...]
    environment: str
    network: str
    processes: str

    def rule(self, key: str) -> Rule:
        for rule in self.rules:
            if rule.key == key:
                return rule
        raise KeyError(f"{self.name} has no rule {key!r}")


@dataclass(frozen=True)
class Binding:
    """One path of a policy: how it is shown and the rule that put it there."""

    path: Path
    access: str
    rule: str


@dataclass(frozen=True)
class Relay:
    """The agent's ways to the harness's services on the host's loopback: the grader's port, reached through a
    Unix socket in ``socket_dir`` (made by the caller with the network off), and further ports (the LLM gateway)."""

    port: int | None = None
    socket_dir: Path | None = None
    also: tuple[int, ...] = ()


@dataclass(frozen=True)
class Policy:
    """What one untrusted process may see: files (:class:`Binding`), its whole environment, its network, its own
    pid namespace, and its working directory."""

    kind: str
    view: str
    files: tuple[Binding, ...]
    env: Mapping[str, str]
    cwd: Path
    network: str = NETWORK_OFF
    #: a pid namespace of its own: no other process (the harness's environment in ``/proc/<pid>/environ``)
    own_pids: bool = True
    #: a host folder shown read-write as /tmp and /var/tmp; None: a private tmpfs
    tmp: Path | None = None
    gpus: bool = False
    relay: Relay = field(default_factory=Relay)
    #: with the network on: the slirp4netns executable; "auto": the one that works here; None: share the host's
    slirp: str | None = "auto"
    hostname: str = "autorl-sandbox"
    #: a terminal session of its own (no ioctl into the caller's terminal)
    new_session: bool = True

    def paths(self, *access: str) -> list[Path]:
        """The paths of the given accesses (all when none is given), in the policy's order."""
        return [b.path for b in self.files if not access or b.access in access]

    def record(self) -> dict[str, Any]:
        """The policy as a run records it (``policy.json`` beside the agent's /tmp): every path with its access and
        rule, the variables' names (never their values: they hold the run's token), the network and the rest."""
        return {
            "kind": self.kind,
            "view": self.view,
            "files": [{"path": str(b.path), "access": b.access, "rule": b.rule} for b in self.files],
            "env": sorted(self.env),
            "cwd": str(self.cwd),
            "network": self.network,
            "own_pids": self.own_pids,
            "tmp": str(self.tmp) if self.tmp is not None else None,
            "gpus": self.gpus,
        }


#: What no untrusted process sees, whatever its kind (the groups of :func:`autorl.sandbox.host.mask_groups`)
COMMON_MASKS = (
    Rule("homes", MASKED, "the operator's home (HOME and the account's own)"),
    Rule(
        "elsewhere",
        MASKED,
        "what the operator keeps outside the home: the targets of the home's top-level links, "
        "the XDG folders and the places credential variables name (CARGO_HOME, DOCKER_CONFIG, "
        "AWS_SHARED_CREDENTIALS_FILE, NETRC, KUBECONFIG, GNUPGHOME...)",
    ),
    Rule("caches", MASKED, "the Hugging Face caches"),
    Rule("host", MASKED, "the host's /tmp, /var/tmp, TMPDIR, /run and /dev/shm (private and empty inside)"),
    Rule("secrets", MASKED, "as root: the system's secrets (/etc/shadow, the SSH host keys, /root)"),
)


#: What the Python environment holds beside its code, absent for every kind that is shown the environment
PYTHON_SECRETS = Rule(
    "python-secrets",
    MASKED_AGAIN,
    "the dot-files of the Python environment's folders (a "
    "project's .env, .git) and an environment's activation scripts and conda settings",
)


def common_bindings(kind: Kind, groups: Mapping[str, Iterable[Path]]) -> list[Binding]:
    """The paths of each group of :data:`COMMON_MASKS`, bound under ``kind``'s rule of the same name."""
    return [b for key, paths in groups.items() for b in bind(kind.rule(key), paths)]


def bind(rule: Rule, paths: Iterable[Path]) -> list[Binding]:
    """Each of ``paths`` under ``rule`` (once, in order)."""
    return [Binding(p, rule.access, rule.key) for p in dict.fromkeys(paths)]


_COLUMNS = ("reads (read-only)", "writes", "not there", "environment", "network", "other processes")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def trust_table(kinds: Iterable[Kind]) -> str:
    """The trust model as one markdown table: each kind of process and what it sees (docs/sandbox.md)."""
    rows = ["| process | " + " | ".join(_COLUMNS) + " |", "|" + " --- |" * (len(_COLUMNS) + 1)]
    for kind in kinds:

        def words(*access: str, kind: Kind = kind) -> str:
            return "; ".join(r.words for r in kind.rules if r.access in access) or "nothing"

        base = (
            "the host's system read-only, "
            if kind.view == HOST_VIEW
            else "only the system's folders (/usr, /etc, /lib...) read-only, "
        )
        cells = [
            kind.title,
            base + words(READ_ONLY, SHOWN_LAST),
            words(READ_WRITE),
            words(MASKED, MASKED_AGAIN),
            kind.environment,
            kind.network,
            kind.processes,
        ]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows) + "\n"
