"""The judged audit: a judge model reads a run's evidence and answers fixed questions (contamination including
paraphrase, model substitution, forbidden external help, harness tampering, decoys touched), each with a
verdict, a severity and quoted evidence with its location. Its verdicts become the audit's ``judge:*`` flags.

The judge is reached through an LLM gateway started for it (the operator's keys, its own budget, never the
run's gateway or the agent's token): :func:`judge_run` takes that gateway's URL and token. Modules:
:mod:`~.evidence` (what is read), :mod:`~.prompt` (the questions, the framing, the chunks) and :mod:`~.verdict`
(strict parsing, the majority of samples).
"""

from __future__ import annotations

from typing import Any

import httpx

from autorl.audit.flags import MEDIUM, Flag
from autorl.audit.judge.evidence import Evidence, Piece, gather
from autorl.audit.judge.prompt import CONTEXT_CHARS, QUESTIONS, chunks, new_nonce, system_prompt, user_prompt
from autorl.audit.judge.verdict import Answer, majority, parse, worst

__all__ = ["CONTEXT_CHARS", "QUESTIONS", "Answer", "Evidence", "Piece", "gather", "judge_pieces", "judge_run", "majority",
           "parse"]


def judge_run(result: dict[str, Any], *, url: str, token: str, model: str, samples: int = 1,
              context_chars: int = CONTEXT_CHARS, timeout_s: float = 600.0) -> list[Flag]:
    """The ``judge:*`` flags of one recorded run (its ``result.json`` as a dict), from ``samples`` judge samples
    through the gateway at ``url`` (its ``/openai/v1`` route)."""
    evidence = gather(result)
    flags = judge_pieces(evidence.pieces, url=url, token=token, model=model, samples=samples,
                         context_chars=context_chars, timeout_s=timeout_s)
    if evidence.unread:  # an agent that floods its workspace is seen doing so
        flags.append(Flag("judge-evidence-cut", MEDIUM, f"{len(evidence.unread)} piece(s) of evidence did not fit "
                          "the judge's reading limit and were not judged", evidence.unread[:50]))
    return flags


def judge_pieces(pieces: list[Piece], *, url: str, token: str, model: str, samples: int = 1,
                 context_chars: int = CONTEXT_CHARS, timeout_s: float = 600.0) -> list[Flag]:
    """The flags the judge gives ``pieces``; a call that fails makes that sample undecided, never clean."""
    if samples < 1:
        raise ValueError("the judge needs at least one sample")
    parts = chunks(pieces, context_chars)
    results = []
    with httpx.Client(base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s,
                      trust_env=False) as client:
        for _ in range(samples):
            nonce = new_nonce()  # fresh per sample: nothing the agent wrote can close a delimiter
            results.append(worst([_ask(client, model, chunk, nonce, i + 1, len(parts))
                                  for i, chunk in enumerate(parts)]))
    return majority(results)


def _ask(client: httpx.Client, model: str, chunk: list[Piece], nonce: str, part: int, parts: int) -> dict[str, Answer]:
    body = {"model": model, "temperature": 1.0,
            "messages": [{"role": "system", "content": system_prompt(nonce)},
                         {"role": "user", "content": user_prompt(chunk, nonce, part, parts)}]}
    try:
        resp = client.post("/openai/v1/chat/completions", json=body)
        if resp.status_code != 200:
            raise ValueError(f"the gateway answered {resp.status_code}: {resp.text[:300]}")
        content = resp.json()["choices"][0]["message"]["content"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        why = f"the judge call failed ({type(exc).__name__}: {str(exc)[:200]})"
        return {q: Answer("undecided", MEDIUM, why) for q in QUESTIONS}
    return parse(content if isinstance(content, str) else "", chunk)
