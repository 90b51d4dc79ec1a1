"""Scripted upstream model APIs on 127.0.0.1 (OpenAI chat/responses/completions, Anthropic messages, Gemini),
each answering whole or streamed, with usage fields or without, misbehaving on demand, and keeping a bill:
what it charged each call it generated for, and which key the call came with (for gateway tests).

A call generates ``words`` (a token each), cut to the call's output limit, once per candidate; its prompt is
``prompt_tokens`` tokens, or (``prompt_tokens = None``) a token per 5 characters of the body it received. A
request's mode is ``mode``, or the body's ``x_mode`` field when it has one: ok, no-usage, cut, hang, garbage,
plain, rate-limited, error-usage, ndjson (a chat stream as NDJSON).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .scripted_llm import serve_in_thread


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


def openai_usage(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def openai_chunks(words: list[str], usage: dict[str, Any] | None, n: int = 1) -> list[bytes]:
    out = [
        sse({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": i, "delta": {"content": w}}]})
        for w in words
        for i in range(n)
    ]
    if usage is not None:
        out.append(sse({"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": usage}))
    return [*out, sse("[DONE]")]


def responses_chunks(rid: str, words: list[str], usage: dict[str, Any] | None) -> list[bytes]:
    out = [sse({"type": "response.created", "response": {"id": rid, "status": "in_progress"}}, "response.created")]
    out += [sse({"type": "response.output_text.delta", "delta": w}, "response.output_text.delta") for w in words]
    done: dict[str, Any] = {"id": rid, "status": "completed", **({"usage": usage} if usage else {})}
    return [*out, sse({"type": "response.completed", "response": done}, "response.completed")]


def anthropic_chunks(
    words: list[str], input_tokens: int, output_tokens: int, cached: int = 0, usage: bool = True
) -> list[bytes]:
    start: dict[str, Any] = {"id": "m1"}
    if usage:
        start["usage"] = {"input_tokens": input_tokens, "output_tokens": 1, "cache_read_input_tokens": cached}
    out = [sse({"type": "message_start", "message": start}, "message_start")]
    out += [
        sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}},
            "content_block_delta",
        )
        for w in words
    ]
    delta: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}
    if usage:
        delta["usage"] = {"output_tokens": output_tokens}
    return [*out, sse(delta, "message_delta"), sse({"type": "message_stop"}, "message_stop")]


def gemini_events(words: list[str], prompt: int, completion: int, usage: bool = True) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"candidates": [{"content": {"parts": [{"text": w}]}}]} for w in words[:-1]]
    last: dict[str, Any] = {
        "candidates": [{"content": {"parts": [{"text": words[-1] if words else ""}]}, "finishReason": "STOP"}]
    }
    if usage:
        last["usageMetadata"] = {"promptTokenCount": prompt, "candidatesTokenCount": completion}
    return [*out, last]


def gemini_chunks(words: list[str], prompt: int, completion: int, usage: bool = True) -> list[bytes]:
    return [sse(e) for e in gemini_events(words, prompt, completion, usage)]


def gemini_array(words: list[str], prompt: int, completion: int, usage: bool = True) -> list[bytes]:
    """Gemini's stream without alt=sse: one JSON array, an element at a time."""
    events = gemini_events(words, prompt, completion, usage)
    return [("[" if i == 0 else ",\r\n").encode() + json.dumps(e).encode() for i, e in enumerate(events)] + [b"]"]


def _limit(path: str, body: dict[str, Any]) -> tuple[int | None, int]:
    """The call's output limit per candidate and its number of candidates."""
    if ":" in path:
        config = body.get("generationConfig") or {}
        return config.get("maxOutputTokens"), int(config.get("candidateCount") or 1)
    fields = ("max_output_tokens",) if path.endswith("/responses") else ("max_completion_tokens", "max_tokens")
    limits = [body[f] for f in fields if isinstance(body.get(f), int)]
    return (min(limits) if limits else None), int(body.get("n") or 1)


class Upstream:
    """The scripted upstream's state: its mode, its text, and the log of requests and bills."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.words = [f"w{i} " for i in range(20)]
        self.prompt_tokens: int | None = 11
        self.cached_tokens = 2
        self.requests: list[dict[str, Any]] = []
        self.bills: list[dict[str, Any]] = []
        self.responses: dict[str, int] = {}
        self.delay_s = 0.0

    @property
    def billed(self) -> int:
        return sum(b["prompt_tokens"] + b["completion_tokens"] for b in self.bills)

    def _bill(self, request: dict[str, Any], prompt: int, completion: int) -> dict[str, Any]:
        marker = re.search(r"call-\d+", request["raw"])
        bill = {
            "path": request["path"],
            "key": request["key"],
            "marker": marker.group(0) if marker else None,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
        }
        self.bills.append(bill)
        return bill

    async def _stream(
        self, chunks: list[bytes], mode: str, request: dict[str, Any], prompt: int, per_chunk: list[int]
    ) -> AsyncIterator[bytes]:
        sent = 0
        try:
            for i, c in enumerate(chunks):
                if mode == "cut" and i == len(chunks) // 2:
                    raise RuntimeError("upstream cut the stream")  # uvicorn drops the connection mid-body
                if mode == "hang" and i == len(chunks) // 2:
                    await asyncio.sleep(3600)
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                yield c
                sent += per_chunk[i]
        finally:  # what it generated until the stream ended, however it ended
            self._bill(request, prompt, sent)

    def app(self) -> Starlette:
        async def handle(request: Request) -> Response:
            raw = (await request.body()).decode(errors="replace")
            body = json.loads(raw) if raw else {}
            headers = dict(request.headers)
            key = (
                headers.get("authorization", "").removeprefix("Bearer ")
                or headers.get("x-api-key")
                or headers.get("x-goog-api-key")
            )
            path = request.url.path
            rec = {
                "path": path,
                "headers": headers,
                "body": body,
                "query": dict(request.query_params),
                "raw": raw,
                "key": key,
            }
            self.requests.append(rec)
            mode = body.pop("x_mode", None) or self.mode if isinstance(body, dict) else self.mode
            if request.method == "GET":
                return JSONResponse({"object": "list", "data": [{"id": "m"}], "models": [{"name": "models/m"}]})
            if path.endswith(("/count_tokens", ":countTokens")):
                counted = math.ceil(len(raw) / 5)
                return JSONResponse({"input_tokens": counted} if "count_tokens" in path else {"totalTokens": counted})
            if mode == "rate-limited":
                return JSONResponse(
                    {"error": {"message": "slow down"}},
                    status_code=429,
                    headers={"retry-after": "7", "x-ratelimit-remaining-requests": "0"},
                )
            limit, n = _limit(path, body)
            words = self.words[:limit] if limit is not None else list(self.words)
            prompt = self.prompt_tokens if self.prompt_tokens is not None else math.ceil(len(raw) / 5)
            prompt += self.responses.get(body.get("previous_response_id") or "", 0)
            cached = min(self.cached_tokens, prompt)
            completion = n * len(words)
            usage = mode != "no-usage"
            if mode == "error-usage":  # an error whose body says what it billed, in the family's fields
                self._bill(rec, prompt, 0)
                if ":" in path:
                    billed: dict[str, Any] = {"usageMetadata": {"promptTokenCount": prompt}}
                elif path.endswith(("/responses", "/v1/messages")):
                    billed = {"usage": {"input_tokens": prompt, "output_tokens": 0}}
                else:
                    billed = {"usage": openai_usage(prompt, 0, 0)}
                return JSONResponse(
                    {"error": {"message": "refused after reading the prompt"}, **billed}, status_code=400
                )
            if mode == "hang" and not body.get("stream") and "stream" not in path:
                self._bill(rec, prompt, 0)
                await asyncio.sleep(3600)
            if mode in ("garbage", "plain"):
                self._bill(rec, prompt, completion)
                if mode == "plain":
                    return Response("".join(words).encode(), media_type="text/plain")
                return Response(b"\x00\xffnot json at all {", media_type="application/json")
            stream = body.get("stream") is True or path.endswith(":streamGenerateContent")
            if path.endswith("/responses"):
                rid = f"resp_{len(self.requests)}"
                self.responses[rid] = prompt + completion
                u = (
                    {
                        "input_tokens": prompt,
                        "output_tokens": completion,
                        "input_tokens_details": {"cached_tokens": cached},
                    }
                    if usage
                    else None
                )
                if stream:
                    chunks = responses_chunks(rid, words, u)
                    return self._streaming(chunks, mode, rec, prompt, [0] + [1] * len(words) + [0], "text/event-stream")
                self._bill(rec, prompt, completion)
                return JSONResponse(
                    {
                        "id": rid,
                        "object": "response",
                        "status": "completed",
                        "output": [{"type": "message", "content": [{"type": "output_text", "text": "".join(words)}]}],
                        **({"usage": u} if u else {}),
                    }
                )
            if path.endswith("/chat/completions") or path.endswith("/v1/completions"):
                u = openai_usage(prompt, completion, cached) if usage else None
                if stream:
                    per = [1] * (n * len(words)) + [0] * (2 if u else 1)
                    if mode == "ndjson":  # the same chunks, a JSON object a line
                        lines = [c[len(b"data: ") :].strip() + b"\n" for c in openai_chunks(words, u, n)][:-1]
                        return self._streaming(lines, mode, rec, prompt, per[:-1], "application/x-ndjson")
                    return self._streaming(openai_chunks(words, u, n), mode, rec, prompt, per, "text/event-stream")
                self._bill(rec, prompt, completion)
                choices = [{"index": i, "message": {"role": "assistant", "content": "".join(words)}} for i in range(n)]
                return JSONResponse({"choices": choices, **({"usage": u} if u else {})})
            if path.endswith("/v1/messages"):
                if stream:
                    chunks = anthropic_chunks(words, prompt - cached, completion, cached, usage)
                    return self._streaming(
                        chunks, mode, rec, prompt, [0] + [1] * len(words) + [0, 0], "text/event-stream"
                    )
                self._bill(rec, prompt, completion)
                return JSONResponse(
                    {
                        "id": "m1",
                        "type": "message",
                        "content": [{"type": "text", "text": "".join(words)}],
                        **(
                            {
                                "usage": {
                                    "input_tokens": prompt - cached,
                                    "output_tokens": completion,
                                    "cache_read_input_tokens": cached,
                                }
                            }
                            if usage
                            else {}
                        ),
                    }
                )
            if path.endswith(":streamGenerateContent"):
                per = [1] * len(words) if words else [0]
                if request.query_params.get("alt") == "sse":
                    return self._streaming(
                        gemini_chunks(words, prompt, completion, usage), mode, rec, prompt, per, "text/event-stream"
                    )
                return self._streaming(
                    gemini_array(words, prompt, completion, usage), mode, rec, prompt, [*per, 0], "application/json"
                )
            if path.endswith(":generateContent"):
                self._bill(rec, prompt, completion)
                text = "".join(words)
                return JSONResponse(
                    {
                        "candidates": [
                            {"content": {"parts": [{"text": text}]}, "finishReason": "STOP"} for _ in range(n)
                        ],
                        **(
                            {"usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": completion}}
                            if usage
                            else {}
                        ),
                    }
                )
            return JSONResponse({"error": "no such route"}, status_code=404)

        return Starlette(routes=[Route("/{path:path}", handle, methods=["GET", "POST"])])

    def _streaming(
        self, chunks: list[bytes], mode: str, rec: dict[str, Any], prompt: int, per_chunk: list[int], media_type: str
    ) -> StreamingResponse:
        return StreamingResponse(self._stream(chunks, mode, rec, prompt, per_chunk), media_type=media_type)


@contextmanager
def scripted_upstream() -> Iterator[tuple[str, Upstream]]:
    """A scripted upstream serving every family at ``http://127.0.0.1:PORT`` (OpenAI under ``/v1``)."""
    up = Upstream()
    with serve_in_thread(up.app()) as port:
        yield f"http://127.0.0.1:{port}", up
