"""What a call asks of the model, read from its body: whether it streams, its output limit per candidate and
how many candidates; and the limit the gateway writes into it.

The fields, by API: OpenAI chat ``max_completion_tokens``/``max_tokens`` and ``n``; responses
``max_output_tokens``; legacy completions ``max_tokens``, ``n``/``best_of`` and one answer per prompt;
Anthropic ``max_tokens``; Gemini ``generationConfig.maxOutputTokens`` and ``candidateCount`` (or their
snake_case spellings, which Google's parser also takes: a body giving both is refused). Parameters whose cost
the gateway cannot see are refused (``CallRefused``): a responses call run in the background or drawing on
a stored conversation or prompt, a Gemini call on cached content, a count-tokens body with generation
settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autorl.gateway.routes import COUNT, GENERATE, ApiRoute, CallRefused

#: what a count-tokens body may hold: it counts, it generates nothing
_COUNT_KEYS = {
    "anthropic": {"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"},
    "gemini": {"contents", "generateContentRequest"},
}
_GEMINI_COUNT_REQUEST = {
    "model",
    "contents",
    "systemInstruction",
    "system_instruction",
    "tools",
    "toolConfig",
    "tool_config",
}
_LIMIT_FIELDS = {
    "chat/completions": ("max_completion_tokens", "max_tokens"),
    "responses": ("max_output_tokens",),
    "completions": ("max_tokens",),
    "messages": ("max_tokens",),
}


@dataclass(frozen=True)
class CallShape:
    """What one call asks for: a stream or not, its output limit per candidate (None: it sets none), how many
    candidates, and the earlier answer it continues (responses API)."""

    stream: bool = False
    asked: int | None = None
    n: int = 1
    previous_response: str | None = None


def _count(payload: dict[str, Any], name: str, default: int | None) -> int | None:
    value = payload.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CallRefused(f"{name} must be a positive integer")
    return value


def _one_of(payload: dict[str, Any], camel: str, snake: str) -> tuple[str, Any]:
    if payload.get(camel) is not None and payload.get(snake) is not None:
        raise CallRefused(f"the body gives both {camel} and {snake}")
    return (snake, payload[snake]) if payload.get(snake) is not None else (camel, payload.get(camel))


def _gemini_config(payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    key, config = _one_of(payload, "generationConfig", "generation_config")
    if config is None:
        return key, {}
    if not isinstance(config, dict):
        raise CallRefused(f"{key} must be an object")
    return key, config


def _check_count(route: ApiRoute, payload: dict[str, Any]) -> None:
    extra = set(payload) - _COUNT_KEYS[route.family]
    inner = payload.get("generateContentRequest")
    if isinstance(inner, dict):
        extra |= set(inner) - _GEMINI_COUNT_REQUEST
    elif inner is not None:
        extra.add("generateContentRequest")
    if extra:
        raise CallRefused(
            f"{route.method} counts tokens and generates nothing: it does not take {', '.join(sorted(extra))}"
        )


def read_call(route: ApiRoute, payload: dict[str, Any]) -> CallShape:
    """The shape of a call to ``route`` with body ``payload``; ``CallRefused`` for one the gateway will not
    forward."""
    if route.kind == COUNT:
        _check_count(route, payload)
        return CallShape()
    if route.kind != GENERATE:
        return CallShape()
    stream = payload.get("stream", False)
    if not isinstance(stream, bool):
        raise CallRefused("stream must be true or false")
    if route.family == "gemini":
        if payload.get("cachedContent") is not None or payload.get("cached_content") is not None:
            raise CallRefused("cachedContent is not served: the gateway cannot see what it adds to the prompt")
        _, config = _gemini_config(payload)
        name, asked = _one_of(config, "maxOutputTokens", "max_output_tokens")
        n_name, n = _one_of(config, "candidateCount", "candidate_count")
        return CallShape(route.streams, _count({name: asked}, name, None), _count({n_name: n}, n_name, 1) or 1)
    fields = _LIMIT_FIELDS[route.method]
    limits = [_count(payload, f, None) for f in fields]
    asked = max((x for x in limits if x is not None), default=None)
    n = _count(payload, "n", 1) or 1
    previous = None
    if route.method == "completions":
        prompt = payload.get("prompt")
        prompts = len(prompt) if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else 1
        n = max(n, _count(payload, "best_of", 1) or 1) * max(prompts, 1)
    elif route.method == "responses":
        if payload.get("background"):
            raise CallRefused("background responses are not served: their answer would reach the agent unmetered")
        for name in ("conversation", "prompt"):
            if payload.get(name) is not None:
                raise CallRefused(f"{name} is not served: the gateway cannot see what it adds to the prompt")
        previous = payload.get("previous_response_id")
        if previous is not None and not isinstance(previous, str):
            raise CallRefused("previous_response_id must be a string")
    return CallShape(stream, asked, n, previous)


def write_limit(route: ApiRoute, payload: dict[str, Any], limit: int) -> None:
    """Set the call's output limit per candidate to ``limit`` in ``payload``, in the fields it uses (the API's
    own field when it sets none)."""
    if route.family == "gemini":
        key, config = _gemini_config(payload)
        name, _ = _one_of(config, "maxOutputTokens", "max_output_tokens")
        payload[key] = {**config, name: limit}
        return
    fields = _LIMIT_FIELDS[route.method]
    present = [f for f in fields if payload.get(f) is not None] or [fields[0]]
    for name in present:
        payload[name] = limit
    thinking = payload.get("thinking")
    if (
        route.family == "anthropic"
        and isinstance(thinking, dict)
        and isinstance(thinking.get("budget_tokens"), int)
        and thinking["budget_tokens"] >= limit
        and limit > 1024
    ):
        payload["thinking"] = {**thinking, "budget_tokens": limit - 1}  # it must stay below max_tokens


__all__ = ["CallShape", "read_call", "write_limit"]
