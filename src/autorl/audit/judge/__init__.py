"""The judged audit: a judge model reads a run's evidence and answers fixed questions (contamination including
paraphrase, model substitution, forbidden external help, harness tampering, decoys touched), each with a
verdict, a severity, a reason and quoted evidence with its location. Its verdicts become the audit's
``judge:*`` flags; what it was not shown, byte range by byte range, the ``judge-evidence-cut`` flag.

The judge is reached through an LLM gateway started for it (the operator's keys, its own budget, never the
run's gateway or the agent's token): :func:`judge_run` takes that gateway's URL and token. Modules:
:mod:`~.evidence` (what is read, whole, in located pieces), :mod:`~.prompt` (the questions, the framing, the
chunks), :mod:`~.calls` (asking within the budget), :mod:`~.verdict` (strict parsing, the majority of samples,
the chunks combined) and :mod:`~.judgement` (one judged run).
"""

from __future__ import annotations

from autorl.audit.judge.evidence import CONTEXT_CHARS, Evidence, Piece, Unshown, gather
from autorl.audit.judge.judgement import Judgement, judge_pieces, judge_run
from autorl.audit.judge.prompt import QUESTIONS, prompt_hash
from autorl.audit.judge.verdict import Answer, flags_of, majority, parse

__all__ = [
    "CONTEXT_CHARS",
    "QUESTIONS",
    "Answer",
    "Evidence",
    "Judgement",
    "Piece",
    "Unshown",
    "flags_of",
    "gather",
    "judge_pieces",
    "judge_run",
    "majority",
    "parse",
    "prompt_hash",
]
