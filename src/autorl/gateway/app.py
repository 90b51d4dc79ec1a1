"""The gateway over HTTP: ``create_app(config)`` returns a Starlette app.

Routes (the agent's base URLs point here; its key is the run's token):

- ``POST /openai/v1/chat/completions``, ``POST /openai/v1/responses``, ``GET /openai/v1/models``
- ``POST /anthropic/v1/messages``, ``POST /anthropic/v1/messages/count_tokens``
- ``POST /gemini/{version}/models/{model}:generateContent`` (``:streamGenerateContent``, ``:countTokens``)
- ``GET /-/health``; ``GET /-/usage`` and ``POST /-/close`` with the admin token.

The token is taken from whichever header the family's clients send it in (``Authorization: Bearer``,
``x-api-key``, ``x-goog-api-key``, or Gemini's ``?key=``). Each request goes to the configured upstream with
the operator's key; the upstream's status, body and rate-limit headers (``Retry-After``, ``x-ratelimit-*``)
come back as they were, a stream chunk by chunk, unchanged. Refusals are JSON in the family's error shape:
401 (token), 404 (route or upstream not configured), 409 (the run has ended), 413 (body too large), 429
(``llm_budget_exhausted``), 502 (upstream unreachable or reset), 504 (upstream timed out).

About 350 lines: the routes of the three API families and their one forwarding path (whole and
streamed), kept together so that every family passes the same token, budget and record checks.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from autorl.gateway.metering import (
    BudgetSpent,
    Meter,
    StreamTap,
    Usage,
    count_tokens,
    load_prices,
    prompt_text,
    usage_from_body,
)
from autorl.gateway.record import BODY_LIMIT, SUMMARY_NAME, CallLog, cut
from autorl.gateway.upstreams import Upstream, upstreams_from_env

MAX_REQUEST = 32 * 1024 * 1024
MAX_RESPONSE = 64 * 1024 * 1024
#: response headers passed back to the agent (rate limits and retry hints among them)
_PASS_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-request-id", "request-id",
                 "openai-processing-ms")
_PASS_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
#: request headers passed on to the upstream
_FORWARD_HEADERS = ("content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta", "user-agent")
_ROUTES = {
    "openai": {("POST", "chat/completions"), ("POST", "responses"), ("GET", "models"), ("POST", "completions")},
    "anthropic": {("POST", "v1/messages"), ("POST", "v1/messages/count_tokens")},
}
_GEMINI_METHODS = ("generateContent", "streamGenerateContent", "countTokens")


@dataclass
class GatewayConfig:
    """What one run's gateway needs, saved as JSON for its process. Keys are not in it: the gateway reads
    them from its own environment (see :mod:`autorl.gateway.upstreams`)."""

    token: str
    admin_token: str
    record_dir: str
    budget_tokens: int | None = None
    budget_usd: float | None = None
    prices_path: str | None = None
    #: seconds without a byte from the upstream before a call fails (504, or a cut stream)
    timeout_s: float = 600.0
    connect_timeout_s: float = 30.0
    #: each family's upstream; None: from the environment
    upstreams: dict[str, dict[str, Any]] | None = field(default=None)

    def save(self, path: Path) -> None:
        import os

        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(asdict(self), fh)

    @classmethod
    def load(cls, path: Path) -> GatewayConfig:
        return cls(**json.loads(Path(path).read_text()))


def _error(family: str, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    if family == "gemini":
        body: dict[str, Any] = {"error": {"code": status, "message": message, "status": kind.upper()}}
    else:  # the shape OpenAI and Anthropic clients both read
        body = {"type": "error", "error": {"type": kind, "code": kind, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def _token_of(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return (request.headers.get("x-api-key") or request.headers.get("x-goog-api-key")
            or request.query_params.get("key") or "")


def _same(a: str, b: str) -> bool:
    return bool(a) and hmac.compare_digest(a.encode(), b.encode())


def _passed_headers(headers: httpx.Headers) -> dict[str, str]:
    return {k: v for k, v in headers.items()
            if k.lower() in _PASS_HEADERS or k.lower().startswith(_PASS_PREFIXES)}


class Gateway:
    """The state of one run's gateway: upstreams, meter, record, and whether the run is still open."""

    def __init__(self, config: GatewayConfig, upstreams: dict[str, Upstream] | None = None) -> None:
        self.config = config
        if upstreams is None and config.upstreams is not None:
            upstreams = {k: Upstream(**v) for k, v in config.upstreams.items()}
        self.upstreams = upstreams if upstreams is not None else upstreams_from_env()
        self.meter = Meter(load_prices(config.prices_path), config.budget_tokens, config.budget_usd)
        self.record_dir = Path(config.record_dir)
        self.log = CallLog(self.record_dir)
        self.closed = False
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64), trust_env=False)

    def summary(self) -> dict[str, Any]:
        return {**self.meter.summary(), "closed": self.closed,
                "upstreams": [u.describe() for u in self.upstreams.values()]}

    def close(self) -> dict[str, Any]:
        self.closed = True
        summary = self.summary()
        tmp = self.record_dir / f".{SUMMARY_NAME}.tmp"
        import os

        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(summary, fh)
        os.replace(tmp, self.record_dir / SUMMARY_NAME)
        return summary

    # -- one call ----------------------------------------------------------------------------------------
    def _record(self, call: dict[str, Any], started: float, **fields: Any) -> None:
        call.update(fields)
        call["latency_s"] = round(time.monotonic() - started, 6)
        self.log.write(call)

    def _upstream_request(self, family: str, up: Upstream, request: Request, path: str, body: bytes) -> httpx.Request:
        headers = {k: v for k, v in request.headers.items() if k.lower() in _FORWARD_HEADERS}
        headers["accept-encoding"] = "identity"
        params = httpx.QueryParams([(k, v) for k, v in request.query_params.multi_items() if k != "key"])
        if up.api_key:
            if family == "openai" or (family == "anthropic" and up.bearer):
                headers["authorization"] = f"Bearer {up.api_key}"
            elif family == "anthropic":
                headers["x-api-key"] = up.api_key
            else:
                headers["x-goog-api-key"] = up.api_key
        if family == "anthropic":
            headers.setdefault("anthropic-version", "2023-06-01")
        return self.client.build_request(request.method, f"{up.base_url}/{path}", params=params, headers=headers,
                                         content=body if request.method == "POST" else None)

    async def forward(self, family: str, path: str, request: Request) -> Response:
        started = time.monotonic()
        call: dict[str, Any] = {"id": uuid.uuid4().hex[:16], "time": time.time(), "family": family, "path": path,
                                "method": request.method}
        if not _same(_token_of(request), self.config.token):
            return _error(family, 401, "invalid_token", "this gateway needs the run's token (AUTORL_LLM_TOKEN)")
        if self.closed:
            return self._refuse(call, started, 409, "run_closed", "the run has ended: the gateway takes no more calls")
        up = self.upstreams.get(family)
        if up is None:
            return self._refuse(call, started, 404, "upstream_not_configured",
                                f"no {family} upstream is configured for this run (the operator sets its key "
                                "and base URL)")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_REQUEST:
            return self._refuse(call, started, 413, "request_too_large", f"request body over {MAX_REQUEST} bytes")
        body = b""
        async for piece in request.stream():
            body += piece
            if len(body) > MAX_REQUEST:
                return self._refuse(call, started, 413, "request_too_large", f"request body over {MAX_REQUEST} bytes")
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = None
        model = str(payload.get("model", "")) if isinstance(payload, dict) else ""
        if family == "gemini":
            model = path.split("models/", 1)[-1].split(":", 1)[0]
        call.update(model=model[:200], request=cut(payload if payload is not None else body.decode(errors="replace")))
        metered = request.method == "POST" and not path.endswith(("count_tokens", ":countTokens"))
        if metered:
            try:
                self.meter.check(model)
            except BudgetSpent as exc:
                return self._refuse(call, started, 429, "llm_budget_exhausted", str(exc))
            except LookupError as exc:
                return self._refuse(call, started, 400, "model_not_priced", str(exc))
        try:
            upstream = await self.client.send(self._upstream_request(family, up, request, path, body), stream=True)
        except httpx.TimeoutException as exc:
            return self._failed(call, started, family, payload, 504, "upstream_timeout",
                                f"the {family} upstream did not answer in time ({type(exc).__name__})", metered)
        except httpx.HTTPError as exc:
            return self._failed(call, started, family, payload, 502, "upstream_unreachable",
                                f"the {family} upstream failed: {type(exc).__name__}: {str(exc)[:200]}", metered)
        call.update(status=upstream.status_code, stream="text/event-stream" in upstream.headers.get("content-type", ""))
        headers = _passed_headers(upstream.headers)
        if call["stream"]:
            return StreamingResponse(self._stream(call, started, family, payload, upstream, metered),
                                     status_code=upstream.status_code, headers=headers)
        try:
            content = b""
            async for piece in upstream.aiter_bytes():
                content += piece
                if len(content) > MAX_RESPONSE:
                    raise httpx.DecodingError(f"response over {MAX_RESPONSE} bytes")
        except httpx.TimeoutException as exc:
            return self._failed(call, started, family, payload, 504, "upstream_timeout",
                                f"the {family} upstream stopped answering ({type(exc).__name__})", metered)
        except httpx.HTTPError as exc:
            return self._failed(call, started, family, payload, 502, "upstream_unreachable",
                                f"the {family} upstream failed mid-response: {type(exc).__name__}", metered)
        finally:
            await upstream.aclose()
        try:
            data = json.loads(content)
            error = None
        except ValueError:
            data, error = content[:BODY_LIMIT].decode(errors="replace"), "the upstream's response is not JSON"
        usage = usage_from_body(family, data) if upstream.status_code < 400 else None
        if usage is None and upstream.status_code < 400 and metered:
            usage = Usage(count_tokens(prompt_text(family, payload)), 0, 0, "counted")
        ok = upstream.status_code < 400 and error is None
        self._account(call, started, model, usage if metered else None, ok=ok,
                      error=error or (None if ok else f"upstream status {upstream.status_code}"), response=cut(data))
        return Response(content, status_code=upstream.status_code, headers=headers)

    async def _stream(self, call: dict[str, Any], started: float, family: str, payload: Any,
                      upstream: httpx.Response, metered: bool) -> AsyncIterator[bytes]:
        tap = StreamTap(family)
        error: str | None = None
        try:
            async for chunk in upstream.aiter_bytes():
                tap.feed(chunk)
                yield chunk
            tap.close()
            if not tap.finished:
                error = "the stream ended before its final event"
        except httpx.HTTPError as exc:
            error = f"the stream broke off: {type(exc).__name__}: {str(exc)[:200]}"
            raise
        except BaseException as exc:  # the agent went away (cancelled) mid-stream
            error = f"the stream was not read to its end: {type(exc).__name__}"
            raise
        finally:
            await upstream.aclose()
            error = error or tap.error
            usage = tap.usage
            if usage is None and metered:
                usage = Usage(count_tokens(prompt_text(family, payload)), count_tokens(tap.streamed_text), 0,
                              "counted")
            ok = error is None and upstream.status_code < 400
            self._account(call, started, str(call.get("model", "")), usage if metered else None, ok=ok,
                          error=error or (None if ok else f"upstream status {upstream.status_code}"),
                          response={"events": tap.events, "text": tap.streamed_text})

    def _account(self, call: dict[str, Any], started: float, model: str, usage: Usage | None, *, ok: bool,
                 error: str | None, response: Any) -> None:
        cost = self.meter.add(model, usage, failed=not ok) if usage is not None else None
        if usage is None and not ok:
            self.meter.failed += 1
        self._record(call, started, outcome="ok" if ok else "failed", error=error,
                     usage=None if usage is None else asdict(usage), cost_usd=cost, response=response)

    def _failed(self, call: dict[str, Any], started: float, family: str, payload: Any, status: int, kind: str,
                message: str, metered: bool) -> JSONResponse:
        # the prompt was sent: count it, as the upstream may bill it
        usage = Usage(count_tokens(prompt_text(family, payload)), 0, 0, "counted") if metered else None
        call["status"] = status
        self._account(call, started, str(call.get("model", "")), usage, ok=False, error=message, response=None)
        return _error(family, status, kind, message)

    def _refuse(self, call: dict[str, Any], started: float, status: int, kind: str, message: str) -> JSONResponse:
        self.meter.refused += 1
        self._record(call, started, status=status, outcome="refused", error=message, usage=None, cost_usd=None)
        return _error(str(call["family"]), status, kind, message)


def create_app(config: GatewayConfig, upstreams: dict[str, Upstream] | None = None) -> Starlette:
    """The gateway's ASGI app for one run."""
    gateway = Gateway(config, upstreams)

    async def openai(request: Request) -> Response:
        path = request.path_params["path"]
        if (request.method, path) not in _ROUTES["openai"]:
            return _error("openai", 404, "not_found", f"the gateway does not serve {request.method} /v1/{path}")
        return await gateway.forward("openai", path, request)

    async def anthropic(request: Request) -> Response:
        path = request.path_params["path"]
        if (request.method, path) not in _ROUTES["anthropic"]:
            return _error("anthropic", 404, "not_found", f"the gateway does not serve {request.method} /{path}")
        return await gateway.forward("anthropic", path, request)

    async def gemini(request: Request) -> Response:
        version, rest = request.path_params["version"], request.path_params["rest"]
        method = rest.rsplit(":", 1)[-1] if ":" in rest else ""
        if version not in ("v1", "v1beta", "v1alpha") or method not in _GEMINI_METHODS or "/" in rest:
            return _error("gemini", 404, "not_found", f"the gateway does not serve /{version}/models/{rest}")
        return await gateway.forward("gemini", f"{version}/models/{rest}", request)

    def admin(request: Request) -> bool:
        return _same(_token_of(request), config.admin_token)

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "closed": gateway.closed, "families": sorted(gateway.upstreams)})

    async def usage(request: Request) -> Response:
        if not admin(request):
            return _error("openai", 403, "forbidden", "the admin token is required")
        return JSONResponse(gateway.summary())

    async def close(request: Request) -> Response:
        if not admin(request):
            return _error("openai", 403, "forbidden", "the admin token is required")
        return JSONResponse(gateway.close())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if not gateway.closed:  # stopped before its run closed it (its orchestrator lost): the totals stay
            with contextlib.suppress(OSError):
                gateway.close()
        await gateway.client.aclose()
        gateway.log.close()

    app = Starlette(routes=[
        Route("/openai/v1/{path:path}", openai, methods=["GET", "POST"]),
        Route("/anthropic/{path:path}", anthropic, methods=["POST"]),
        Route("/gemini/{version}/models/{rest:path}", gemini, methods=["POST"]),
        Route("/-/health", health), Route("/-/usage", usage), Route("/-/close", close, methods=["POST"]),
    ], lifespan=lifespan)
    app.state.gateway = gateway
    return app
