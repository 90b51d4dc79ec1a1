"""The LLM gateway's added latency per streamed call, and 50 concurrent streams through it.

    python bench/gateway_latency.py [--calls 200] [--concurrent 50] [--chunks 40]

A scripted OpenAI-compatible upstream (uvicorn, 127.0.0.1) streams ``--chunks`` numbered SSE chunks; the
gateway (its real app, in its own uvicorn process, as a run starts it) forwards them. Each call is timed
from the request to the last byte, alternately direct and through the gateway, so that both see the same
machine load; the figure is the median of the per-pair differences. Then ``--concurrent`` streams at once
through the gateway: every stream must arrive complete and in order, byte for byte as the upstream sent it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent


def chunks(n: int, stream_id: str) -> list[bytes]:
    out = [f"data: {json.dumps({'id': stream_id, 'choices': [{'index': 0, 'delta': {'content': f'{i} '}}]})}\n\n"
           .encode() for i in range(n)]
    usage = {"prompt_tokens": 10, "completion_tokens": n}
    return [*out, f"data: {json.dumps({'id': stream_id, 'choices': [], 'usage': usage})}\n\n".encode(),
            b"data: [DONE]\n\n"]


UPSTREAM = '''
import json, sys
import uvicorn
from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route
sys.path.insert(0, {here!r})
from gateway_latency import chunks

async def completions(request):
    body = await request.json()
    async def gen():
        for c in chunks(int(body.get("n", 40)), str(body.get("sid", "s"))):
            yield c
    return StreamingResponse(gen(), media_type="text/event-stream")

app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(url: str) -> None:
    for _ in range(300):
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


async def one(client: httpx.AsyncClient, url: str, headers: dict[str, str], n: int, sid: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    body = b""
    async with client.stream("POST", url, headers=headers,
                             json={"model": "gpt-4o", "messages": [], "stream": True, "n": n, "sid": sid}) as resp:
        async for piece in resp.aiter_raw():
            body += piece
    return time.perf_counter() - started, body


async def main_async(args: argparse.Namespace, direct: str, gw: str, token: str) -> dict[str, object]:
    auth = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=60, limits=limits, trust_env=False) as client:
        for _ in range(10):  # warm both paths
            await one(client, direct, {}, args.chunks, "w")
            await one(client, gw, auth, args.chunks, "w")
        added, d_times, g_times = [], [], []
        for i in range(args.calls):
            d, body_d = await one(client, direct, {}, args.chunks, f"s{i}")
            g, body_g = await one(client, gw, auth, args.chunks, f"s{i}")
            assert body_d == body_g == b"".join(chunks(args.chunks, f"s{i}")), "a stream changed on its way"
            added.append(g - d)
            d_times.append(d)
            g_times.append(g)

        async def checked(k: int) -> bool:
            _, body = await one(client, gw, auth, args.chunks, f"c{k}")
            return body == b"".join(chunks(args.chunks, f"c{k}"))

        started = time.perf_counter()
        ok = await asyncio.gather(*(checked(k) for k in range(args.concurrent)))
        wall = time.perf_counter() - started
    return {"calls": args.calls, "chunks_per_stream": args.chunks + 2,
            "direct_median_ms": 1e3 * statistics.median(d_times), "gateway_median_ms": 1e3 * statistics.median(g_times),
            "added_median_ms": 1e3 * statistics.median(added),
            "added_p90_ms": 1e3 * sorted(added)[int(0.9 * len(added))],
            "concurrent_streams": args.concurrent, "concurrent_complete_in_order": sum(ok),
            "concurrent_wall_s": wall, "concurrent_chunks_per_s": args.concurrent * (args.chunks + 2) / wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--chunks", type=int, default=40)
    args = parser.parse_args()
    from autorl.gateway import GatewayProcess, new_config

    up_port = free_port()
    procs = [subprocess.Popen([sys.executable, "-c", UPSTREAM.format(here=str(HERE)), str(up_port)])]
    with tempfile.TemporaryDirectory() as tmp:
        env_base = f"http://127.0.0.1:{up_port}/v1"
        os.environ.update(OPENAI_API_BASE=env_base, OPENAI_API_KEY="sk-bench")
        gateway = GatewayProcess(new_config(Path(tmp)), Path(tmp) / "config.json", free_port(), Path(tmp) / "log")
        try:
            wait(f"http://127.0.0.1:{up_port}/")
            gateway.wait_ready()
            result = asyncio.run(main_async(args, f"{env_base}/chat/completions",
                                            f"{gateway.url}/openai/v1/chat/completions", gateway.config.token))
            summary = gateway.close() or {}
            result["gateway_recorded_calls"] = summary.get("calls")
        finally:
            gateway.stop()
            for p in procs:
                p.terminate()
                p.wait()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
