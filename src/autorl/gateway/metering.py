"""Counting what a call used: the upstream's usage fields, or counted tokens when a stream carries none;
prices per model and the run's budget.

A stream is parsed as it passes (``StreamTap``) with httpx-sse's decoders; the bytes the agent receives are
the upstream's, unchanged. Counted tokens are an estimate (a token per 4 characters of the request's
messages and of the text streamed back) and are recorded as ``counted``, never as the upstream's figure.

A little over 300 lines: usage parsing for the three families' whole and streamed answers, the counted
estimate and the budget are one ledger of a run's model use.
"""

from __future__ import annotations

import codecs
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from httpx_sse._decoders import SSEDecoder, SSELineDecoder

from autorl.errors import UsageError

#: USD per million tokens (input, output, cached input): list prices when this table was written. The
#: operator overrides or extends it with a YAML/JSON file (``--llm-prices``, ``AUTORL_LLM_PRICES``) of
#: ``model: {input: ..., output: ..., cached_input: ...}``. A model matches its longest prefix in the table.
DEFAULT_PRICES: dict[str, dict[str, float]] = {
    "gpt-4o": {"input": 2.5, "output": 10.0, "cached_input": 1.25},
    "gpt-4o-mini": {"input": 0.15, "output": 0.6, "cached_input": 0.075},
    "gpt-4.1": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
    "gpt-4.1-mini": {"input": 0.4, "output": 1.6, "cached_input": 0.1},
    "gpt-5": {"input": 1.25, "output": 10.0, "cached_input": 0.125},
    "gpt-5-mini": {"input": 0.25, "output": 2.0, "cached_input": 0.025},
    "o3": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
    "o4-mini": {"input": 1.1, "output": 4.4, "cached_input": 0.275},
    "claude-opus-4": {"input": 15.0, "output": 75.0, "cached_input": 1.5},
    "claude-sonnet-4": {"input": 3.0, "output": 15.0, "cached_input": 0.3},
    "claude-haiku-4": {"input": 1.0, "output": 5.0, "cached_input": 0.1},
    "claude-3-5-haiku": {"input": 0.8, "output": 4.0, "cached_input": 0.08},
    "gemini-2.5-pro": {"input": 1.25, "output": 10.0, "cached_input": 0.31},
    "gemini-2.5-flash": {"input": 0.3, "output": 2.5, "cached_input": 0.075},
}


def load_prices(path: str | Path | None) -> dict[str, dict[str, float]]:
    """The default table, overridden by the operator's file; a bad file is a one-line UsageError."""
    prices = {k: dict(v) for k, v in DEFAULT_PRICES.items()}
    if not path:
        return prices
    import yaml

    try:
        data = yaml.safe_load(Path(path).expanduser().read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"price table {path}: cannot read it: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise UsageError(f"price table {path}: must map model names to {{input, output, cached_input}}")
    for model, entry in data.items():
        try:
            if not isinstance(entry, dict) or set(entry) - {"input", "output", "cached_input"}:
                raise ValueError
            values = {k: float(v) for k, v in entry.items()}
            if any(not 0 <= v < math.inf for v in values.values()):
                raise ValueError
        except (TypeError, ValueError):
            raise UsageError(f"price table {path}: {model}: give input, output (and cached_input) as "
                             "non-negative USD per million tokens") from None
        values.setdefault("cached_input", values.get("input", 0.0))
        prices[str(model)] = {"input": values.get("input", 0.0), "output": values.get("output", 0.0),
                              "cached_input": values["cached_input"]}
    return prices


def price_of(model: str, prices: Mapping[str, Mapping[str, float]]) -> Mapping[str, float] | None:
    """The entry for ``model`` (exact, else its longest prefix; a provider prefix ``org/`` is ignored)."""
    for name in dict.fromkeys([model, model.rsplit("/", 1)[-1]]):
        if name in prices:
            return prices[name]
        best = max((k for k in prices if name.startswith(k)), key=len, default=None)
        if best is not None:
            return prices[best]
    return None


@dataclass
class Usage:
    """Tokens of one call. ``source``: ``upstream`` (its usage fields) or ``counted`` (estimated here)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    source: str = "upstream"

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def cost(self, model: str, prices: Mapping[str, Mapping[str, float]]) -> float | None:
        entry = price_of(model, prices)
        if entry is None:
            return None
        cached = min(self.cached_tokens, self.prompt_tokens)
        return ((self.prompt_tokens - cached) * entry["input"] + cached * entry["cached_input"]
                + self.completion_tokens * entry["output"]) / 1e6


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_from_body(family: str, body: Any) -> Usage | None:
    """The usage fields of a whole (non-streamed) response, or of the object a stream event carries."""
    if not isinstance(body, dict):
        return None
    if family == "gemini":
        meta = body.get("usageMetadata")
        if not isinstance(meta, dict):
            return None
        completion = _int(meta.get("candidatesTokenCount")) + _int(meta.get("thoughtsTokenCount"))
        return Usage(_int(meta.get("promptTokenCount")), completion, _int(meta.get("cachedContentTokenCount")))
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return None
    if family == "anthropic":
        cached = _int(usage.get("cache_read_input_tokens"))
        prompt = _int(usage.get("input_tokens")) + cached + _int(usage.get("cache_creation_input_tokens"))
        return Usage(prompt, _int(usage.get("output_tokens")), cached)
    if "input_tokens" in usage:  # the responses API
        details = usage.get("input_tokens_details")
        cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
        return Usage(_int(usage.get("input_tokens")), _int(usage.get("output_tokens")), cached)
    details = usage.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return Usage(_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")), cached)


def count_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def prompt_text(family: str, request: Any) -> str:
    """What the request sends the model, for counting when the upstream gives no usage."""
    if not isinstance(request, dict):
        return ""
    keys = {"openai": ("messages", "input", "instructions", "tools", "prompt"),
            "anthropic": ("system", "messages", "tools"),
            "gemini": ("contents", "systemInstruction", "system_instruction", "tools")}[family]
    return "".join(json.dumps(request[k]) for k in keys if k in request)


def _texts(family: str, event: str, data: Any) -> list[str]:
    """The generated text a stream event carries (content, tool arguments, reasoning)."""
    out: list[str] = []
    if not isinstance(data, dict):
        return out
    if family == "gemini":
        for cand in data.get("candidates") or []:
            parts = ((cand or {}).get("content") or {}).get("parts") if isinstance(cand, dict) else None
            for part in parts or []:
                if isinstance(part, dict):
                    out += [str(part["text"])] if "text" in part else []
                    out += [json.dumps(part["functionCall"])] if "functionCall" in part else []
        return out
    if family == "anthropic":
        delta = data.get("delta")
        if isinstance(delta, dict):
            out += [str(delta[k]) for k in ("text", "partial_json", "thinking") if isinstance(delta.get(k), str)]
        return out
    if isinstance(data.get("delta"), str):  # responses API: *.delta events
        return [data["delta"]]
    for choice in data.get("choices") or []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            continue
        out += [str(delta[k]) for k in ("content", "reasoning_content") if isinstance(delta.get(k), str)]
        for call in delta.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                out += [str(fn.get(k)) for k in ("name", "arguments") if isinstance(fn.get(k), str)]
    return out


@dataclass
class StreamTap:
    """Follows a server-sent-event stream as its bytes pass: events, generated text, usage, whether it ended."""

    family: str
    text_limit: int = 256 * 1024
    events: int = 0
    text: list[str] = field(default_factory=list)
    text_chars: int = 0
    usage: Usage | None = None
    finished: bool = False
    error: str | None = None

    def __post_init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lines = SSELineDecoder()
        self._sse = SSEDecoder()
        self._anthropic = Usage()

    def feed(self, chunk: bytes) -> None:
        for line in self._lines.decode(self._utf8.decode(chunk)):
            self._line(line)

    def close(self) -> None:
        for line in self._lines.decode(self._utf8.decode(b"", final=True)):
            self._line(line)
        for line in self._lines.flush():
            self._line(line)
        self._line("")

    def _line(self, line: str) -> None:
        sse = self._sse.decode(line.rstrip("\n"))
        if sse is not None:
            self._event(sse.event, sse.data)

    def _event(self, event: str, raw: str) -> None:
        self.events += 1
        if raw.strip() == "[DONE]":
            self.finished = True
            return
        try:
            data = json.loads(raw)
        except ValueError:
            return
        for piece in _texts(self.family, event, data):
            self.text_chars += len(piece)
            if sum(map(len, self.text)) < self.text_limit:
                self.text.append(piece)
        if not isinstance(data, dict):
            return
        kind = data.get("type") if isinstance(data.get("type"), str) else event
        if self.family == "anthropic":
            message = data.get("message")
            if kind == "message_start" and isinstance(message, dict):
                start = usage_from_body("anthropic", message)
                if start is not None:
                    self._anthropic = start
                    self.usage = self._anthropic
            elif kind == "message_delta" and isinstance(data.get("usage"), dict):
                self._anthropic.completion_tokens = _int(data["usage"].get("output_tokens"))
                self.usage = self._anthropic
            elif kind == "message_stop":
                self.finished = True
            elif kind == "error":
                self.error = json.dumps(data.get("error"))[:500]
            return
        if self.family == "gemini":
            usage = usage_from_body("gemini", data)
            self.usage = usage or self.usage
            if any(isinstance(c, dict) and c.get("finishReason") for c in data.get("candidates") or []):
                self.finished = True
            return
        # OpenAI: chat chunks (usage in the last one when asked for), or the responses API's typed events
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.usage = usage_from_body("openai", data.get("response")) or self.usage
            self.finished = True
            if kind == "response.failed":
                self.error = "the upstream reported response.failed"
        elif kind == "error" or (isinstance(data.get("error"), dict) and "choices" not in data):
            self.error = json.dumps(data.get("error") or data)[:500]
        elif "choices" in data:
            self.usage = usage_from_body("openai", data) or self.usage

    @property
    def streamed_text(self) -> str:
        return "".join(self.text)


class BudgetSpent(Exception):
    """The run's LLM budget is spent; the message says which and by how much."""


@dataclass
class Meter:
    """The run's totals per model, and its budget (tokens and/or USD)."""

    prices: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: DEFAULT_PRICES)
    budget_tokens: int | None = None
    budget_usd: float | None = None
    by_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: int = 0
    failed: int = 0
    refused: int = 0

    @property
    def tokens(self) -> int:
        return sum(m["prompt_tokens"] + m["completion_tokens"] for m in self.by_model.values())

    @property
    def cost_usd(self) -> float:
        return float(sum(m["cost_usd"] for m in self.by_model.values()))

    def check(self, model: str) -> None:
        """Raise ``BudgetSpent`` (or ``LookupError`` for a USD budget and a model without a price)."""
        if self.budget_tokens is not None and self.tokens >= self.budget_tokens:
            raise BudgetSpent(f"the run's LLM token budget is spent ({self.tokens} of {self.budget_tokens} "
                              "tokens): no further model calls are allowed in this run")
        if self.budget_usd is not None:
            if self.cost_usd >= self.budget_usd:
                raise BudgetSpent(f"the run's LLM budget is spent (USD {self.cost_usd:.4f} of "
                                  f"{self.budget_usd:.4f}): no further model calls are allowed in this run")
            if price_of(model, self.prices) is None:
                raise LookupError(f"no price for model {model!r}, and the run has a USD budget: the operator "
                                  "adds it to the price table (--llm-prices)")

    def add(self, model: str, usage: Usage, *, failed: bool = False) -> float | None:
        cost = usage.cost(model, self.prices)
        entry = self.by_model.setdefault(model, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                 "cached_tokens": 0, "cost_usd": 0.0, "counted_calls": 0,
                                                 "unpriced": False})
        entry["calls"] += 1
        entry["prompt_tokens"] += usage.prompt_tokens
        entry["completion_tokens"] += usage.completion_tokens
        entry["cached_tokens"] += usage.cached_tokens
        entry["cost_usd"] += cost or 0.0
        entry["counted_calls"] += usage.source == "counted"
        entry["unpriced"] = entry["unpriced"] or cost is None
        self.calls += 1
        self.failed += failed
        return cost

    def summary(self) -> dict[str, Any]:
        return {"calls": self.calls, "failed": self.failed, "refused": self.refused,
                "prompt_tokens": sum(m["prompt_tokens"] for m in self.by_model.values()),
                "completion_tokens": sum(m["completion_tokens"] for m in self.by_model.values()),
                "cached_tokens": sum(m["cached_tokens"] for m in self.by_model.values()),
                "tokens": self.tokens, "cost_usd": self.cost_usd,
                "budget_tokens": self.budget_tokens, "budget_usd": self.budget_usd,
                "by_model": {k: dict(v) for k, v in self.by_model.items()}}


__all__ = ["DEFAULT_PRICES", "BudgetSpent", "Meter", "StreamTap", "Usage", "count_tokens",
           "load_prices", "price_of", "prompt_text", "usage_from_body"]
