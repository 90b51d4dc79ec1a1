"""What looking for decoy tokens costs the LLM gateway per call: its real app in-process (the upstream answered by
``httpx.MockTransport``), with the run's decoy tokens and without, in turn, on three bodies: a short chat, a long
conversation (``--kib`` KiB), and the same conversation quoting a file that holds a decoy token (the case where
the body is parsed to tell a quote from a use).

    python bench/decoy_middleware.py [--calls 300] [--rounds 5] [--kib 256]

Prints the median milliseconds per call of each, and the difference.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

TOKEN = "sk-proj-" + "Q" * 48


def bodies(kib: int) -> dict[str, bytes]:
    turn = {"role": "user", "content": "x" * 1000}
    long = [turn] * kib
    quoted = [*long, {"role": "tool", "content": f"OPENAI_API_KEY={TOKEN}\nOPENAI_BASE_URL=https://api.openai.com\n"}]
    return {name: json.dumps({"model": "gpt-4o", "messages": m}).encode() for name, m in (
        ("short chat", [{"role": "user", "content": "hi"}]), (f"{kib} KiB conversation", long),
        (f"{kib} KiB quoting a decoy", quoted))}


def app(decoys: bool):  # type: ignore[no-untyped-def]
    from autorl.gateway import GatewayConfig, Upstream, create_app

    config = GatewayConfig(token="t", admin_token="a", record_dir=tempfile.mkdtemp(),
                           decoy_tokens={TOKEN: "upstream-key", "g" * 32: "grader-admin-token"} if decoys else {})
    gateway_app = create_app(config, {"openai": Upstream("openai", "http://upstream/v1", "k")})
    answer = {"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
    gateway_app.state.gateway.client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda request: httpx.Response(200, json=answer)))
    return gateway_app


async def per_call(asgi, body: bytes, calls: int) -> float:  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://gw") as client:
        started = time.perf_counter()
        for _ in range(calls):
            r = await client.post("/openai/v1/chat/completions", content=body,
                                  headers={"Authorization": "Bearer t", "Content-Type": "application/json"})
            assert r.status_code == 200, r.text
        return (time.perf_counter() - started) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kib", type=int, default=256)
    args = parser.parse_args()
    apps = {"without decoys": app(False), "with decoys": app(True)}
    for name, body in bodies(args.kib).items():
        times: dict[str, list[float]] = {label: [] for label in apps}
        for asgi in apps.values():
            asyncio.run(per_call(asgi, body, 10))  # warm
        for _ in range(args.rounds):
            for label, asgi in apps.items():
                times[label].append(asyncio.run(per_call(asgi, body, args.calls)))
        med = {label: statistics.median(xs) for label, xs in times.items()}
        print(f"{name}: {med['without decoys']:.3f} ms without decoys, {med['with decoys']:.3f} ms with "
              f"({med['with decoys'] - med['without decoys']:+.3f} ms a call)")


if __name__ == "__main__":
    main()
