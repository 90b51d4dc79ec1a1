"""A real OpenAI-compatible chat-completions server on 127.0.0.1 that replays a script (for agent tests)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def call(name: str, arguments: Any = None, call_id: str | None = None) -> dict[str, Any]:
    """One scripted tool call; ``arguments`` as a dict, or a raw (possibly malformed) string."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return {
        "id": call_id or f"call_{name}_{time.monotonic_ns()}",
        "type": "function",
        "function": {"name": name, "arguments": raw},
    }


def reply(
    *calls: dict[str, Any], content: str = "", prompt_tokens: int = 100, completion_tokens: int = 20
) -> dict[str, Any]:
    return {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if calls else "stop",
                "message": {"role": "assistant", "content": content, "tool_calls": list(calls) or None},
            }
        ],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }


@contextmanager
def serve_in_thread(app: Starlette) -> Iterator[int]:
    """A real uvicorn server for ``app`` on a free port of 127.0.0.1, in a thread of this process."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def scripted_server(script: list[Any]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Serve ``script`` in order: each entry is a reply dict, or an int HTTP status to fail with."""
    requests: list[dict[str, Any]] = []
    steps = iter(script)

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        requests.append(body)
        step = next(steps, None)
        if step is None:
            return JSONResponse(reply(call("finish", {"summary": "script ended"})))
        if isinstance(step, int):
            return JSONResponse({"error": {"message": "scripted failure"}}, status_code=step)
        return JSONResponse(step)

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    with serve_in_thread(app) as port:
        yield f"http://127.0.0.1:{port}/v1", requests
