"""A run's LLM gateway on 127.0.0.1 (its real app under uvicorn, in a thread) in front of a scripted upstream,
and the calls the gateway tests make through it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from autorl.gateway import GatewayConfig, Upstream, create_app, read_calls

from .scripted_llm import serve_in_thread

TOKEN = "run-token"
ADMIN = "admin-token"
KEY = "sk-upstream-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@contextmanager
def gateway(tmp_path: Path, base: str, **options: Any) -> Iterator[tuple[str, Path]]:
    """The gateway's URL and record folder; ``options`` are :class:`GatewayConfig` fields (``without``: families
    left unconfigured)."""
    record = tmp_path / "gateway"
    record.mkdir(parents=True, exist_ok=True)
    upstreams = {
        "openai": Upstream("openai", f"{base}/v1", KEY),
        "anthropic": Upstream("anthropic", base, KEY),
        "gemini": Upstream("gemini", base, KEY),
    }
    for family in options.pop("without", ()):
        upstreams.pop(family)
    config = GatewayConfig(token=TOKEN, admin_token=ADMIN, record_dir=str(record), **options)
    with serve_in_thread(create_app(config, upstreams)) as port:
        yield f"http://127.0.0.1:{port}", record


def chat(gw: str, stream: bool = False, token: str = TOKEN, **body: Any) -> httpx.Response:
    return httpx.post(
        f"{gw}/openai/v1/chat/completions",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
        json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": stream, **body},
    )


def usage_of(gw: str) -> dict[str, Any]:
    return dict(httpx.get(f"{gw}/-/usage", headers={"Authorization": f"Bearer {ADMIN}"}).json())


def recorded_by_marker(record: Path) -> dict[str, dict[str, Any]]:
    """The gateway's records of calls whose request carries a ``call-N`` marker, by marker."""
    out = {}
    for call in read_calls(record):
        for marker in re.findall(r"call-\d+", json.dumps(call.get("request"))):
            out[marker] = call
    return out
