"""The LLM gateway against scripted upstreams of each family, both real uvicorn servers on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from autorl.gateway import GatewayConfig, Upstream, create_app, read_calls
from autorl.gateway.metering import StreamTap

from .scripted_llm import serve_in_thread
from .scripted_upstreams import Upstream as Scripted
from .scripted_upstreams import anthropic_chunks, gemini_chunks, openai_chunks, scripted_upstream

TOKEN = "run-token"
ADMIN = "admin-token"
KEY = "sk-upstream-secret"


@contextmanager
def gateway(tmp_path: Path, base: str, **options: Any) -> Iterator[tuple[str, Path]]:
    record = tmp_path / "gateway"
    record.mkdir(parents=True, exist_ok=True)
    upstreams = {"openai": Upstream("openai", f"{base}/v1", KEY), "anthropic": Upstream("anthropic", base, KEY),
                 "gemini": Upstream("gemini", base, KEY)}
    for family in options.pop("without", ()):
        upstreams.pop(family)
    config = GatewayConfig(token=TOKEN, admin_token=ADMIN, record_dir=str(record), **options)
    with serve_in_thread(create_app(config, upstreams)) as port:
        yield f"http://127.0.0.1:{port}", record


@pytest.fixture
def upstream() -> Iterator[tuple[str, Scripted]]:
    with scripted_upstream() as up:
        yield up


def chat(gw: str, stream: bool = False, token: str = TOKEN, **body: Any) -> httpx.Response:
    return httpx.post(f"{gw}/openai/v1/chat/completions", headers={"Authorization": f"Bearer {token}"}, timeout=30,
                      json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": stream,
                            **body})


def test_openai_whole_and_streamed_with_the_key_held_by_the_gateway(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base) as (gw, record):
        whole = chat(gw)
        assert whole.status_code == 200 and whole.json()["usage"]["prompt_tokens"] == 11
        with httpx.stream("POST", f"{gw}/openai/v1/chat/completions", headers={"Authorization": f"Bearer {TOKEN}"},
                          json={"model": "gpt-4o", "messages": [], "stream": True}) as resp:
            body = b"".join(resp.iter_raw())
        assert resp.headers["content-type"].startswith("text/event-stream")
        usage = httpx.get(f"{gw}/-/usage", headers={"Authorization": f"Bearer {ADMIN}"}).json()
    # the stream passed through byte for byte; the upstream saw the operator's key, never the run's token
    expected = b"".join(openai_chunks(up.words, {"prompt_tokens": 11, "completion_tokens": 7,
                                                 "prompt_tokens_details": {"cached_tokens": 2}}))
    assert body == expected
    assert [r["headers"]["authorization"] for r in up.requests] == [f"Bearer {KEY}"] * 2
    calls = read_calls(record)
    assert [c["outcome"] for c in calls] == ["ok", "ok"] and [c["stream"] for c in calls] == [False, True]
    assert all(c["usage"] == {"prompt_tokens": 11, "completion_tokens": 7, "cached_tokens": 2, "source": "upstream"}
               for c in calls)
    assert calls[1]["response"]["text"] == "".join(up.words)
    assert calls[0]["request"]["messages"] == [{"role": "user", "content": "hi"}]
    # gpt-4o at 2.5 / 10 / 1.25 USD per million: 9 input, 2 cached, 7 output tokens a call
    assert usage["tokens"] == 36 and usage["cost_usd"] == pytest.approx(2 * (9 * 2.5 + 2 * 1.25 + 7 * 10) / 1e6)
    assert KEY not in (record / "calls.jsonl").read_text()


def test_anthropic_and_gemini_families(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base) as (gw, record):
        msg = httpx.post(f"{gw}/anthropic/v1/messages", headers={"x-api-key": TOKEN},
                         json={"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": []})
        with httpx.stream("POST", f"{gw}/anthropic/v1/messages", headers={"x-api-key": TOKEN},
                          json={"model": "claude-sonnet-4-5", "stream": True, "messages": []}) as resp:
            streamed = b"".join(resp.iter_raw())
        gem = httpx.post(f"{gw}/gemini/v1beta/models/gemini-2.5-pro:generateContent",
                         headers={"x-goog-api-key": TOKEN}, json={"contents": []})
        with httpx.stream("POST", f"{gw}/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key={TOKEN}",
                          json={"contents": []}) as resp:
            gem_streamed = b"".join(resp.iter_raw())
    assert msg.status_code == 200 and gem.status_code == 200
    assert streamed == b"".join(anthropic_chunks(up.words, 13, 9))
    assert gem_streamed == b"".join(gemini_chunks(up.words, 17, 5))
    anthropic_headers = up.requests[0]["headers"]
    assert anthropic_headers["x-api-key"] == KEY and anthropic_headers["anthropic-version"]
    assert up.requests[2]["headers"]["x-goog-api-key"] == KEY and "key" not in up.requests[3]["query"]
    assert up.requests[3]["query"] == {"alt": "sse"}
    calls = read_calls(record)
    assert [c["outcome"] for c in calls] == ["ok"] * 4
    assert [c["model"] for c in calls] == ["claude-sonnet-4-5"] * 2 + ["gemini-2.5-pro", "gemini-2.5-flash"]
    assert calls[0]["usage"]["prompt_tokens"] == 13 and calls[0]["usage"]["completion_tokens"] == 9
    # a stream's usage: input (with the cached 3) from message_start, output from message_delta
    assert calls[1]["usage"] == {"prompt_tokens": 16, "completion_tokens": 9, "cached_tokens": 3, "source": "upstream"}
    assert calls[3]["usage"] == {"prompt_tokens": 17, "completion_tokens": 5, "cached_tokens": 0, "source": "upstream"}


def test_a_stream_without_usage_is_counted(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    up.mode = "no-usage"
    with gateway(tmp_path, base) as (gw, record):
        assert chat(gw, stream=True).status_code == 200
    (call,) = read_calls(record)
    assert call["outcome"] == "ok" and call["usage"]["source"] == "counted"
    assert call["usage"]["completion_tokens"] == -(-len("".join(up.words)) // 4) > 0
    assert call["usage"]["prompt_tokens"] > 0


def test_refusals_are_json(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base, without=("gemini",)) as (gw, record):
        wrong = chat(gw, token="not-the-token")
        no_token = httpx.post(f"{gw}/openai/v1/chat/completions", json={})
        unconfigured = httpx.post(f"{gw}/gemini/v1beta/models/g:generateContent", headers={"x-goog-api-key": TOKEN},
                                  json={})
        unknown = httpx.post(f"{gw}/openai/v1/files", headers={"Authorization": f"Bearer {TOKEN}"}, json={})
        assert httpx.post(f"{gw}/-/close", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 403
        assert httpx.post(f"{gw}/-/close", headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 200
        after = chat(gw)
    assert wrong.status_code == 401 and no_token.status_code == 401
    assert "token" in wrong.json()["error"]["message"]
    assert unconfigured.status_code == 404 and "no gemini upstream" in unconfigured.json()["error"]["message"]
    assert unknown.status_code == 404
    assert after.status_code == 409 and after.json()["error"]["code"] == "run_closed"
    assert up.requests == []
    assert [c["outcome"] for c in read_calls(record)] == ["refused", "refused"]  # the unconfigured, the closed
    assert json.loads((record / "summary.json").read_text())["closed"] is True


def test_token_budget_refuses_once_spent(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base, budget_tokens=30) as (gw, record):
        answers = [chat(gw) for _ in range(3)]
    # 18 tokens a call: the second call starts under the budget and ends over it, the third is refused
    assert [a.status_code for a in answers] == [200, 200, 429]
    error = answers[2].json()["error"]
    assert error["code"] == "llm_budget_exhausted" and "36 of 30 tokens" in error["message"]
    assert len(up.requests) == 2
    assert [c["outcome"] for c in read_calls(record)] == ["ok", "ok", "refused"]


def test_usd_budget_needs_a_price(tmp_path: Path, upstream: Any) -> None:
    base, _ = upstream
    prices = tmp_path / "prices.yaml"
    prices.write_text("house-model: {input: 1000000, output: 0}\n")
    with gateway(tmp_path, base, budget_usd=15.0, prices_path=str(prices)) as (gw, _):
        priced = [chat(gw, model="house-model").status_code for _ in range(3)]
        unpriced = chat(gw, model="mystery-model")
    assert priced == [200, 200, 429]  # 11 - 2 cached = 9 USD a call
    assert unpriced.status_code == 429  # spent already
    with gateway(tmp_path / "b", base, budget_usd=15.0, prices_path=str(prices)) as (gw, _):
        unpriced = chat(gw, model="mystery-model")
    assert unpriced.status_code == 400 and "no price for model 'mystery-model'" in unpriced.json()["error"]["message"]


def test_rate_limits_pass_through(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    up.mode = "rate-limited"
    with gateway(tmp_path, base) as (gw, record):
        resp = chat(gw)
    assert resp.status_code == 429 and resp.headers["retry-after"] == "7"
    assert resp.headers["x-ratelimit-remaining-requests"] == "0"
    assert resp.json() == {"error": {"message": "slow down"}}
    (call,) = read_calls(record)
    assert call["status"] == 429 and call["outcome"] == "failed" and call["usage"] is None


def test_a_stream_cut_halfway_is_recorded_as_failed(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    up.mode = "cut"
    with gateway(tmp_path, base) as (gw, record):
        with pytest.raises(httpx.HTTPError), httpx.stream(
                "POST", f"{gw}/openai/v1/chat/completions", headers={"Authorization": f"Bearer {TOKEN}"},
                json={"model": "gpt-4o", "messages": [], "stream": True}) as resp:
            got = b""
            for piece in resp.iter_raw():
                got += piece
        ok = chat(gw)  # the gateway lives on
    assert ok.status_code == 200
    full = openai_chunks(up.words, {"prompt_tokens": 11, "completion_tokens": 7,
                                    "prompt_tokens_details": {"cached_tokens": 2}})
    assert got == b"".join(full[:len(full) // 2])  # what the upstream sent before it broke off
    cut, fine = read_calls(record)
    assert cut["outcome"] == "failed" and "broke off" in cut["error"] and cut["stream"] is True
    assert cut["usage"]["source"] == "counted" and fine["outcome"] == "ok"


def test_a_hanging_upstream_times_out(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    up.mode = "hang"
    with gateway(tmp_path, base, timeout_s=0.5) as (gw, record):
        whole = chat(gw)
        with pytest.raises(httpx.HTTPError), httpx.stream(
                "POST", f"{gw}/openai/v1/chat/completions", headers={"Authorization": f"Bearer {TOKEN}"},
                json={"model": "gpt-4o", "messages": [], "stream": True}) as resp:
            for _ in resp.iter_raw():
                pass
        up.mode = "ok"
        assert chat(gw).status_code == 200
    assert whole.status_code == 504 and whole.json()["error"]["code"] == "upstream_timeout"
    calls = read_calls(record)
    assert [c["outcome"] for c in calls] == ["failed", "failed", "ok"]
    assert "ReadTimeout" in calls[1]["error"]


@contextmanager
def resetting_server() -> Iterator[int]:
    """Accepts connections and resets them at once."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        srv.close()


def test_a_resetting_or_garbage_upstream(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with resetting_server() as port, gateway(tmp_path, f"http://127.0.0.1:{port}") as (gw, record):
        reset = chat(gw)
    assert reset.status_code == 502 and reset.json()["error"]["code"] == "upstream_unreachable"
    up.mode = "garbage"
    with gateway(tmp_path / "g", base) as (gw, record2):
        garbage = chat(gw)
    assert garbage.status_code == 200 and garbage.content == b"\x00\xffnot json at all {"
    assert read_calls(record)[0]["outcome"] == "failed"
    (call,) = read_calls(record2)
    assert call["outcome"] == "failed" and "not JSON" in call["error"] and call["usage"]["source"] == "counted"


def test_stream_tap_follows_events_split_anywhere() -> None:
    data = b"".join(anthropic_chunks(["a", "b"], 5, 2)).replace(b"\n", b"\r\n")
    tap = StreamTap("anthropic")
    for i in range(0, len(data), 3):
        tap.feed(data[i:i + 3])
    tap.close()
    assert tap.finished and tap.streamed_text == "ab" and tap.usage is not None
    assert (tap.usage.prompt_tokens, tap.usage.completion_tokens) == (8, 2)


def test_the_dashboard_shows_the_gateway_record_as_the_trajectory(tmp_path: Path, upstream: Any) -> None:
    from autorl.ui import data, pages

    base, up = upstream
    up.words = ["<script>alert(1)</script>", " done"]
    with gateway(tmp_path, base, budget_tokens=40) as (gw, record):
        chat(gw, stream=True)
        chat(gw)
        chat(gw)
        chat(gw)
    traj = data.gateway_trajectory({"meta": {"llm_gateway": {"record_dir": str(record)}}})
    assert traj is not None and [t["kind"] for t in traj["turns"]] == ["turn", "turn", "turn", "event"]
    assert traj["turns"][0]["content"] == "<script>alert(1)</script> done"
    assert traj["turns"][1]["usage"] == {"prompt_tokens": 11, "completion_tokens": 7}
    assert "refused" in traj["turns"][3]["event"] and "budget" in traj["turns"][3]["detail"]
    html = pages.trajectory_html(traj)
    assert "recorded by the LLM gateway" in html and "3 turns, 33 in / 21 out tokens" in html
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert data.gateway_trajectory({"meta": {}}) is None
