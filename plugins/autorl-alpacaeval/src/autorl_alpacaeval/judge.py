"""The judge: any OpenAI-compatible chat-completions endpoint, prompted with AlpacaEval's own annotator
template (``weighted_alpaca_eval_gpt4_turbo``: the ``alpaca_eval_clf`` prompt, one token, the preference
weighted by the log-probabilities of the two model identifiers).

Configured by the grader's environment, never the agent's: ``AUTORL_JUDGE_BASE_URL``, ``AUTORL_JUDGE_MODEL``,
``AUTORL_JUDGE_API_KEY`` (else ``OPENAI_API_KEY``), ``AUTORL_JUDGE_CONCURRENCY`` (8),
``AUTORL_JUDGE_MAX_RETRIES`` (5), ``AUTORL_JUDGE_TIMEOUT`` (60 s), ``AUTORL_JUDGE_PRICE_IN`` / ``_OUT`` (USD per
million tokens, for the recorded cost). Judgements are cached in SQLite by (instruction, both outputs, judge
config), so re-evaluating an unchanged checkpoint makes no call.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ANNOTATOR = "weighted_alpaca_eval_gpt4_turbo"
TEMPLATE = "alpaca_eval_clf_gpt4_turbo/alpaca_eval_clf.txt"
DEFAULT_MODEL = "gpt-4-1106-preview"


def template() -> str:
    from importlib.resources import files

    return (files("alpaca_eval") / "evaluators_configs" / TEMPLATE).read_text()


@dataclass(frozen=True)
class JudgeConfig:
    base_url: str
    model: str
    api_key: str = field(repr=False, default="")
    concurrency: int = 8
    max_retries: int = 5
    timeout_s: float = 60.0
    price_in: float = 0.0
    price_out: float = 0.0

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> JudgeConfig:
        e = dict(os.environ if env is None else env)
        return cls(
            base_url=e.get("AUTORL_JUDGE_BASE_URL", "https://api.openai.com/v1").rstrip("/"),
            model=e.get("AUTORL_JUDGE_MODEL", DEFAULT_MODEL),
            api_key=e.get("AUTORL_JUDGE_API_KEY") or e.get("OPENAI_API_KEY", ""),
            concurrency=int(e.get("AUTORL_JUDGE_CONCURRENCY", "8")),
            max_retries=int(e.get("AUTORL_JUDGE_MAX_RETRIES", "5")),
            timeout_s=float(e.get("AUTORL_JUDGE_TIMEOUT", "60")),
            price_in=float(e.get("AUTORL_JUDGE_PRICE_IN", "0")),
            price_out=float(e.get("AUTORL_JUDGE_PRICE_OUT", "0")),
        )

    def identity(self) -> dict[str, Any]:
        """What goes into the eval-config hash (the key never does)."""
        return {
            "annotator": ANNOTATOR,
            "model": self.model,
            "base_url": self.base_url,
            "template_sha256": hashlib.sha256(template().encode()).hexdigest()[:16],
        }


@dataclass
class Judgement:
    preference: float | None  # P(the model's output is the better one), in [0, 1]
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False


class Cache:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS judgements (key TEXT PRIMARY KEY, preference REAL NOT NULL)")

    def get(self, key: str) -> float | None:
        with self._lock:
            row = self._db.execute("SELECT preference FROM judgements WHERE key=?", (key,)).fetchone()
        return None if row is None else float(row[0])

    def put(self, key: str, preference: float) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO judgements VALUES (?, ?)", (key, preference))

    def close(self) -> None:
        self._db.close()


class Judge:
    def __init__(self, config: JudgeConfig, cache: Cache | None = None) -> None:
        import httpx

        self.config = config
        self.cache = cache
        self.http = httpx.Client(
            base_url=config.base_url,
            timeout=config.timeout_s,
            trust_env=False,
            headers={"Authorization": f"Bearer {config.api_key}"} if config.api_key else {},
        )
        self.calls = 0
        self._lock = threading.Lock()

    def key(self, instruction: str, model_output: str, reference: str) -> str:
        payload = json.dumps([instruction, model_output, reference, self.config.identity()])
        return hashlib.sha256(payload.encode()).hexdigest()

    def messages(self, instruction: str, output_1: str, output_2: str) -> list[dict[str, str]]:
        from alpaca_eval.utils import prompt_to_chatml

        values = {"instruction": instruction, "output_1": output_1, "output_2": output_2}
        # one pass over the three placeholders: the template's other braces (and the outputs') stay as they are
        prompt = re.sub(r"\{(instruction|output_1|output_2)\}", lambda m: values[m.group(1)], template())
        return [{"role": m["role"], "content": m["content"]} for m in prompt_to_chatml(prompt)]

    def judge(self, instruction: str, model_output: str, reference: str) -> Judgement:
        """P(model_output beats reference). The two are shown in an order fixed by a hash of the instruction,
        as AlpacaEval randomises it, so that position bias cancels over the set."""
        key = self.key(instruction, model_output, reference)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return Judgement(hit, cached=True)
        model_first = int(hashlib.sha256(instruction.encode()).hexdigest(), 16) % 2 == 1
        out_1, out_2 = (model_output, reference) if model_first else (reference, model_output)
        body = {
            "model": self.config.model,
            "messages": self.messages(instruction, out_1, out_2),
            "max_tokens": 1,
            "temperature": 1,
            "logprobs": True,
            "top_logprobs": 5,
        }
        error = "no attempt"
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                time.sleep(min(30.0, 0.5 * 2 ** (attempt - 1)) * (1 + 0.1 * random.random()))
            try:
                with self._lock:
                    self.calls += 1
                r = self.http.post("/chat/completions", json=body)
            except Exception as exc:  # timeouts and connection errors are retried
                error = f"{type(exc).__name__}: {exc}"
                continue
            if r.status_code == 429 or r.status_code >= 500:
                error = f"HTTP {r.status_code}"
                retry_after = r.headers.get("retry-after")
                if retry_after and retry_after.replace(".", "", 1).isdigit():
                    time.sleep(min(60.0, float(retry_after)))
                continue
            if r.status_code >= 400:
                return Judgement(None, f"HTTP {r.status_code}: {r.text[:200]}")
            try:
                data = r.json()
                p_first = _p_first_best(data["choices"][0])
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                error = f"unreadable judgement: {exc}"
                continue
            usage = data.get("usage") or {}
            preference = p_first if model_first else 1.0 - p_first
            if self.cache is not None:
                self.cache.put(key, preference)
            return Judgement(
                preference, None, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
            )
        return Judgement(None, f"judge failed after {self.config.max_retries + 1} attempts: {error}")

    def judge_all(self, triples: Sequence[tuple[str, str, str]]) -> list[Judgement]:
        with ThreadPoolExecutor(max_workers=max(1, self.config.concurrency)) as pool:
            return list(pool.map(lambda t: self.judge(*t), triples))

    def close(self) -> None:
        self.http.close()


def _p_first_best(choice: dict[str, Any]) -> float:
    """P(the first output, identifier ``m``, is best), from the token's top log-probabilities as AlpacaEval's
    ``logprob_parser`` weighs them; the answer text alone when there are none."""
    logprobs = (choice.get("logprobs") or {}).get("content") or []
    if logprobs:
        top = {t["token"].strip(): math.exp(t["logprob"]) for t in logprobs[0].get("top_logprobs", [])}
        p_m, p_big = top.get("m", 0.0), top.get("M", 0.0)
        if p_m + p_big > 0:
            return p_m / (p_m + p_big)
    text = str(choice["message"]["content"]).strip()
    if text == "m":
        return 1.0
    if text == "M":
        return 0.0
    raise ValueError(f"the judge answered {text[:40]!r}, not m or M")
