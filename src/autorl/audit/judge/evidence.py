"""What the judge reads of a run: the agent's trajectory, logs, code and the training data it built (through
:func:`autorl.audit.scan.agent_texts`: no link followed, archives capped), the gateway's record of the model
calls, and the submissions' metadata. Every piece is cut at ``PIECE_CHARS`` and the whole at
``EVIDENCE_CHARS``; weights and other binaries are left to the deterministic audit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
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


def _order(where: str) -> int:
    name = where.rsplit("/", 1)[-1]
    return 0 if name in _FIRST else 1


def gather(result: dict[str, Any], *, piece_chars: int = PIECE_CHARS, total_chars: int = EVIDENCE_CHARS,
           budget_s: float | None = AUDIT_BUDGET_S) -> list[Piece]:
    """The run's evidence, the agent's own record of its work first, at most ``total_chars`` in all."""
    row, meta = result["row"], result.get("meta", {}) or {}
    sources = [Source(Path(row["workspace"]), skip_top=HARNESS_FILES)]
    if meta.get("tmp_dir"):
        sources.append(Source(Path(meta["tmp_dir"]), "/tmp/"))
    pieces = list(_texts(sources, budget_s, piece_chars))
    pieces.sort(key=lambda p: _order(p.where))
    gateway: dict[str, Any] = meta["llm_gateway"] if isinstance(meta.get("llm_gateway"), dict) else {}
    if gateway.get("record_dir"):
        from autorl.gateway.record import call_texts

        pieces += _texts([], budget_s, piece_chars, call_texts(Path(gateway["record_dir"])))
    subs = [{k: s.get(k) for k in ("submission_id", "status", "path", "kind", "score", "submitted_at", "note",
                                     "config", "error")} for s in result.get("submissions", []) if isinstance(s, dict)]
    if subs:
        pieces.append(Piece("submissions (metadata)", json.dumps(subs, default=str)[:piece_chars]))
    out, used = [], 0
    for piece in pieces:
        if used >= total_chars:
            break
        piece = Piece(piece.where, piece.text[:total_chars - used])
        out.append(piece)
        used += len(piece.text)
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
