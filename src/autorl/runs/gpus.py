"""``--gpus``: which GPUs the agent and the grader get, e.g. ``agent=0-2,grader=3`` or ``agent=0,1,grader=2``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autorl.errors import UsageError
from autorl.inference.gpu_share import AGENT_BUDGET_ENV, visible_gpus

_RANGE = re.compile(r"^(\d+)-(\d+)$")
ROLES = ("agent", "grader")


@dataclass(frozen=True)
class GpuAssignment:
    agent: tuple[str, ...] = ()
    grader: tuple[str, ...] = ()
    #: grader GPUs shared with the agent (then the grader's backend gets a memory share)
    shared: tuple[str, ...] = field(default=())
    #: set by ``--gpus``: then an agent given no GPU sees none (without it, it sees them all)
    explicit: bool = False
    #: what the agent may use of a GPU it shares with the grader (and other runs), in bytes; None: no budget
    agent_memory_bytes: int | None = None

    def agent_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        if self.agent or self.explicit:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.agent)
        if self.agent_memory_bytes is not None:
            env[AGENT_BUDGET_ENV] = str(max(0, self.agent_memory_bytes))
        return env

    @property
    def agent_has_gpus(self) -> bool:
        return bool(self.agent) or not self.explicit

    def counts(self, visible: int) -> dict[str, int]:
        """How many GPUs each role had, given ``visible`` on the machine: the agent all of them unless ``--gpus``
        said otherwise; the grader its own, else one when there is any (its one evaluation slot)."""
        agent = len(self.agent) if self.agent or self.explicit else visible
        return {"agent": agent, "grader": len(self.grader) if self.grader else min(1, visible)}

    def grader_workers(self) -> list[dict[str, str]]:
        """One evaluation slot per grader GPU."""
        return [{"CUDA_VISIBLE_DEVICES": g} for g in self.grader] or [{}]


def parse_gpus(spec: str, available: list[tuple[str, str]] | None = None) -> GpuAssignment:
    """Parse and check a ``--gpus`` value against the GPUs present (indices or UUIDs)."""
    roles: dict[str, list[str]] = {r: [] for r in ROLES}
    current: str | None = None
    for token in filter(None, (t.strip() for t in spec.split(","))):
        if "=" in token:
            current, _, token = token.partition("=")
            current = current.strip()
            if current not in ROLES:
                raise UsageError(f"--gpus: unknown role {current!r}; use agent=... and grader=...")
        if current is None:
            raise UsageError(f"--gpus: {spec!r} must name roles, e.g. agent=0-2,grader=3")
        m = _RANGE.match(token)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if hi < lo:
                raise UsageError(f"--gpus: empty range {token!r}")
            roles[current] += [str(i) for i in range(lo, hi + 1)]
        elif token.isdigit() or token.startswith(("GPU-", "MIG-")):
            roles[current].append(token)
        else:
            raise UsageError(f"--gpus: {token!r} is neither a GPU index, a range nor a GPU UUID")
    available = visible_gpus() if available is None else available
    known = {i for i, _ in available} | {u for _, u in available}
    for role, ids in roles.items():
        if len(set(ids)) != len(ids):
            raise UsageError(f"--gpus: {role} lists a GPU twice")
        missing = [g for g in ids if g not in known]
        if missing:
            have = ", ".join(i for i, _ in available) or "none"
            raise UsageError(f"--gpus: GPU {', '.join(missing)} for the {role} does not exist here (GPUs: {have})")
    shared = tuple(g for g in roles["grader"] if g in roles["agent"])
    return GpuAssignment(tuple(roles["agent"]), tuple(roles["grader"]), shared, explicit=True)
