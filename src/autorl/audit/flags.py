"""What the audit reports: a flag's kind, severity, evidence, and the flags a run carries while its audit is
pending or after it failed. Hidden item text never appears in a flag."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autorl.record.schema import FlagRecord

CRITICAL, HIGH, MEDIUM, INFO = "critical", "high", "medium", "info"
#: the flags a judge gives besides its ``judge:<question>`` verdicts (``judge-steering`` is the deterministic
#: audit's: an attempt to steer the judge, found whatever the judge says)
JUDGE_OWN_FLAGS = ("judge-evidence-cut", "judge-failed")


@dataclass
class Flag:
    """One finding: its ``name`` (the kind), ``severity``, a human ``detail`` and its ``evidence`` (file paths,
    hidden item ids, submission ids)."""

    name: str
    severity: str
    detail: str
    evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> FlagRecord:
        """The flag as a run's record holds it."""
        return {"name": self.name, "severity": self.severity, "detail": self.detail, "evidence": list(self.evidence)}


def pending_flag() -> Flag:
    """What a run carries between being recorded and its audit finishing (a run whose audit never ended)."""
    return Flag(
        "audit-pending",
        MEDIUM,
        "the run was recorded before its audit, which did not finish: run `autorl audit RUN_ID`",
        [],
    )


def failed_flag(exc: BaseException) -> Flag:
    """What a run carries when its audit stopped on ``exc``."""
    return Flag(
        "audit-failed",
        MEDIUM,
        f"the audit stopped on an error ({type(exc).__name__}: {str(exc)[:200]}); run `autorl audit RUN_ID` again",
        [],
    )


def from_judge(name: str) -> bool:
    """Whether a flag named ``name`` is the judge's (it stands until a judge is asked again)."""
    return name.startswith("judge:") or name in JUDGE_OWN_FLAGS
