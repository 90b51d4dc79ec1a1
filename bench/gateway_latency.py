"""The LLM gateway's added latency per streamed call, and 50 concurrent streams through it, with the budget's
reservations in place; optionally beside an earlier version of the gateway, measured in the same invocation.

    python bench/gateway_latency.py [--calls 200] [--concurrent 50] [--chunks 40] [--rounds 5]
                                    [--baseline-ref main | --baseline-src DIR]

A scripted OpenAI-compatible upstream (uvicorn, 127.0.0.1) streams ``--chunks`` numbered SSE chunks; each
gateway (its real app, in its own uvicorn process, as a run starts it) forwards them, under a token budget
large enough never to refuse, so that every call reserves, has its output limit written into its body and
settles. With ``--baseline-ref REF`` the ``src`` tree of that git revision is exported to a temporary folder
and a second gateway runs from it (``--baseline-src DIR`` names such a tree). Each call is timed from the
request to the last byte, in turn direct, through this gateway and through the baseline, so that all see
the same machine load; the figures are medians of the per-call differences. Then ``--concurrent`` streams at
once through each gateway, ``--rounds`` times in turn: every stream must arrive complete and in order, byte
for byte as the upstream sent it. Last, the gateway's own cost per streamed call without the network and
the other processes: its ASGI app called in-process with the upstream answered by ``httpx.MockTransport``,
each tree in its own interpreter, in turn, ``--rounds`` times (the median of each).
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
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
BUDGET = 10**12


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
        for c in chunks(int(body.get("chunks", 40)), str(body.get("sid", "s"))):
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


class Gateway:
    """One gateway process: this tree's (``src`` None) or an earlier tree's, with the same budget."""

    def __init__(self, label: str, folder: Path, src: Path | None) -> None:
        self.label, self.token, self.admin = label, f"tok-{label}", f"admin-{label}"
        folder.mkdir(parents=True)
        config = {"token": self.token, "admin_token": self.admin, "record_dir": str(folder),
                  "budget_tokens": BUDGET}
        (folder / "config.json").write_text(json.dumps(config))
        self.port = free_port()
        env = dict(os.environ)
        if src is not None:  # that tree's autorl first, the rest of the path as it was
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen([sys.executable, "-m", "autorl.gateway.process", str(folder / "config.json"),
                                      "--port", str(self.port)], env=env)
        self.url = f"http://127.0.0.1:{self.port}/openai/v1/chat/completions"
        self.where = subprocess.run([sys.executable, "-c", "import autorl.gateway as g; print(g.__file__)"],
                                    env=env, capture_output=True, text=True, check=True).stdout.strip()

    def ready(self) -> None:
        wait(f"http://127.0.0.1:{self.port}/-/health")

    def usage(self) -> dict[str, Any]:
        return dict(httpx.get(f"http://127.0.0.1:{self.port}/-/usage",
                              headers={"Authorization": f"Bearer {self.admin}"}).json())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


async def one(client: httpx.AsyncClient, url: str, token: str | None, n: int, sid: str) -> tuple[float, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    started = time.perf_counter()
    body = b""
    async with client.stream("POST", url, headers=headers, json={
            "model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True, "chunks": n,
            "sid": sid}) as resp:
        async for piece in resp.aiter_raw():
            body += piece
    return time.perf_counter() - started, body


async def measure(args: argparse.Namespace, direct: str, gateways: list[Gateway]) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    out: dict[str, Any] = {"calls": args.calls, "chunks_per_stream": args.chunks + 2, "concurrent_streams":
                           args.concurrent, "rounds": args.rounds}
    async with httpx.AsyncClient(timeout=120, limits=limits, trust_env=False) as client:
        for _ in range(10):  # warm every path
            await one(client, direct, None, args.chunks, "w")
            for g in gateways:
                await one(client, g.url, g.token, args.chunks, "w")
        direct_times: list[float] = []
        added: dict[str, list[float]] = {g.label: [] for g in gateways}
        for i in range(args.calls):
            d, body = await one(client, direct, None, args.chunks, f"s{i}")
            assert body == b"".join(chunks(args.chunks, f"s{i}")), "the upstream changed"
            direct_times.append(d)
            for g in gateways:
                t, body = await one(client, g.url, g.token, args.chunks, f"s{i}")
                assert body == b"".join(chunks(args.chunks, f"s{i}")), f"a stream changed on its way ({g.label})"
                added[g.label].append(t - d)
        out["direct_median_ms"] = 1e3 * statistics.median(direct_times)
        for g in gateways:
            xs = sorted(added[g.label])
            out[g.label] = {"added_median_ms": 1e3 * statistics.median(xs), "added_p90_ms": 1e3 * xs[int(0.9 * len(xs))]}

        async def storm(g: Gateway, r: int) -> tuple[float, int]:
            async def checked(k: int) -> bool:
                _, body = await one(client, g.url, g.token, args.chunks, f"c{r}-{k}")
                return body == b"".join(chunks(args.chunks, f"c{r}-{k}"))

            started = time.perf_counter()
            ok = await asyncio.gather(*(checked(k) for k in range(args.concurrent)))
            return time.perf_counter() - started, sum(ok)

        walls: dict[str, list[float]] = {g.label: [] for g in gateways}
        complete: dict[str, int] = {g.label: 0 for g in gateways}
        for r in range(args.rounds):
            for g in gateways:
                wall, ok = await storm(g, r)
                walls[g.label].append(wall)
                complete[g.label] += ok
        for g in gateways:
            wall = statistics.median(walls[g.label])
            out[g.label].update(concurrent_wall_s=wall, concurrent_chunks_per_s=args.concurrent * (args.chunks + 2) / wall,
                                concurrent_complete_in_order=f"{complete[g.label]}/{args.concurrent * args.rounds}")
    return out


IN_PROCESS = '''
import asyncio, json, sys, tempfile, time
import httpx
sys.path.insert(0, {here!r})
from gateway_latency import BUDGET, chunks
from autorl.gateway import GatewayConfig, Upstream, create_app

def upstream(request):
    return httpx.Response(200, headers={{"content-type": "text/event-stream"}}, content=b"".join(chunks({n}, "s")))

config = GatewayConfig(token="t", admin_token="a", record_dir=tempfile.mkdtemp(), budget_tokens=BUDGET)
app = create_app(config, {{"openai": Upstream("openai", "http://upstream/v1", "k")}})
app.state.gateway.client = httpx.AsyncClient(transport=httpx.MockTransport(upstream))

async def calls(k):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        for _ in range(k):
            r = await client.post("/openai/v1/chat/completions", headers={{"Authorization": "Bearer t"}}, json={{
                "model": "gpt-4o", "messages": [{{"role": "user", "content": "hi"}}], "stream": True}})
            assert r.status_code == 200 and r.content == b"".join(chunks({n}, "s")), r.text

asyncio.run(calls(20))
started = time.perf_counter()
asyncio.run(calls({calls}))
print(json.dumps((time.perf_counter() - started) / {calls} * 1e3))
'''


def in_process(args: argparse.Namespace, trees: dict[str, Path | None]) -> dict[str, float]:
    """Milliseconds per streamed call through each tree's gateway app, in-process (the median of the rounds)."""
    code = IN_PROCESS.format(here=str(HERE), n=args.chunks, calls=args.calls)
    times: dict[str, list[float]] = {label: [] for label in trees}
    for _ in range(args.rounds):
        for label, src in trees.items():
            env = dict(os.environ)
            if src is not None:
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH", "")]))
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            times[label].append(float(out.stdout))
    return {label: statistics.median(xs) for label, xs in times.items()}


def export(ref: str, dest: Path) -> Path:
    """The ``src`` tree of git revision ``ref``, exported to ``dest``."""
    archive = subprocess.run(["git", "-C", str(HERE.parent), "archive", ref, "src"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest / "src"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--chunks", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline-ref", help="a git revision whose gateway runs beside this one")
    parser.add_argument("--baseline-src", type=Path, help="a src tree whose gateway runs beside this one")
    args = parser.parse_args()
    up_port = free_port()
    env_base = f"http://127.0.0.1:{up_port}/v1"
    os.environ.update(OPENAI_API_BASE=env_base, OPENAI_API_KEY="sk-bench")
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM.format(here=str(HERE)), str(up_port)])
    gateways: list[Gateway] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            gateways.append(Gateway("this", Path(tmp) / "this", None))
            baseline = args.baseline_src or (export(args.baseline_ref, Path(tmp)) if args.baseline_ref else None)
            if baseline is not None:
                gateways.append(Gateway("baseline", Path(tmp) / "baseline", baseline.resolve()))
            wait(f"http://127.0.0.1:{up_port}/")
            for g in gateways:
                g.ready()
            result = asyncio.run(measure(args, f"{env_base}/chat/completions", gateways))
            for g in gateways:
                usage = g.usage()
                result[g.label].update(code=g.where, recorded_calls=usage["calls"], tokens=usage["tokens"],
                                       reserved_after=usage.get("reserved_tokens"))
            result["baseline_ref"] = args.baseline_ref
            trees = {"this": None, **({"baseline": baseline.resolve()} if baseline is not None else {})}
            for label, ms in in_process(args, trees).items():
                result[label]["in_process_ms_per_call"] = ms
        finally:
            for g in gateways:
                g.stop()
            upstream.terminate()
            upstream.wait()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
