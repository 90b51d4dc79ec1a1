"""The capability URL: ``GRADING_SERVER_URL`` given to an agent is ``http://host:port/r/<agent token>``, so an
agent written for the reference harness (``POST $GRADING_SERVER_URL/submit {"model_path": ...}``, no header)
is authenticated by the path it was given. The token leaves the path before routing and before the access log
writes it; a wrong token in the path is refused like a wrong header."""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["PREFIX", "CapabilityPath", "capability_url", "has_capability"]

#: the path prefix of a capability URL, followed by the agent token
PREFIX = "/r/"
_KEY = "autorl_capability"


def capability_url(base_url: str, token: str) -> str:
    """The grader's URL for an agent: the run's agent token in the path."""
    return f"{base_url.rstrip('/')}{PREFIX}{token}"


def has_capability(scope: Scope) -> bool:
    """Whether the request came through a capability URL with the right token."""
    return bool(scope.get(_KEY))


class CapabilityPath:
    """ASGI middleware: ``/r/<token>/rest`` becomes ``/rest`` marked as the agent's when ``token`` is the agent's;
    any other ``/r/...`` path is answered 401 here."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope["path"]).startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        token, _, rest = str(scope["path"])[len(PREFIX) :].partition("/")
        # the path is rewritten in place: the access log then shows it without the token
        scope["path"] = "/" + rest
        scope["raw_path"] = scope["path"].encode()
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            body = json.dumps({"error": "invalid token in the URL"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        scope[_KEY] = True
        await self.app(scope, receive, send)
