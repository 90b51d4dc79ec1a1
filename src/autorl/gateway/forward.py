"""One call on its way through the gateway: the token, the run's state, the body and its limits, the
budget's reservation, the upstream request with the operator's key, and the answer, metered and recorded.

Order of checks: token (401), run ended (409), run closed for the budget (429, whatever the route), upstream
configured (404), body size (413) and shape (400: JSON object, limits, parameters whose cost cannot be seen;
tools the upstream runs itself when the agent has no network, :mod:`.tools`),
the reservation (429 ``llm_budget_exhausted``, 429 ``llm_budget_busy`` with ``Retry-After``, 400 for a USD
budget and an unpriced model). The body the upstream receives is the one the gateway parsed, serialised
again, with the output limit the reservation allows. The answer is metered by :mod:`.relay`.
"""

from __future__ import annotations

import hmac
import json
import os
from pathlib import Path
from typing import Any, NoReturn

import httpx
from starlette.requests import Request
from starlette.responses import Response

from autorl.gateway.budget import BudgetBusy, BudgetSpent, Meter
from autorl.gateway.calls import Call, CallBook, error_response
from autorl.gateway.config import GatewayConfig
from autorl.gateway.limits import CallShape, read_call, write_limit
from autorl.gateway.prices import load_prices
from autorl.gateway.record import SUMMARY_NAME, CallLog, cut
from autorl.gateway.relay import relay
from autorl.gateway.routes import ApiRoute, CallRefused, forwarded_query
from autorl.gateway.tools import server_tools
from autorl.gateway.upstreams import Upstream, upstreams_from_env
from autorl.gateway.usage import count_tokens

MAX_REQUEST = 32 * 1024 * 1024
#: request headers passed on to the upstream (the body's type is set by the gateway: JSON)
_FORWARD_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta", "user-agent")


def token_of(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return (
        request.headers.get("x-api-key")
        or request.headers.get("x-goog-api-key")
        or request.query_params.get("key")
        or ""
    )


def same(a: str, b: str) -> bool:
    return bool(a) and hmac.compare_digest(a.encode(), b.encode())


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def parse_body(body: bytes) -> dict[str, Any]:
    """The request's JSON object; ``CallRefused`` for anything else."""
    try:
        data = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise CallRefused("the request body is not JSON") from None
    if not isinstance(data, dict):
        raise CallRefused("the request body must be a JSON object")
    return data


def dump_body(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


class Gateway:
    """The state of one run's gateway: upstreams, meter, record, and whether the run is still open."""

    def __init__(
        self,
        config: GatewayConfig,
        upstreams: dict[str, Upstream] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        if upstreams is None and config.upstreams is not None:
            upstreams = {k: Upstream(**v) for k, v in config.upstreams.items()}
        self.upstreams = upstreams if upstreams is not None else upstreams_from_env()
        meter = Meter(
            load_prices(config.prices_path),
            config.budget_tokens,
            config.budget_usd,
            default_max_output=config.default_max_output,
            min_output=config.min_output,
        )
        self.record_dir = Path(config.record_dir)
        self.book = CallBook(meter, CallLog(self.record_dir))
        self.meter = meter
        self.closed = False
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            transport=transport,
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
            trust_env=False,
        )

    def summary(self) -> dict[str, Any]:
        return {
            **self.meter.summary(),
            "closed": self.closed,
            "upstreams": [u.describe() for u in self.upstreams.values()],
        }

    def close(self) -> dict[str, Any]:
        self.closed = True
        summary = self.summary()
        tmp = self.record_dir / f".{SUMMARY_NAME}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(summary, fh)
        os.replace(tmp, self.record_dir / SUMMARY_NAME)
        return summary

    async def forward(self, route: ApiRoute, request: Request) -> Response:
        call = Call(route, request.method)
        if not same(token_of(request), self.config.token):
            return error_response(
                route.family, 401, "invalid_token", "this gateway needs the run's token (AUTORL_LLM_TOKEN)"
            )
        if self.closed:
            return self.book.refuse(call, 409, "run_closed", "the run has ended: the gateway takes no more calls")
        if self.meter.exhausted:
            return self.book.refuse(call, 429, "llm_budget_exhausted", self.meter.exhausted)
        up = self.upstreams.get(route.family)
        if up is None:
            return self.book.refuse(
                call,
                404,
                "upstream_not_configured",
                f"no {route.family} upstream is configured for this run (the operator sets its key and base URL)",
            )
        body = await _read_body(request)
        if body is None:
            return self.book.refuse(call, 413, "request_too_large", f"request body over {MAX_REQUEST} bytes")
        try:
            payload = parse_body(body) if route.http_method == "POST" else None
            shape = read_call(route, payload) if payload is not None else CallShape()
            query = forwarded_query(route, request.query_params.multi_items())
            earlier = self._earlier(shape)
        except CallRefused as exc:
            call.record.update(request=cut(body[:4096].decode(errors="replace")))
            return self.book.refuse(call, 400, "invalid_request", str(exc))
        model = route.model or (str(payload.get("model", "")) if payload is not None else "")
        call.record.update(model=model[:200], request=cut(payload))
        if not self.config.server_tools and (asked := server_tools(route, payload)):
            return self.book.refuse(
                call,
                400,
                "server_tool_refused",
                f"the run's agent has no network, and {', '.join(asked)} would give it one "
                "through the upstream: use tools the agent runs itself",
            )
        if route.metered and payload is not None and shape.asked is None and self.meter.limited:
            # the limit the reservation may write, at its largest, is counted in the prompt: the body the
            # upstream receives is never longer than the one estimated
            write_limit(route, payload, self.meter.default_max_output)
        content = dump_body(payload) if payload is not None else None
        if route.metered and payload is not None and content is not None:
            call.estimate = count_tokens(len(content)) + earlier
            try:
                call.reservation = self.meter.reserve(call.model, call.estimate, shape.asked, shape.n)
            except BudgetSpent as exc:
                return self.book.refuse(call, 429, "llm_budget_exhausted", str(exc))
            except BudgetBusy as exc:
                return self.book.refuse(call, 429, "llm_budget_busy", str(exc), headers={"retry-after": "1"})
            except LookupError as exc:
                return self.book.refuse(call, 400, "model_not_priced", str(exc))
            res = call.reservation
            if res.max_output is not None and res.max_output != shape.asked:
                write_limit(route, payload, res.max_output)
                content = dump_body(payload)
            call.record["reserved"] = {
                "tokens": res.tokens,
                "usd": res.usd,
                "asked": shape.asked,
                "max_output": res.max_output,
            }
        try:
            upstream = await self.client.send(self._upstream_request(route, up, request, query, content), stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:  # nothing was sent
            return self.book.failed(
                call,
                None,
                502,
                "upstream_unreachable",
                f"the {route.family} upstream failed: {type(exc).__name__}: {str(exc)[:200]}",
            )
        except httpx.TimeoutException as exc:  # sent, and perhaps generating still: the worst case
            worst = call.reservation.worst_case() if call.reservation else None
            return self.book.failed(
                call,
                worst,
                504,
                "upstream_timeout",
                f"the {route.family} upstream did not answer in time ({type(exc).__name__})",
            )
        except httpx.HTTPError as exc:  # sent, and the connection broke: the prompt may be billed
            return self.book.failed(
                call,
                self.book.counted_prompt(call) if route.metered else None,
                502,
                "upstream_unreachable",
                f"the {route.family} upstream failed: {type(exc).__name__}: {str(exc)[:200]}",
            )
        return await relay(self.book, call, shape, upstream)

    def _earlier(self, shape: CallShape) -> int:
        """The tokens of the earlier answer a responses-API call continues (the upstream adds them to its prompt)."""
        if shape.previous_response is None:
            return 0
        if shape.previous_response not in self.book.responses:
            raise CallRefused("previous_response_id must name an answer given through this run's gateway")
        return self.book.responses[shape.previous_response]

    def _upstream_request(
        self, route: ApiRoute, up: Upstream, request: Request, query: list[tuple[str, str]], content: bytes | None
    ) -> httpx.Request:
        headers = {k: v for k, v in request.headers.items() if k.lower() in _FORWARD_HEADERS}
        headers["accept-encoding"] = "identity"
        if content is not None:
            headers["content-type"] = "application/json"
        if up.api_key:
            if route.family == "openai" or (route.family == "anthropic" and up.bearer):
                headers["authorization"] = f"Bearer {up.api_key}"
            elif route.family == "anthropic":
                headers["x-api-key"] = up.api_key
            else:
                headers["x-goog-api-key"] = up.api_key
        if route.family == "anthropic":
            headers.setdefault("anthropic-version", "2023-06-01")
        return self.client.build_request(
            route.http_method,
            f"{up.base_url}/{route.upstream_path}",
            params=tuple(query),
            headers=headers,
            content=content,
        )


async def _read_body(request: Request) -> bytes | None:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_REQUEST:
        return None
    body = b""
    async for piece in request.stream():
        body += piece
        if len(body) > MAX_REQUEST:
            return None
    return body


__all__ = ["MAX_REQUEST", "Call", "Gateway", "error_response", "same", "token_of"]
