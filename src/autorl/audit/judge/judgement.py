"""One judged audit: the evidence gathered, packed into chunks, asked within the judge's budget, the verdicts
combined into ``judge:*`` flags, and what the judge was not shown named byte range by byte range in a
``judge-evidence-cut`` flag. The :class:`Judgement` also carries what the run record keeps of the judge (its
model, prompt hash and number of samples)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autorl.audit.flags import MEDIUM, Flag
from autorl.audit.judge.calls import ask_chunks
from autorl.audit.judge.evidence import CONTEXT_CHARS, Piece, Unshown, gather
from autorl.audit.judge.prompt import chunks, prompt_hash
from autorl.audit.judge.verdict import flags_of, majority

#: ranges listed in the flag itself (the whole list is in :meth:`Judgement.coverage`)
FLAG_RANGES = 200


if TYPE_CHECKING:
    from autorl.record.schema import JudgeColumns, ResultRecord


@dataclass
class Judgement:
    """The judge's flags for one run, what it was shown (``shown`` of ``total`` bytes of evidence files) and
    not shown (``unshown``, merged ranges), the binary files left to the deterministic audit, and the judge's
    identity."""

    model: str
    samples: int
    prompt_hash: str
    flags: list[Flag] = field(default_factory=list)
    shown: int = 0
    total: int = 0
    unshown: list[Unshown] = field(default_factory=list)
    binary: list[str] = field(default_factory=list)
    chunks: int = 0
    calls: int = 0

    def columns(self) -> JudgeColumns:
        """The run record's columns for the judge (:class:`autorl.record.row.RunRow`)."""
        return {"judge_model": self.model, "judge_prompt_hash": self.prompt_hash, "judge_samples": self.samples}

    def coverage(self) -> dict[str, Any]:
        """What the judge was shown and not shown, in full (kept beside the judge's calls)."""
        return {
            **self.columns(),
            "shown_bytes": self.shown,
            "evidence_bytes": self.total,
            "chunks": self.chunks,
            "calls_answered": self.calls,
            "unshown": [str(u) for u in self.unshown],
            "binary": self.binary,
        }


def judge_run(
    result: ResultRecord,
    *,
    url: str,
    token: str,
    model: str,
    samples: int = 1,
    context_chars: int = CONTEXT_CHARS,
    timeout_s: float = 600.0,
    budget_s: float | None = None,
    concurrency: int = 4,
) -> Judgement:
    """The judged audit of one recorded run (its ``result.json`` as a dict) through the gateway at ``url``:
    every piece of its evidence shown to ``samples`` judge samples until the budget (the gateway's, and
    ``budget_s`` seconds) runs out."""
    evidence = gather(result, part_chars=context_chars)
    return judge_pieces(
        evidence.pieces,
        url=url,
        token=token,
        model=model,
        samples=samples,
        context_chars=context_chars,
        timeout_s=timeout_s,
        budget_s=budget_s,
        concurrency=concurrency,
        unshown=evidence.unshown,
        binary=evidence.binary,
        same=evidence.same,
    )


def judge_pieces(
    pieces: Sequence[Piece],
    *,
    url: str,
    token: str,
    model: str,
    samples: int = 1,
    context_chars: int = CONTEXT_CHARS,
    timeout_s: float = 600.0,
    budget_s: float | None = None,
    concurrency: int = 4,
    unshown: Sequence[Unshown] = (),
    binary: Sequence[str] = (),
    same: Sequence[tuple[Piece, Piece]] = (),
) -> Judgement:
    """The judgement of ``pieces`` (``unshown``: what gathering them could not take; ``same``: pieces whose text
    is that of a piece among them, shown when that one is)."""
    if samples < 1:
        raise ValueError("the judge needs at least one sample")
    parts = chunks(pieces, context_chars)
    asked = ask_chunks(
        parts,
        url=url,
        token=token,
        model=model,
        samples=samples,
        timeout_s=timeout_s,
        budget_s=budget_s,
        concurrency=concurrency,
    )
    out = Judgement(
        model,
        samples,
        prompt_hash(),
        flags_of([majority(a.answers) for a in asked if a.answers]),
        chunks=len(parts),
        calls=sum(a.answered for a in asked),
        binary=list(binary),
    )
    missed = list(unshown)
    judged: set[int] = set()
    for chunk, a in zip(parts, asked, strict=True):
        if a.unjudged is None:
            out.shown += sum(p.size for p in chunk)
            judged |= {id(p) for p in chunk}
        else:
            missed += [Unshown(p.file, p.start, p.end, a.unjudged) for p in chunk if p.end is not None]
    for piece, original in same:
        if id(original) in judged:
            out.shown += piece.size
        else:
            missed.append(
                Unshown(
                    piece.file, piece.start, piece.end or piece.start, f"the same text as {original.where}, not shown"
                )
            )
    out.unshown = merged(missed)
    out.total = out.shown + sum(u.size for u in out.unshown)
    cut = cut_flag(out)
    if cut is not None:
        out.flags.append(cut)
    return out


def merged(unshown: Sequence[Unshown]) -> list[Unshown]:
    """``unshown`` with adjacent or overlapping ranges of one file and reason joined, in file order."""
    out: list[Unshown] = []
    for u in sorted(unshown, key=lambda u: (u.file, u.why, u.start)):
        last = out[-1] if out else None
        if (
            last is not None
            and (last.file, last.why) == (u.file, u.why)
            and last.end is not None
            and u.start <= last.end
        ):
            end = None if u.end is None else max(last.end, u.end)
            out[-1] = Unshown(last.file, last.start, end, last.why)
        else:
            out.append(u)
    return sorted(out, key=lambda u: (u.file, u.start))


def cut_flag(judged: Judgement) -> Flag | None:
    """``judge-evidence-cut`` naming every range the judge was not shown (the first :data:`FLAG_RANGES` in the
    flag, all of them in the coverage record), or None when it was shown everything."""
    if not judged.unshown:
        return None
    files = len({u.file for u in judged.unshown})
    whys = "; ".join(dict.fromkeys(u.why for u in judged.unshown))
    evidence = [str(u) for u in judged.unshown[:FLAG_RANGES]]
    if len(judged.unshown) > FLAG_RANGES:
        evidence.append(f"... and {len(judged.unshown) - FLAG_RANGES} more range(s)")
    return Flag(
        "judge-evidence-cut",
        MEDIUM,
        f"the judge was shown {judged.shown} of {judged.total} bytes of "
        f"evidence; {judged.total - judged.shown} byte(s) in {files} file(s) were not shown ({whys})"[:900],
        evidence,
    )
