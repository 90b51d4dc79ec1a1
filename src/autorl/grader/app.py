"""The grading API over HTTP: ``create_app(grader)`` returns a Starlette app."""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from autorl.errors import AutorlError, GraderError, InvalidCheckpointError, UsageError
from autorl.grader.service import Grader, LimitReached, NotFound, QueueFull, RunClosed
from autorl.grader.validation import CheckpointTooLarge, PathRefused

log = logging.getLogger("autorl.grader")
MAX_BODY = 64 * 1024
Handler = Callable[[Request], Awaitable[Response]]


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _status_of(exc: AutorlError) -> int:
    if isinstance(exc, GraderError) and exc.status:
        return exc.status
    for kind, status in (
        (RunClosed, 409),
        (LimitReached, 429),
        (QueueFull, 503),
        (NotFound, 404),
        (CheckpointTooLarge, 413),
        (InvalidCheckpointError, 422),
        (PathRefused, 400),
        (UsageError, 400),
    ):
        if isinstance(exc, kind):
            return status
    return 400


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


def _only(data: dict[str, Any], required: set[str], optional: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    missing = required - data.keys()
    extra = data.keys() - required - optional
    if missing:
        raise UsageError(f"missing field(s): {', '.join(sorted(missing))}")
    if extra:
        raise UsageError(f"unknown field(s): {', '.join(sorted(extra))}")


def create_app(grader: Grader, *, manage_lifecycle: bool = True) -> Starlette:
    """The ASGI app. With ``manage_lifecycle`` the app starts and stops the grader's evaluation slots."""
    config = grader.config

    def auth(request: Request, admin: bool = False) -> None:
        header = request.headers.get("authorization", "")
        if not header.lower().startswith("bearer "):
            raise HTTPException(401, "missing bearer token (Authorization: Bearer $AUTORL_TOKEN)")
        token = header[7:].strip()
        is_admin = hmac.compare_digest(token, config.admin_token)
        if is_admin:
            return
        if not hmac.compare_digest(token, config.agent_token):
            raise HTTPException(401, "invalid token")
        if admin:
            raise HTTPException(403, "this endpoint needs the admin token")

    async def health(request: Request) -> Response:
        info = grader.time_info()
        return JSONResponse({"status": "ok", "task": config.task, "remaining_s": info["remaining_s"], "closed": info["closed"]})

    async def time_(request: Request) -> Response:
        auth(request)
        return JSONResponse(grader.time_info())

    async def submit(request: Request) -> Response:
        auth(request)
        wait = request.query_params.get("wait", "true").lower() not in ("false", "0", "no")
        data = await _json_body(request)
        _only(data, {"model_path"})
        sid = await anyio.to_thread.run_sync(grader.submit, data["model_path"])
        if not wait:
            return JSONResponse(grader.submission(sid), status_code=202)
        while True:
            record = grader.submission(sid)
            if record["status"] in ("done", "failed"):
                return JSONResponse(record)
            await anyio.sleep(0.1)

    async def submissions(request: Request) -> Response:
        auth(request)
        return JSONResponse(await anyio.to_thread.run_sync(grader.submissions))

    async def submission(request: Request) -> Response:
        auth(request)
        raw = request.path_params["sid"]
        if not raw.isdigit():
            raise NotFound(f"no submission {raw!r}")
        return JSONResponse(grader.submission(int(raw)))

    async def set_baseline(request: Request) -> Response:
        auth(request, admin=True)
        data = await _json_body(request)
        _only(data, {"score"})
        score = data["score"]
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise UsageError("score must be a number")
        grader.set_baseline(float(score))
        return JSONResponse({"baseline_score": float(score)})

    async def plugins(request: Request) -> Response:
        auth(request)
        from autorl.registry import plugin_summary

        return JSONResponse(plugin_summary())

    async def benchmarks(request: Request) -> Response:
        auth(request)
        from autorl.registry import get_benchmarks

        return JSONResponse(
            [{"name": r.name, "distribution": r.distribution, "version": getattr(r.cls, "version", "?")}
             for r in get_benchmarks().values()]
        )

    async def admin_state(request: Request) -> Response:
        auth(request, admin=True)
        return JSONResponse(await anyio.to_thread.run_sync(grader.state))

    async def admin_close(request: Request) -> Response:
        auth(request, admin=True)
        grader.close()
        return JSONResponse({"closed": True})

    async def admin_deadline(request: Request) -> Response:
        auth(request, admin=True)
        data = await _json_body(request)
        _only(data, {"deadline"})
        value = data["deadline"]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UsageError("deadline must be a number (Unix seconds)")
        grader.set_deadline(float(value))
        return JSONResponse(grader.time_info())

    async def admin_baseline(request: Request) -> Response:
        auth(request, admin=True)
        timeout = float(request.query_params.get("timeout", "3600"))
        base = await anyio.to_thread.run_sync(grader.wait_baseline, timeout)
        if base is None:
            return _error(503, grader.baseline_error or "the baseline is not evaluated yet")
        rec = base.get("record") or {}
        return JSONResponse({"score": base["score"], "source": base["source"], **{k: v for k, v in rec.items() if k != "item_scores"}})

    async def admin_test(request: Request) -> Response:
        auth(request, admin=True)
        data = await _json_body(request) if await request.body() else {}
        _only(data, set(), {"submission_id"})
        sid = data.get("submission_id")
        if sid is not None and (isinstance(sid, bool) or not isinstance(sid, int)):
            raise UsageError("submission_id must be an integer")
        return JSONResponse(await anyio.to_thread.run_sync(grader.evaluate_test, sid))

    async def on_autorl_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AutorlError)
        return _error(_status_of(exc), str(exc))

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _error(exc.status_code, str(exc.detail))

    async def on_crash(request: Request, exc: Exception) -> Response:
        log.exception("internal error on %s", request.url.path)
        return _error(500, "internal error in the grader; see its log")

    routes = [
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

    from collections.abc import AsyncIterator
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if manage_lifecycle:
            grader.start()
        try:
            yield
        finally:
            if manage_lifecycle:
                await anyio.to_thread.run_sync(grader.stop)

    return Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={AutorlError: on_autorl_error, HTTPException: on_http_error, Exception: on_crash},
    )
