"""What the judge reads of a run: the agent's trajectory, logs, code and the training data it built (through
:func:`autorl.audit.scan.agent_texts`: no link followed, archives capped), the gateway's record of the model
calls, and the submissions' metadata. Every piece is cut at ``PIECE_CHARS`` and the whole at
``EVIDENCE_CHARS``; weights and other binaries are left to the deterministic audit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autorl.audit.scan import AUDIT_BUDGET_S, HARNESS_FILES, Budget, Source, agent_texts

PIECE_CHARS = 12_000
EVIDENCE_CHARS = 400_000
#: files whose printable runs say nothing a judge can read
SKIPPED_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".npy", ".npz", ".arrow", ".parquet",
                    ".so", ".pyc", ".png", ".jpg")
#: read first: what the agent did, then what it wrote
_FIRST = ("trajectory.jsonl", "transcript.jsonl", "agent.log")


@dataclass(frozen=True)
class Piece:
    """One located text of evidence: ``where`` is what a verdict quotes as the location."""

    where: str
    text: str


@dataclass
class Evidence:
    """What the judge reads, and what did not fit (``unread``: locations), which is itself reported."""

    pieces: list[Piece] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)


#: each kind's share of the whole, so that no kind can crowd the others out (a workspace flooded with files
#: still leaves the trajectory, the model calls and the code their room); what a kind leaves goes to the rest
SHARES = {"trace": 0.3, "calls": 0.25, "code": 0.25, "other": 0.2}
_CODE = (".py", ".sh", ".ipynb", ".yaml", ".yml", ".toml", ".cfg", ".js", ".r", ".jl")


def _kind(where: str) -> str:
    if where.startswith("llm gateway call"):
        return "calls"
    name = where.rsplit("/", 1)[-1]
    return "trace" if name in _FIRST else "code" if name.lower().endswith(_CODE) else "other"


def gather(result: dict[str, Any], *, piece_chars: int = PIECE_CHARS, total_chars: int = EVIDENCE_CHARS,
           budget_s: float | None = AUDIT_BUDGET_S) -> Evidence:
    """The run's evidence, at most ``total_chars`` in all, shared between its kinds (:data:`SHARES`); the
    submissions' metadata always."""
    row, meta = result["row"], result.get("meta", {}) or {}
    sources = [Source(Path(row["workspace"]), skip_top=HARNESS_FILES)]
    if meta.get("tmp_dir"):
        sources.append(Source(Path(meta["tmp_dir"]), "/tmp/"))
    gateway: dict[str, Any] = meta["llm_gateway"] if isinstance(meta.get("llm_gateway"), dict) else {}
    extra: Any = ()
    if gateway.get("record_dir"):
        from autorl.gateway.record import call_texts

        extra = call_texts(Path(gateway["record_dir"]))
    by_kind: dict[str, list[Piece]] = {k: [] for k in SHARES}
    for piece in _texts(sources, budget_s, piece_chars, extra):
        by_kind[_kind(piece.where)].append(piece)
    chosen: dict[str, list[Piece]] = {k: [] for k in SHARES}
    left = {k: [*v] for k, v in by_kind.items()}
    used = 0
    for share_pass in (True, False):  # each kind up to its share, then the room left in kind order
        for kind, share in SHARES.items():
            room = int(total_chars * share) if share_pass else total_chars - used
            taken = sum(len(p.text) for p in chosen[kind]) if share_pass else 0
            while left[kind] and taken + len(left[kind][0].text) <= room and used + len(left[kind][0].text) <= total_chars:
                piece = left[kind].pop(0)
                chosen[kind].append(piece)
                taken += len(piece.text)
                used += len(piece.text)
    out = Evidence([p for kind in SHARES for p in chosen[kind]], [p.where for kind in SHARES for p in left[kind]])
    subs = [{k: s.get(k) for k in ("submission_id", "status", "path", "kind", "score", "submitted_at", "note",
                                     "config", "error")} for s in result.get("submissions", []) if isinstance(s, dict)]
    if subs:
        out.pieces.append(Piece("submissions (metadata)", json.dumps(subs, default=str)[:piece_chars]))
    return out


def _texts(sources: list[Source], budget_s: float | None, piece_chars: int,
           extra: Any = ()) -> Iterator[Piece]:
    for text in agent_texts(sources, Budget(budget_s), extra):
        if text.where.lower().endswith(SKIPPED_SUFFIXES) or not text.text.strip():
            continue
        body = text.text
        if len(body) > piece_chars:  # its head and tail: what was set up and how it ended
            body = body[:piece_chars * 3 // 4] + "\n[... cut ...]\n" + body[-piece_chars // 4:]
        yield Piece(text.where, body)
