"""Asking the judge: one call per chunk and sample through the judge's gateway (its ``/openai/v1`` route), a few
at a time, chunk after chunk, within the judge's budget. The budget is the gateway's (tokens and dollars: a
call it refuses for the budget ends the asking) and a time limit (no call starts after the deadline, none runs
past it). A chunk no sample answered is unjudged, with the reason; a call that failed is an undecided sample,
never a clean one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

from autorl.audit.flags import MEDIUM
from autorl.audit.judge.evidence import Piece
from autorl.audit.judge.prompt import QUESTIONS, new_nonce, system_prompt, user_prompt
from autorl.audit.judge.verdict import Answer, parse

#: how long a call refused because the budget is held by calls in flight waits before it asks again, at most
BUSY_WAIT_S = 5.0


@dataclass
class Asked:
    """What became of one chunk: its samples' answers (a failed call's as undecided), the calls that got an
    answer, and why it was not judged when none did."""

    answers: list[dict[str, Answer]] = field(default_factory=list)
    answered: int = 0
    unjudged: str | None = None


class _Stop:
    """Why no further call starts (the budget refused one, the deadline passed), shared by the workers."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.why: str | None = None
        self.lock = threading.Lock()

    def check(self) -> str | None:
        if self.why is None and self.deadline is not None and time.monotonic() >= self.deadline:
            self.set("the judge's time budget ran out")
        return self.why

    def set(self, why: str) -> None:
        with self.lock:
            self.why = self.why or why


def ask_chunks(
    parts: Sequence[list[Piece]],
    *,
    url: str,
    token: str,
    model: str,
    samples: int,
    timeout_s: float,
    budget_s: float | None,
    concurrency: int,
) -> list[Asked]:
    """Every chunk asked ``samples`` times (chunk after chunk, ``concurrency`` calls at a time) until the
    budget or the time runs out; one :class:`Asked` per chunk."""
    stop = _Stop(None if budget_s is None else time.monotonic() + budget_s)
    outcomes: dict[tuple[int, int], tuple[str, dict[str, Answer] | str]] = {}
    with httpx.Client(
        base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s, trust_env=False
    ) as client:

        def work(task: tuple[int, int]) -> None:
            i, _sample = task
            outcomes[task] = _ask(client, model, parts[i], i + 1, len(parts), timeout_s, stop)

        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            list(pool.map(work, [(i, s) for i in range(len(parts)) for s in range(samples)]))
    out = []
    for i in range(len(parts)):
        got = [outcomes[(i, s)] for s in range(samples)]
        asked = Asked([a for kind, a in got if kind == "answer" and isinstance(a, dict)])
        asked.answered = len(asked.answers)
        failed = [str(a) for kind, a in got if kind == "failed"]
        asked.answers += [{q: Answer("undecided", MEDIUM, why) for q in QUESTIONS} for why in failed]
        if not asked.answered:
            asked.unjudged = failed[0] if failed else next(str(a) for kind, a in got if kind == "skipped")
        out.append(asked)
    return out


def _ask(
    client: httpx.Client, model: str, chunk: list[Piece], part: int, parts: int, timeout_s: float, stop: _Stop
) -> tuple[str, dict[str, Answer] | str]:
    """("answer", answers), ("failed", why) or ("skipped", why: the budget or the time ran out)."""
    nonce = new_nonce()  # fresh per call: nothing the agent wrote can close a delimiter
    body = {
        "model": model,
        "temperature": 1.0,
        "messages": [
            {"role": "system", "content": system_prompt(nonce)},
            {"role": "user", "content": user_prompt(chunk, nonce, part, parts)},
        ],
    }
    while True:
        why = stop.check()
        if why is not None:
            return "skipped", why
        left = timeout_s if stop.deadline is None else min(timeout_s, stop.deadline - time.monotonic())
        try:
            resp = client.post("/openai/v1/chat/completions", json=body, timeout=max(left, 1.0))
            if resp.status_code == 429 and "llm_budget_busy" in resp.text:  # calls in flight hold the rest
                time.sleep(min(float(resp.headers.get("retry-after") or 1), BUSY_WAIT_S))
                continue
            if resp.status_code == 429 and "llm_budget_exhausted" in resp.text:
                stop.set("the judge's LLM budget ran out")
                return "skipped", stop.why or ""
            if resp.status_code != 200:
                raise ValueError(f"the gateway answered {resp.status_code}: {resp.text[:300]}")
            content = resp.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError, RecursionError) as exc:
            if stop.check() is not None:  # cut by the deadline
                return "skipped", stop.why or ""
            return "failed", f"the judge call failed ({type(exc).__name__}: {str(exc)[:200]})"
        return "answer", parse(content if isinstance(content, str) else "", chunk)
