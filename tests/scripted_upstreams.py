"""Scripted upstream model APIs on 127.0.0.1 (OpenAI chat/responses, Anthropic messages, Gemini), each
answering whole or streamed, with usage fields or without, and misbehaving on demand (for gateway tests)."""

from __future__ import annotations

import asyncio
import json
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


def openai_chunks(words: list[str], usage: dict[str, int] | None) -> list[bytes]:
    out = [sse({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": w}}]})
           for w in words]
    if usage is not None:
        out.append(sse({"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": usage}))
    return [*out, sse("[DONE]")]


def anthropic_chunks(words: list[str], input_tokens: int, output_tokens: int) -> list[bytes]:
    out = [sse({"type": "message_start", "message": {"id": "m1", "usage": {"input_tokens": input_tokens,
                "output_tokens": 1, "cache_read_input_tokens": 3}}}, "message_start")]
    out += [sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}},
                "content_block_delta") for w in words]
    out.append(sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": output_tokens}}, "message_delta"))
    return [*out, sse({"type": "message_stop"}, "message_stop")]


def gemini_chunks(words: list[str], prompt: int, completion: int) -> list[bytes]:
    out = [sse({"candidates": [{"content": {"parts": [{"text": w}]}}]}) for w in words[:-1]]
    out.append(sse({"candidates": [{"content": {"parts": [{"text": words[-1]}]}, "finishReason": "STOP"}],
                    "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": completion}}))
    return out


class Upstream:
    """What the scripted upstream does next: ``mode`` is one of ok, no-usage, cut, hang, reset, garbage,
    rate-limited, and ``words`` the text it streams."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.words = [f"w{i} " for i in range(20)]
        self.requests: list[dict[str, Any]] = []
        self.delay_s = 0.0

    async def _chunks(self, chunks: list[bytes]) -> AsyncIterator[bytes]:
        for i, c in enumerate(chunks):
            if self.mode == "cut" and i == len(chunks) // 2:
                raise RuntimeError("upstream cut the stream")  # uvicorn drops the connection mid-body
            if self.mode == "hang" and i == len(chunks) // 2:
                await asyncio.sleep(3600)
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            yield c

    def app(self) -> Starlette:
        async def handle(request: Request) -> Response:
            body = await request.json()
            self.requests.append({"path": request.url.path, "headers": dict(request.headers), "body": body,
                                  "query": dict(request.query_params)})
            if self.mode == "rate-limited":
                return JSONResponse({"error": {"message": "slow down"}}, status_code=429,
                                    headers={"retry-after": "7", "x-ratelimit-remaining-requests": "0"})
            if self.mode == "hang" and not body.get("stream") and "stream" not in request.url.path:
                await asyncio.sleep(3600)
            if self.mode == "garbage":
                return Response(b"\x00\xffnot json at all {", media_type="application/json")
            path = request.url.path
            if path.endswith("/chat/completions"):
                usage = None if self.mode == "no-usage" else {"prompt_tokens": 11, "completion_tokens": 7,
                                                              "prompt_tokens_details": {"cached_tokens": 2}}
                if body.get("stream"):
                    return StreamingResponse(self._chunks(openai_chunks(self.words, usage)),
                                             media_type="text/event-stream")
                out: dict[str, Any] = {"choices": [{"index": 0, "message": {"role": "assistant",
                                                                            "content": "".join(self.words)}}]}
                if usage:
                    out["usage"] = usage
                return JSONResponse(out)
            if path.endswith("/v1/messages"):
                if body.get("stream"):
                    return StreamingResponse(self._chunks(anthropic_chunks(self.words, 13, 9)),
                                             media_type="text/event-stream")
                return JSONResponse({"id": "m1", "content": [{"type": "text", "text": "hi"}],
                                     "usage": {"input_tokens": 13, "output_tokens": 9}})
            if path.endswith(":streamGenerateContent"):
                return StreamingResponse(self._chunks(gemini_chunks(self.words, 17, 5)),
                                         media_type="text/event-stream")
            if path.endswith(":generateContent"):
                return JSONResponse({"candidates": [{"content": {"parts": [{"text": "hi"}]}, "finishReason": "STOP"}],
                                     "usageMetadata": {"promptTokenCount": 17, "candidatesTokenCount": 5}})
            return JSONResponse({"error": "no such route"}, status_code=404)

        return Starlette(routes=[Route("/{path:path}", handle, methods=["POST"])])


@contextmanager
def scripted_upstream() -> Iterator[tuple[str, Upstream]]:
    """A scripted upstream serving every family at ``http://127.0.0.1:PORT`` (OpenAI under ``/v1``)."""
    up = Upstream()
    with serve_in_thread(up.app()) as port:
        yield f"http://127.0.0.1:{port}", up
