"""What ``autorl selftest`` observes of a run besides the red team's evidence: the model API's view
(:class:`GatewaySeen`), the scratch home (:class:`HomeSeen`), the agent's environment, third-party scorer code and
the orchestrator's own view of the run (:class:`Observed`). The verdicts (:mod:`autorl.selftest.judge`) weigh them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EnvironmentSeen", "GatewaySeen", "HomeSeen", "Observed", "ScorerCodeSeen"]


@dataclass(frozen=True)
class GatewaySeen:
    """What the selftest's own model API saw of the run: the token budget the run was given, what the API
    served (prompt and output tokens, calls), the requests that did not come from the run's gateway, and where
    its key appeared in what the agent wrote or printed."""

    budget: int
    served: int
    calls: int
    direct: Sequence[str]
    leaked: Sequence[str]
    #: whether the gateway's connections were told apart by process, not only by the key
    peers_checked: bool = True


@dataclass(frozen=True)
class HomeSeen:
    """What the red team got of the scratch operator's home, weighed against the policy the run recorded: where
    each canary it got was planted, each name it listed that the policy neither shows nor leads to, how many
    canary files and folders were tried, and what the tool on PATH printed (None: not tried)."""

    canaries: Sequence[str]
    leaked: Sequence[str]
    probed: int
    folders: int
    tool: str | None = None


@dataclass(frozen=True)
class EnvironmentSeen:
    """The agent's environment as the red team dumped it: each variable holding a canary, a key or hidden items
    (in words), and how many variables there were (None: no dump)."""

    leaks: Sequence[str]
    count: int | None


@dataclass(frozen=True)
class ScorerCodeSeen:
    """Third-party scorer code: what the probe run under the scorer policy got (in words), why it could not run,
    and the benchmark's shown files that changed while the run's scorer ran."""

    got: Sequence[str]
    error: str | None
    changed: Sequence[str]


@dataclass
class Observed:
    """What the orchestrator saw of one run, besides the red team's evidence."""

    record: dict[str, Any] | None
    failure: str
    hidden: Mapping[str, set[str]]
    public_splits: Sequence[str]
    installed_paths: Sequence[str]
    accepted: Mapping[str, int]
    written: bool
    network: str
    tcp_available: bool
    gateway: GatewaySeen | None = None
    #: this side's own scorer check on the run's hidden items: (got through, tested, detail)
    scorer: tuple[bool, bool, str] | None = None
    #: the names of the audit's flags in the ledger, ``None`` when there is no audit to read
    audit: list[str] | None = None
    home: HomeSeen | None = None
    environment: EnvironmentSeen | None = None
    scorer_code: ScorerCodeSeen | None = None
    extra: dict[str, Any] = field(default_factory=dict)
