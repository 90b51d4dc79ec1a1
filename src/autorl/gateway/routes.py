"""Which API method a request calls, from its parsed, normalised path; and the upstream path it goes to.

The path is taken as the server decoded it (percent-escapes resolved once); the query and fragment are never
part of it. A path must be made of plain characters (letters, digits, ``.``, ``_``, ``-``, ``:`` and ``/``
between non-empty segments), and the method is its last segment, matched exactly: a ``?``, ``#`` or ``%``
left in the decoded path, an empty or dot segment, an unknown method, all get 404. The upstream path is
rebuilt from the parsed parts, never copied from the request, so that the upstream is asked for exactly the
method that was classified. Only the methods marked ``count`` and ``list`` are free; every other is metered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

GENERATE, COUNT, LIST = "generate", "count", "list"
_SAFE = re.compile(r"[A-Za-z0-9._:-]+(/[A-Za-z0-9._:-]+)*")
#: (family, HTTP method, path under the family's prefix) -> (API method, kind, upstream path)
_FIXED = {
    ("openai", "POST", "v1/chat/completions"): ("chat/completions", GENERATE, "chat/completions"),
    ("openai", "POST", "v1/responses"): ("responses", GENERATE, "responses"),
    ("openai", "POST", "v1/completions"): ("completions", GENERATE, "completions"),
    ("openai", "GET", "v1/models"): ("models", LIST, "models"),
    ("anthropic", "POST", "v1/messages"): ("messages", GENERATE, "v1/messages"),
    ("anthropic", "POST", "v1/messages/count_tokens"): ("count_tokens", COUNT, "v1/messages/count_tokens"),
    ("anthropic", "GET", "v1/models"): ("models", LIST, "v1/models"),
}
_GEMINI_VERSIONS = ("v1", "v1beta", "v1alpha")
_GEMINI_CALL = re.compile(
    r"(?P<version>v1|v1beta|v1alpha)/models/(?P<model>[A-Za-z0-9][A-Za-z0-9._-]*)"
    r":(?P<method>generateContent|streamGenerateContent|countTokens)"
)
_GEMINI_KIND = {"generateContent": GENERATE, "streamGenerateContent": GENERATE, "countTokens": COUNT}
#: query parameters passed on, by family, with the values allowed (None: any); every other one is dropped
_QUERY: dict[str, dict[str, tuple[str, ...]]] = {
    "gemini": {"alt": ("sse", "json")},
    "anthropic": {"beta": ("true",)},
    "openai": {},
}


class CallRefused(Exception):
    """A request the gateway will not forward: its message says why (HTTP 400)."""


@dataclass(frozen=True)
class ApiRoute:
    """One classified request: its family, its API method, whether it is metered, and where it goes."""

    family: str
    http_method: str
    method: str
    kind: str
    upstream_path: str
    #: the model named by the path (Gemini), else ""
    model: str = ""

    @property
    def metered(self) -> bool:
        return self.kind == GENERATE

    @property
    def streams(self) -> bool:
        """Whether the method answers as a stream whatever the body says (Gemini's streamGenerateContent)."""
        return self.method == "streamGenerateContent"


def classify(family: str, http_method: str, path: str) -> ApiRoute | None:
    """The route of ``path`` (the decoded path under ``/<family>/``), or None when the gateway does not
    serve it."""
    if not _SAFE.fullmatch(path) or any(seg in (".", "..") for seg in path.split("/")):
        return None
    fixed = _FIXED.get((family, http_method, path))
    if fixed is not None:
        return ApiRoute(family, http_method, *fixed)
    if family != "gemini":
        return None
    if (
        http_method == "GET"
        and path.count("/") == 1
        and path.endswith("/models")
        and path.split("/", 1)[0] in _GEMINI_VERSIONS
    ):
        return ApiRoute(family, http_method, "models", LIST, path)
    call = _GEMINI_CALL.fullmatch(path)
    if call is None or http_method != "POST":
        return None
    method = call["method"]
    return ApiRoute(
        family,
        http_method,
        method,
        _GEMINI_KIND[method],
        f"{call['version']}/models/{call['model']}:{method}",
        model=call["model"],
    )


def forwarded_query(route: ApiRoute, params: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The query parameters passed on to the upstream (the rest are dropped, the agent's ``key`` among them);
    ``CallRefused`` for a value the gateway cannot meter (Gemini's ``alt`` other than ``sse`` or ``json``)."""
    allowed = _QUERY[route.family]
    out: list[tuple[str, str]] = []
    for name, value in params:
        if name not in allowed:
            continue
        if value not in allowed[name]:
            raise CallRefused(
                f"the gateway does not pass {name}={value[:40]!r} (it passes "
                f"{name}={' or '.join(allowed[name])}): it could not meter the answer"
            )
        if any(k == name for k, _ in out):
            raise CallRefused(f"the query gives {name} twice")
        out.append((name, value))
    return out


__all__ = ["COUNT", "GENERATE", "LIST", "ApiRoute", "CallRefused", "classify", "forwarded_query"]
