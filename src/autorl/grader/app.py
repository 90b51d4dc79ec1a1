"""The grading API over HTTP: ``create_app(grader)`` returns a Starlette app; its routes are the handlers below.

Each handler reaches the :class:`~autorl.grader.core.Grader` through ``request.app.state.grader``. An
:class:`~autorl.errors.AutorlError` becomes ``{"error": message}`` with the error's HTTP status
(:func:`autorl.errors.http_status`). The grader does not look names up: the server's entry point hands
``create_app`` the plugin and benchmark listings that ``/-/plugins`` and ``/-/benchmarks`` serve.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from autorl.decoys import ANYWHERE, DecoyTokens
from autorl.errors import AutorlError, NotFound, UsageError, http_status
from autorl.grader import records
from autorl.grader.capability import CapabilityPath, has_capability
from autorl.grader.core import Grader
from autorl.grader.store import DONE, FAILED

log = logging.getLogger("autorl.grader")
MAX_BODY = 64 * 1024
#: how often a waiting ``POST /submit`` reads its submission's status
POLL_S = 0.1
#: a listing served as JSON (``/-/plugins``, ``/-/benchmarks``)
Listing = Callable[[], list[dict[str, Any]]]


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _grader(request: Request) -> Grader:
    grader: Grader = request.app.state.grader
    return grader


def _auth(request: Request, admin: bool = False) -> None:
    """Let the request through with the agent token (or the admin token); ``admin``: the admin token only."""
    config = _grader(request).config
    header = request.headers.get("authorization", "")
    if not header and has_capability(request.scope):  # the agent's own URL (the reference harness's contract)
        if admin:
            raise HTTPException(403, "this endpoint needs the admin token")
        return
    if not header.lower().startswith("bearer "):
        raise HTTPException(401, "missing bearer token (Authorization: Bearer $AUTORL_TOKEN)")
    token = header[7:].strip()
    if hmac.compare_digest(token, config.admin_token):
        return
    if not hmac.compare_digest(token, config.agent_token):
        raise HTTPException(401, "invalid token")
    if admin:
        raise HTTPException(403, "this endpoint needs the admin token")


async def _json_body(request: Request) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise HTTPException(413, f"request body is larger than {MAX_BODY} bytes")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise HTTPException(413, f"request body is larger than {MAX_BODY} bytes")
    try:
        data = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError):
        raise UsageError("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise UsageError("the request body must be a JSON object")
    return data


def _only(data: dict[str, Any], required: set[str], optional: frozenset[str] = frozenset()) -> None:
    missing = required - data.keys()
    extra = data.keys() - required - optional
    if missing:
        raise UsageError(f"missing field(s): {', '.join(sorted(missing))}")
    if extra:
        raise UsageError(f"unknown field(s): {', '.join(sorted(extra))}")


async def _number_body(request: Request, field: str, unit: str = "") -> float:
    """The number of a body that is ``{field: number}`` and nothing else."""
    data = await _json_body(request)
    _only(data, {field})
    value = data[field]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{field} must be a number{unit}")
    return float(value)


async def health(request: Request) -> Response:
    """``GET /health``: liveness, task, time left (no token needed)."""
    grader = _grader(request)
    info = grader.time_info()
    return JSONResponse(
        {"status": "ok", "task": grader.config.task, "remaining_s": info["remaining_s"], "closed": info["closed"]}
    )


async def time_(request: Request) -> Response:
    """``GET /time``: deadline, now, remaining."""
    _auth(request)
    return JSONResponse(_grader(request).time_info())


async def submit(request: Request) -> Response:
    """``POST /submit {"model_path"}``: the record once scored; with ``?wait=false`` 202 and the queued record."""
    _auth(request)
    grader = _grader(request)
    wait = request.query_params.get("wait", "true").lower() not in ("false", "0", "no")
    data = await _json_body(request)
    _only(data, {"model_path"})
    sid = await anyio.to_thread.run_sync(grader.submit, data["model_path"])
    if not wait:
        return JSONResponse(grader.submission(sid), status_code=202)
    while grader.status(sid) not in (DONE, FAILED):  # one row read per poll; the record is built once
        await anyio.sleep(POLL_S)
    return JSONResponse(await anyio.to_thread.run_sync(grader.submission, sid))


async def submissions(request: Request) -> Response:
    """``GET /submissions``: the agent's records."""
    _auth(request)
    return JSONResponse(await anyio.to_thread.run_sync(_grader(request).submissions))


async def submission(request: Request) -> Response:
    """``GET /submissions/{sid}``: one record."""
    _auth(request)
    raw = request.path_params["sid"]
    if not raw.isdigit():
        raise NotFound(f"no submission {raw!r}")
    return JSONResponse(_grader(request).submission(int(raw)))


async def set_baseline(request: Request) -> Response:
    """``POST /set_baseline {"score"}`` (admin): the dev baseline's score, set by hand."""
    _auth(request, admin=True)
    score = await _number_body(request, "score")
    _grader(request).set_baseline(score)
    return JSONResponse({"baseline_score": score})


async def plugins(request: Request) -> Response:
    """``GET /-/plugins``: the installed plugins and what each registers."""
    _auth(request)
    listing: Listing = request.app.state.plugins
    return JSONResponse(listing())


async def benchmarks(request: Request) -> Response:
    """``GET /-/benchmarks``: the installed benchmarks with their distribution and version."""
    _auth(request)
    listing: Listing = request.app.state.benchmarks
    return JSONResponse(listing())


async def admin_state(request: Request) -> Response:
    """``GET /admin/state`` (admin): everything the orchestrator collects."""
    _auth(request, admin=True)
    return JSONResponse(await anyio.to_thread.run_sync(_grader(request).state))


async def admin_close(request: Request) -> Response:
    """``POST /admin/close`` (admin): take no more submissions."""
    _auth(request, admin=True)
    _grader(request).close()
    return JSONResponse({"closed": True})


async def admin_deadline(request: Request) -> Response:
    """``POST /admin/deadline {"deadline"}`` (admin): set the deadline (Unix seconds)."""
    _auth(request, admin=True)
    deadline = await _number_body(request, "deadline", " (Unix seconds)")
    grader = _grader(request)
    grader.set_deadline(deadline)
    return JSONResponse(grader.time_info())


async def admin_baseline(request: Request) -> Response:
    """``GET /admin/baseline?timeout=S`` (admin): the dev baseline once evaluated (503 if it is not)."""
    _auth(request, admin=True)
    grader = _grader(request)
    timeout = float(request.query_params.get("timeout", "3600"))
    base = await anyio.to_thread.run_sync(grader.wait_baseline, timeout)
    if base is None:
        return _error(503, grader.baseline_error or "the baseline is not evaluated yet")
    return JSONResponse(records.baseline_public(base))


async def admin_test(request: Request) -> Response:
    """``POST /admin/test {"submission_id"?}`` (admin): score a submission (default: best on dev) on test, once."""
    _auth(request, admin=True)
    data = await _json_body(request) if await request.body() else {}
    _only(data, set(), frozenset({"submission_id"}))
    sid = data.get("submission_id")
    if sid is not None and (isinstance(sid, bool) or not isinstance(sid, int)):
        raise UsageError("submission_id must be an integer")
    return JSONResponse(await anyio.to_thread.run_sync(_grader(request).evaluate_test, sid))


async def on_autorl_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AutorlError)
    return _error(http_status(exc), str(exc))


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, str(exc.detail))


async def on_crash(request: Request, exc: Exception) -> Response:
    log.exception("internal error on %s", request.url.path)
    return _error(500, "internal error in the grader; see its log")


ROUTES = [
    Route("/health", health),
    Route("/time", time_),
    Route("/submit", submit, methods=["POST"]),
    Route("/submissions", submissions),
    Route("/submissions/{sid}", submission),
    Route("/set_baseline", set_baseline, methods=["POST"]),
    Route("/-/plugins", plugins),
    Route("/-/benchmarks", benchmarks),
    Route("/admin/state", admin_state),
    Route("/admin/close", admin_close, methods=["POST"]),
    Route("/admin/baseline", admin_baseline),
    Route("/admin/deadline", admin_deadline, methods=["POST"]),
    Route("/admin/test", admin_test, methods=["POST"]),
]


def _nothing() -> list[dict[str, Any]]:
    return []


def create_app(
    grader: Grader, *, plugins: Listing = _nothing, benchmarks: Listing = _nothing, manage_lifecycle: bool = True
) -> Starlette:
    """The ASGI app over ``grader``. ``plugins`` and ``benchmarks`` give what ``/-/plugins`` and
    ``/-/benchmarks`` list (default: nothing). With ``manage_lifecycle`` the app starts and stops the grader's
    evaluation slots."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if manage_lifecycle:
            grader.start()
        try:
            yield
        finally:
            if manage_lifecycle:
                await anyio.to_thread.run_sync(grader.stop)

    app = Starlette(
        routes=ROUTES,
        lifespan=lifespan,
        # outermost, the decoy tokens' notes: a token in a capability path is seen before the path is rewritten
        middleware=[
            Middleware(
                DecoyTokens,
                tokens=grader.config.decoy_tokens,
                folder=grader.config.store_dir,
                service="grader",
                body_rule=ANYWHERE,
                max_body=MAX_BODY,
            ),
            Middleware(CapabilityPath, token=grader.config.agent_token),
        ],
        exception_handlers={AutorlError: on_autorl_error, HTTPException: on_http_error, Exception: on_crash},
    )
    app.state.grader = grader
    app.state.plugins = plugins
    app.state.benchmarks = benchmarks
    return app
