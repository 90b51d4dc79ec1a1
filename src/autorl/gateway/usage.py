"""What one call used: the upstream's usage fields of each API family, or tokens counted here.

Counted tokens are an estimate, a token per 4 characters (of the request body the upstream received, of the
text a stream carried back), recorded as ``counted``, never as the upstream's figure. A call whose answer
cannot be read is charged its whole reservation, recorded as ``reserved``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autorl.gateway.prices import price_of

#: where a call's figures come from
UPSTREAM, COUNTED, RESERVED = "upstream", "counted", "reserved"


@dataclass
class Usage:
    """Tokens of one call. ``source``: ``upstream`` (its usage fields), ``counted`` (estimated here) or
    ``reserved`` (the call's worst case, charged when its answer could not be read)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    source: str = UPSTREAM

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def cost(self, model: str, prices: Mapping[str, Mapping[str, float]]) -> float | None:
        entry = price_of(model, prices)
        if entry is None:
            return None
        cached = min(self.cached_tokens, self.prompt_tokens)
        return (
            (self.prompt_tokens - cached) * entry["input"]
            + cached * entry["cached_input"]
            + self.completion_tokens * entry["output"]
        ) / 1e6


def count_tokens(chars: int) -> int:
    """The counted estimate for ``chars`` characters."""
    return math.ceil(chars / 4)


def tokens_of(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_from_body(family: str, body: Any) -> Usage | None:
    """The usage fields of a whole response (an error body's too), or of the object a stream event carries."""
    if not isinstance(body, dict):
        return None
    if family == "gemini":
        meta = body.get("usageMetadata")
        if not isinstance(meta, dict):
            return None
        completion = tokens_of(meta.get("candidatesTokenCount")) + tokens_of(meta.get("thoughtsTokenCount"))
        prompt = tokens_of(meta.get("promptTokenCount")) + tokens_of(meta.get("toolUsePromptTokenCount"))
        return Usage(prompt, completion, tokens_of(meta.get("cachedContentTokenCount")))
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return None
    if family == "anthropic":
        cached = tokens_of(usage.get("cache_read_input_tokens"))
        prompt = tokens_of(usage.get("input_tokens")) + cached + tokens_of(usage.get("cache_creation_input_tokens"))
        return Usage(prompt, tokens_of(usage.get("output_tokens")), cached)
    if "input_tokens" in usage:  # the responses API
        details = usage.get("input_tokens_details")
        cached = tokens_of(details.get("cached_tokens")) if isinstance(details, dict) else 0
        return Usage(tokens_of(usage.get("input_tokens")), tokens_of(usage.get("output_tokens")), cached)
    details = usage.get("prompt_tokens_details")
    cached = tokens_of(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return Usage(tokens_of(usage.get("prompt_tokens")), tokens_of(usage.get("completion_tokens")), cached)


def usage_of_answer(family: str, data: Any) -> Usage | None:
    """The usage of a whole answer: an object, or (Gemini's stream read whole) an array of them, whose last
    usage is the total."""
    if isinstance(data, list):
        found = [u for u in (usage_from_body(family, item) for item in data) if u is not None]
        return found[-1] if found else None
    return usage_from_body(family, data)


__all__ = [
    "COUNTED",
    "RESERVED",
    "UPSTREAM",
    "Usage",
    "count_tokens",
    "tokens_of",
    "usage_from_body",
    "usage_of_answer",
]
