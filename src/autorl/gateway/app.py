"""The gateway over HTTP: ``create_app(config)`` returns a Starlette app.

Routes (the agent's base URLs point here; its key is the run's token):

- ``POST /openai/v1/chat/completions``, ``POST /openai/v1/responses``, ``POST /openai/v1/completions``,
  ``GET /openai/v1/models``
- ``POST /anthropic/v1/messages``, ``POST /anthropic/v1/messages/count_tokens``, ``GET /anthropic/v1/models``
- ``POST /gemini/{version}/models/{model}:generateContent`` (``:streamGenerateContent``, ``:countTokens``),
  ``GET /gemini/{version}/models``
- ``GET /-/health``; ``GET /-/usage`` and ``POST /-/close`` with the admin token.

Which method a request calls is decided by :mod:`.routes` from its decoded path alone; anything else is 404.
The token is taken from whichever header the family's clients send it in (``Authorization: Bearer``,
``x-api-key``, ``x-goog-api-key``, or Gemini's ``?key=``). Each call goes to the configured upstream with the
operator's key (:mod:`.forward`) and comes back metered (:mod:`.relay`). Refusals are JSON in the family's
error shape: 400 (a body or parameter the gateway will not forward), 401 (token), 404 (route or upstream not
configured), 409 (the run has ended), 413 (body too large), 429 (``llm_budget_exhausted``, or
``llm_budget_busy`` with ``Retry-After``), 502 (upstream unreachable or reset, or an answer that cannot be
metered), 504 (upstream timed out).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from autorl.decoys import VALUES, DecoyTokens
from autorl.gateway.calls import error_response
from autorl.gateway.config import GatewayConfig
from autorl.gateway.forward import MAX_REQUEST, Gateway, same, token_of
from autorl.gateway.routes import classify
from autorl.gateway.upstreams import Upstream


def create_app(
    config: GatewayConfig,
    upstreams: dict[str, Upstream] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Starlette:
    """The gateway's ASGI app for one run (``transport``: how it reaches the upstreams, default the network)."""
    gateway = Gateway(config, upstreams, transport)

    def family_route(family: str) -> Route:
        async def endpoint(request: Request) -> Response:
            rest = request.path_params["rest"]
            route = classify(family, request.method, rest)
            if route is None:
                return error_response(
                    family, 404, "not_found", f"the gateway does not serve {request.method} /{family}/{rest[:200]}"
                )
            return await gateway.forward(route, request)

        return Route(f"/{family}/{{rest:path}}", endpoint, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])

    def admin(request: Request) -> bool:
        return same(token_of(request), config.admin_token)

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "closed": gateway.closed, "families": sorted(gateway.upstreams)})

    async def usage(request: Request) -> Response:
        if not admin(request):
            return error_response("openai", 403, "forbidden", "the admin token is required")
        return JSONResponse(gateway.summary())

    async def close(request: Request) -> Response:
        if not admin(request):
            return error_response("openai", 403, "forbidden", "the admin token is required")
        return JSONResponse(gateway.close())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if not gateway.closed:  # stopped before its run closed it (its orchestrator lost): the totals stay
            with contextlib.suppress(OSError):
                gateway.close()
        await gateway.client.aclose()
        gateway.book.log.close()

    app = Starlette(
        routes=[
            family_route("openai"),
            family_route("anthropic"),
            family_route("gemini"),
            Route("/-/health", health),
            Route("/-/usage", usage),
            Route("/-/close", close, methods=["POST"]),
        ],
        lifespan=lifespan,
        middleware=[
            Middleware(
                DecoyTokens,
                tokens=config.decoy_tokens,
                folder=config.record_dir,
                service="gateway",
                body_rule=VALUES,
                max_body=MAX_REQUEST,
            )
        ],
    )
    app.state.gateway = gateway
    return app


__all__ = ["GatewayConfig", "create_app"]
