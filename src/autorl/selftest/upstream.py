"""The model API of ``autorl selftest``: an OpenAI-compatible chat-completions server on 127.0.0.1, in a thread of
the orchestrator, that keeps its own bill.

The run's gateway is pointed at it with a canary key that only the orchestrator knows. It serves a call only
with that key; it bills a prompt a token per 4 characters of the body it received (the gateway's own
estimate, so that the budget leaves no allowance: what it served must stay within it) and generates a token
per word up to the call's output limit (``NO_LIMIT_WORDS`` when the call sets none), once per candidate,
whole or streamed; a stream's bill is what it sent before it ended, however it ended. A request that did not
come from the run's gateway process (another peer, or no canary key) is a direct call: it is counted, and
answered 401 when it lacks the key.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["NO_LIMIT_WORDS", "Bill", "SelftestUpstream", "serve_upstream"]

#: what a call without an output limit is given (a gateway that writes none lets it run long)
NO_LIMIT_WORDS = 4096
#: what is charged when a call's limit is larger than any answer it could be given
_MAX_WORDS = 16384
_MAX_BODY = 4 << 20
_WORDS_PER_CHUNK = 32
_ANSWER_DELAY_S = 0.2  # long enough that calls sent together overlap in flight


@dataclass
class Bill:
    """What the upstream saw and served."""

    #: tokens generated or read for calls it served: prompt plus sent output
    tokens: int = 0
    calls: int = 0
    #: requests that did not come from the run's gateway: one line each
    direct: list[str] = field(default_factory=list)
    #: whether the gateway's own connections could be told apart (Linux ``/proc``); else the key decides
    peers_checked: bool = False


def _socket_inode(peer_port: int, local_port: int) -> int | None:
    """The inode of the loopback TCP socket that connects ``peer_port`` to ``local_port``, from the peer's side."""
    want_local, want_remote = f"0100007F:{peer_port:04X}", f"0100007F:{local_port:04X}"
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        cols = line.split()
        if len(cols) > 9 and cols[1] == want_local and cols[2] == want_remote:
            return int(cols[9])
    return None


def _process_sockets(marker: str) -> set[int] | None:
    """The socket inodes held by the gateway processes whose command line names ``marker`` (the run's scratch
    folder); None when there is no ``/proc`` to ask."""
    if not Path("/proc/self/fd").is_dir():
        return None
    found: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            if b"autorl.gateway.process" not in cmdline or marker.encode() not in cmdline:
                continue
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    found.add(int(target[8:-1]))
        except (OSError, ValueError):
            continue
    return found


class SelftestUpstream:
    """The server's state: its canary key, the scratch folder that names the run's gateway, and its bill."""

    def __init__(self, marker: str) -> None:
        self.key = f"sk-selftest-{secrets.token_hex(20)}"
        self.marker = marker
        self.port = 0
        self.bill = Bill()
        self._lock = threading.Lock()

    def _from_gateway(self, client: tuple[str, int] | None) -> bool | None:
        if client is None or client[0] != "127.0.0.1":
            return False
        inode = _socket_inode(client[1], self.port)
        held = _process_sockets(self.marker)
        if inode is None or held is None:
            return None
        return inode in held

    def _charge(self, tokens: int, *, call: bool = False) -> None:
        with self._lock:
            self.bill.tokens += tokens
            self.bill.calls += call

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body") or len(body) > _MAX_BODY:
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        keyed = secrets.compare_digest(headers.get("authorization", "").encode(), f"Bearer {self.key}".encode())
        peer = await asyncio.to_thread(self._from_gateway, scope.get("client"))
        self.bill.peers_checked = self.bill.peers_checked or peer is not None
        if not keyed or peer is False:
            client = scope.get("client") or ("?", 0)
            self.bill.direct.append(
                f"{scope['method']} {scope['path'][:80]} from {client[0]}:{client[1]} "
                f"({'with' if keyed else 'without'} the key)"
            )
        if not keyed:
            await _json(send, 401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
            return
        if scope["method"] != "POST" or not scope["path"].endswith("/chat/completions"):
            await _json(send, 404, {"error": {"message": "only chat completions are served here"}})
            return
        try:
            payload = json.loads(body)
            assert isinstance(payload, dict)
        except (ValueError, AssertionError):
            await _json(send, 400, {"error": {"message": "the body is not a JSON object"}})
            return
        await self._answer(payload, len(body), receive, send)

    async def _answer(self, payload: dict[str, Any], size: int, receive: Any, send: Any) -> None:
        prompt = math.ceil(size / 4)
        limits = [
            v
            for k in ("max_completion_tokens", "max_tokens")
            if isinstance(v := payload.get(k), int) and not isinstance(v, bool) and v > 0
        ]
        words = min(min(limits), _MAX_WORDS) if limits else NO_LIMIT_WORDS
        asked_n = payload.get("n")
        n = asked_n if isinstance(asked_n, int) and 0 < asked_n <= 16 else 1
        await asyncio.sleep(_ANSWER_DELAY_S)
        if payload.get("stream") is not True:
            self._charge(prompt + n * words, call=True)
            text = "t " * words
            await _json(
                send,
                200,
                {
                    "id": "c",
                    "object": "chat.completion",
                    "model": str(payload.get("model")),
                    "choices": [
                        {"index": i, "finish_reason": "length", "message": {"role": "assistant", "content": text}}
                        for i in range(n)
                    ],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": n * words},
                },
            )
            return
        self._charge(prompt, call=True)
        gone = asyncio.create_task(_disconnected(receive))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        try:
            async for chunk in self._chunks(words, n, prompt, gone):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            gone.cancel()

    async def _chunks(self, words: int, n: int, prompt: int, gone: asyncio.Task[None]) -> AsyncIterator[bytes]:
        sent = 0
        for i in range(n):
            for start in range(0, words, _WORDS_PER_CHUNK):
                if gone.done():  # the reader went away: nothing more is generated for it
                    return
                count = min(_WORDS_PER_CHUNK, words - start)
                delta = {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "choices": [{"index": i, "delta": {"content": "t " * count}}],
                }
                yield f"data: {json.dumps(delta)}\n\n".encode()
                sent += count
                self._charge(count)  # charged as sent: an abandoned stream was served what went out
                await asyncio.sleep(0.005)
        usage = {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": sent},
        }
        yield f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode()


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _json(send: Any, status: int, data: Any) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(data).encode()})


@contextmanager
def serve_upstream(marker: str) -> Iterator[SelftestUpstream]:
    """The upstream on a free port of 127.0.0.1, in a thread of this process, until the block ends."""
    import uvicorn

    upstream = SelftestUpstream(marker)
    sock = socket.create_server(("127.0.0.1", 0))
    upstream.port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(upstream, log_level="error", lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield upstream
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
