"""The upstream's answer on its way back to the agent, metered: whole, or as it streams.

The response's content type says how it is read (:func:`.streams.shape_of`): a stream (server-sent events,
NDJSON, or JSON when the call streams: Gemini's array) passes chunk by chunk through a :class:`.streams.Tap`;
JSON is read whole. The upstream's usage fields settle the call's reservation (an error body's too); where
there are none the tokens are counted, except that a stream ending before its final figures (cut, or
abandoned by the agent) is charged its reservation when the budget set its limit: the upstream may have
generated up to it. An answer the gateway cannot meter (another content type, a body that is not the JSON it
claims, a stream that breaks its shape) does not reach the agent (502 ``unmeterable_response``; a stream is
cut there) and the call is charged its whole reservation. Status, body and rate-limit headers
(``Retry-After``, ``x-ratelimit-*``) otherwise come back as they were.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import anyio
import httpx
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from autorl.gateway.calls import Call, CallBook
from autorl.gateway.limits import CallShape
from autorl.gateway.record import BODY_LIMIT, cut
from autorl.gateway.streams import JSON, Tap, shape_of
from autorl.gateway.usage import COUNTED, RESERVED, Usage, count_tokens, usage_of_answer

MAX_RESPONSE = 64 * 1024 * 1024
#: response headers passed back to the agent (rate limits and retry hints among them)
_PASS_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-request-id", "request-id", "openai-processing-ms")
_PASS_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
_UNMETERABLE = "unmeterable_response"


def _passed_headers(headers: httpx.Headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() in _PASS_HEADERS or k.lower().startswith(_PASS_PREFIXES)}


class _Unmeterable(Exception):
    """A stream broke its shape: it is cut there."""


async def _close(upstream: httpx.Response) -> None:
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):  # even when the agent went away
        await upstream.aclose()


async def relay(book: CallBook, call: Call, shape: CallShape, upstream: httpx.Response) -> Response:
    """The agent's response to ``call``, whose upstream answered ``upstream`` (its head read)."""
    status = upstream.status_code
    kind = shape_of(upstream.headers.get("content-type", ""))
    call.record["status"] = status
    headers = _passed_headers(upstream.headers)
    if status < 400 and kind is not None and (kind != JSON or shape.stream or call.route.streams):
        call.record["stream"] = True
        stream = _Stream(book, call, Tap(call.route.family, kind), upstream)
        return _MeteredResponse(stream, status_code=status, headers=headers)
    call.record["stream"] = False
    try:
        content = b""
        async for piece in upstream.aiter_bytes():
            content += piece
            if len(content) > MAX_RESPONSE:
                raise httpx.DecodingError(f"response over {MAX_RESPONSE} bytes")
    except httpx.HTTPError as exc:  # the answer was given, and lost on its way: its worst case
        worst = call.reservation.worst_case() if call.reservation else None
        code, error = (504, "upstream_timeout") if isinstance(exc, httpx.TimeoutException) else (502, _UNMETERABLE)
        return book.failed(
            call,
            worst,
            code,
            error,
            f"the {call.route.family} upstream's answer was lost: {type(exc).__name__}: {str(exc)[:200]}",
        )
    finally:
        await _close(upstream)
    return _whole(book, call, status, kind, content, headers)


def _whole(
    book: CallBook, call: Call, status: int, kind: str | None, content: bytes, headers: dict[str, str]
) -> Response:
    family = call.route.family
    data: Any = None
    if kind == JSON:
        with contextlib.suppress(ValueError, RecursionError):
            data = json.loads(content)
    usage = usage_of_answer(family, data)
    if status >= 400:  # an error: billed only when its body says so
        book.account(call, usage, ok=False, error=f"upstream status {status}", response=cut(_shown(data, content)))
        return Response(content, status_code=status, headers=headers)
    if data is None and call.route.metered:
        reservation = call.reservation
        return book.failed(
            call,
            reservation.worst_case() if reservation else None,
            502,
            _UNMETERABLE,
            f"the {family} upstream answered with a body the gateway cannot meter "
            f"({headers.get('content-type', 'no content type')}); the call is charged its "
            "reservation",
        )
    if usage is None and call.route.metered:
        usage = Usage(book.counted_prompt(call).prompt_tokens, count_tokens(len(content)), 0, COUNTED)
    if call.route.method == "responses" and isinstance(data, dict) and isinstance(data.get("id"), str) and usage:
        book.responses[data["id"][:200]] = usage.total
    book.account(call, usage, ok=True, error=None, response=cut(_shown(data, content)))
    return Response(content, status_code=status, headers=headers)


def _shown(data: Any, content: bytes) -> Any:
    return data if data is not None else content[:BODY_LIMIT].decode(errors="replace")


class _Stream:
    """One streamed answer: passed on chunk by chunk, tapped, and settled once however it ends."""

    def __init__(self, book: CallBook, call: Call, tap: Tap, upstream: httpx.Response) -> None:
        self.book, self.call, self.tap, self.upstream = book, call, tap, upstream
        self.error: str | None = None
        self.done = False

    async def chunks(self) -> Any:
        try:
            async for chunk in self.upstream.aiter_bytes():
                self.tap.feed(chunk)
                if self.tap.broken:
                    raise _Unmeterable
                yield chunk
            self.tap.close()
            if not self.tap.finished and not self.tap.broken:
                self.error = "the stream ended before its final event"
        except _Unmeterable:
            self.error = "the stream broke its shape: the gateway cut it (it cannot meter the rest)"
            raise
        except httpx.HTTPError as exc:
            self.error = f"the stream broke off: {type(exc).__name__}: {str(exc)[:200]}"
            raise
        except BaseException as exc:  # the agent went away (cancelled) mid-stream
            self.error = self.error or f"the stream was not read to its end: {type(exc).__name__}"
            raise
        finally:
            self.finish()
            await _close(self.upstream)

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        tap, call = self.tap, self.call
        error = self.error or tap.error or ("the stream broke its shape" if tap.broken else None)
        res = call.reservation
        usage: Usage | None
        if tap.usage is not None and tap.finished and not tap.broken:
            usage = tap.usage
        elif res is not None and res.max_output is not None and (tap.broken or not tap.finished):
            # cut, abandoned or unreadable before its final figures: the upstream may have generated up to the
            # limit, so the budget is charged the worst case (the upstream's partial figures where larger)
            worst, partial = res.worst_case(), tap.usage or Usage()
            usage = Usage(
                max(worst.prompt_tokens, partial.prompt_tokens),
                max(worst.completion_tokens, partial.completion_tokens),
                partial.cached_tokens,
                RESERVED,
            )
        elif call.route.metered or tap.usage is not None:
            # no final figures: what came through, counted (and the upstream's partial figures where larger)
            partial = tap.usage or Usage()
            prompt = partial.prompt_tokens or self.book.counted_prompt(call).prompt_tokens
            usage = Usage(
                prompt, max(partial.completion_tokens, count_tokens(tap.text_chars)), partial.cached_tokens, COUNTED
            )
        else:
            usage = None
        if tap.response_id and usage is not None:
            self.book.responses[tap.response_id] = usage.total
        ok = error is None and self.upstream.status_code < 400
        self.book.account(
            call,
            usage,
            ok=ok,
            error=error or (None if ok else f"upstream status {self.upstream.status_code}"),
            response={"events": tap.events, "text": tap.streamed_text},
        )


class _MeteredResponse(StreamingResponse):
    """A streamed answer whose call is settled however the response ends, even if it never starts."""

    def __init__(self, stream: _Stream, status_code: int, headers: dict[str, str]) -> None:
        super().__init__(stream.chunks(), status_code=status_code, headers=headers)
        self._stream = stream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._stream.finish()
            await _close(self._stream.upstream)


__all__ = ["MAX_RESPONSE", "relay"]
