"""The LLM gateway against scripted upstreams of each family, both real uvicorn servers on 127.0.0.1: keys,
every answer shape metered as the upstream billed it, refusals, and upstreams that misbehave."""

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

from autorl.gateway import read_calls
from autorl.gateway.streams import JSON, NDJSON, Tap

from .gateway_harness import ADMIN, AUTH, KEY, TOKEN, chat, gateway, recorded_by_marker, usage_of
from .scripted_upstreams import Upstream as Scripted
from .scripted_upstreams import (
    anthropic_chunks,
    gemini_array,
    gemini_chunks,
    openai_chunks,
    openai_usage,
    scripted_upstream,
)


@pytest.fixture
def upstream() -> Iterator[tuple[str, Scripted]]:
    with scripted_upstream() as up:
        yield up


def test_openai_whole_and_streamed_with_the_key_held_by_the_gateway(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base) as (gw, record):
        whole = chat(gw)
        assert whole.status_code == 200 and whole.json()["usage"]["prompt_tokens"] == 11
        with httpx.stream(
            "POST",
            f"{gw}/openai/v1/chat/completions",
            headers=AUTH,
            json={"model": "gpt-4o", "messages": [], "stream": True},
        ) as resp:
            body = b"".join(resp.iter_raw())
        assert resp.headers["content-type"].startswith("text/event-stream")
        usage = usage_of(gw)
    # the stream passed through byte for byte; the upstream saw the operator's key, never the run's token
    assert body == b"".join(openai_chunks(up.words, openai_usage(11, 20, 2)))
    assert [r["key"] for r in up.requests] == [KEY] * 2
    calls = read_calls(record)
    assert [c["outcome"] for c in calls] == ["ok", "ok"] and [c["stream"] for c in calls] == [False, True]
    assert all(
        c["usage"] == {"prompt_tokens": 11, "completion_tokens": 20, "cached_tokens": 2, "source": "upstream"}
        for c in calls
    )
    assert calls[1]["response"]["text"] == "".join(up.words)
    assert calls[0]["request"]["messages"] == [{"role": "user", "content": "hi"}]
    # gpt-4o at 2.5 / 10 / 1.25 USD per million: 9 input, 2 cached, 20 output tokens a call
    assert usage["tokens"] == 62 and usage["cost_usd"] == pytest.approx(2 * (9 * 2.5 + 2 * 1.25 + 20 * 10) / 1e6)
    assert KEY not in (record / "calls.jsonl").read_text()


def test_anthropic_and_gemini_families(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base) as (gw, record):
        msg = httpx.post(
            f"{gw}/anthropic/v1/messages?beta=true",
            headers={"x-api-key": TOKEN},
            json={"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": []},
        )
        with httpx.stream(
            "POST",
            f"{gw}/anthropic/v1/messages",
            headers={"x-api-key": TOKEN},
            json={"model": "claude-sonnet-4-5", "stream": True, "messages": []},
        ) as resp:
            streamed = b"".join(resp.iter_raw())
        gem = httpx.post(
            f"{gw}/gemini/v1beta/models/gemini-2.5-pro:generateContent",
            headers={"x-goog-api-key": TOKEN},
            json={"contents": []},
        )
        with httpx.stream(
            "POST",
            f"{gw}/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key={TOKEN}",
            json={"contents": []},
        ) as resp:
            gem_streamed = b"".join(resp.iter_raw())
    assert msg.status_code == 200 and gem.status_code == 200
    assert streamed == b"".join(anthropic_chunks(up.words, 9, 20, 2))
    assert gem_streamed == b"".join(gemini_chunks(up.words, 11, 20))
    assert up.requests[0]["headers"]["x-api-key"] == KEY and up.requests[0]["headers"]["anthropic-version"]
    assert up.requests[0]["query"] == {"beta": "true"}
    assert up.requests[2]["headers"]["x-goog-api-key"] == KEY and up.requests[3]["query"] == {"alt": "sse"}
    calls = read_calls(record)
    assert [c["outcome"] for c in calls] == ["ok"] * 4
    assert [c["model"] for c in calls] == ["claude-sonnet-4-5"] * 2 + ["gemini-2.5-pro", "gemini-2.5-flash"]
    # input (with the cached) from message_start, output from message_delta; max_tokens 10: 10 words
    assert calls[0]["usage"] == {"prompt_tokens": 11, "completion_tokens": 10, "cached_tokens": 2, "source": "upstream"}
    assert calls[1]["usage"] == {"prompt_tokens": 11, "completion_tokens": 20, "cached_tokens": 2, "source": "upstream"}
    assert calls[3]["usage"] == {"prompt_tokens": 11, "completion_tokens": 20, "cached_tokens": 0, "source": "upstream"}


def test_every_answer_shape_is_recorded_as_the_upstream_billed_it(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    up.prompt_tokens = None  # each prompt billed by its own length
    msg = [{"role": "user", "content": "x"}]
    calls = [
        ("openai/v1/chat/completions", {"model": "gpt-4o", "messages": msg}),
        ("openai/v1/chat/completions", {"model": "gpt-4o", "messages": msg, "stream": True, "n": 2}),
        ("openai/v1/responses", {"model": "gpt-4o", "input": "x"}),
        ("openai/v1/responses", {"model": "gpt-4o", "input": "x", "stream": True, "max_output_tokens": 7}),
        ("openai/v1/completions", {"model": "gpt-4o", "prompt": "x", "max_tokens": 5}),
        ("anthropic/v1/messages", {"model": "claude-sonnet-4", "max_tokens": 50, "messages": msg}),
        ("anthropic/v1/messages", {"model": "claude-sonnet-4", "max_tokens": 50, "messages": msg, "stream": True}),
        ("gemini/v1beta/models/gemini-2.5-pro:generateContent", {"contents": []}),
        ("gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", {"contents": []}),
        ("gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent", {"contents": []}),  # a JSON array
        ("openai/v1/chat/completions", {"model": "gpt-4o", "messages": msg, "stream": True, "x_mode": "ndjson"}),
        ("openai/v1/chat/completions", {"model": "gpt-4o", "messages": msg, "x_mode": "error-usage"}),
    ]
    with gateway(tmp_path, base, budget_tokens=10**6) as (gw, record):
        for i, (path, body) in enumerate(calls):
            body = json.loads(json.dumps(body).replace('"x"', f'"call-{i}"').replace("[]", f'[{{"text": "call-{i}"}}]'))
            with httpx.stream("POST", f"{gw}/{path}", headers=AUTH, json=body, timeout=30) as resp:
                resp.read()
            assert resp.status_code == (400 if body.get("x_mode") == "error-usage" else 200), (path, resp.text)
        total = usage_of(gw)["tokens"]
    recorded = recorded_by_marker(record)
    assert len(up.bills) == len(calls) == len(recorded)
    for bill in up.bills:
        usage = recorded[bill["marker"]]["usage"]
        assert (usage["prompt_tokens"], usage["completion_tokens"], usage["source"]) == (
            bill["prompt_tokens"],
            bill["completion_tokens"],
            "upstream",
        ), bill
    assert total == up.billed
    # the JSON array passed through as the upstream sent it
    for streamed in (recorded["call-9"], recorded["call-10"]):  # the JSON array, the NDJSON
        assert streamed["stream"] is True and streamed["response"]["text"] == "".join(up.words)


def test_gemini_array_stream_passes_through_unchanged(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with (
        gateway(tmp_path, base) as (gw, record),
        httpx.stream(
            "POST",
            f"{gw}/gemini/v1/models/gemini-2.5-flash:streamGenerateContent",
            headers={"x-goog-api-key": TOKEN},
            json={"contents": []},
        ) as resp,
    ):
        body = b"".join(resp.iter_raw())
    assert body == b"".join(gemini_array(up.words, 11, 20)) and resp.headers["content-type"] == "application/json"
    (call,) = read_calls(record)
    assert call["usage"]["completion_tokens"] == 20 and call["outcome"] == "ok" and call["stream"] is True


def test_a_stream_without_usage_is_counted(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    up.mode = "no-usage"
    with gateway(tmp_path, base) as (gw, record):
        assert chat(gw, stream=True).status_code == 200
        assert chat(gw).status_code == 200
    streamed, whole = read_calls(record)
    assert streamed["outcome"] == "ok" and streamed["usage"]["source"] == "counted"
    assert streamed["usage"]["completion_tokens"] == -(-len("".join(up.words)) // 4) > 0
    assert streamed["usage"]["prompt_tokens"] > 0
    # a whole answer without usage: its body counted (more than its text: nothing goes uncounted)
    assert whole["usage"]["source"] == "counted" and whole["usage"]["completion_tokens"] >= 20


def test_refusals_are_json(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base, without=("gemini",)) as (gw, record):
        wrong = chat(gw, token="not-the-token")
        no_token = httpx.post(f"{gw}/openai/v1/chat/completions", json={})
        unconfigured = httpx.post(
            f"{gw}/gemini/v1beta/models/g:generateContent", headers={"x-goog-api-key": TOKEN}, json={}
        )
        unknown = httpx.post(f"{gw}/openai/v1/files", headers=AUTH, json={})
        not_json = httpx.post(f"{gw}/openai/v1/chat/completions", headers=AUTH, content=b"[1, 2]")
        nan = httpx.post(f"{gw}/openai/v1/chat/completions", headers=AUTH, content=b'{"model": "m", "x": NaN}')
        assert httpx.post(f"{gw}/-/close", headers=AUTH).status_code == 403
        assert httpx.post(f"{gw}/-/close", headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 200
        after = chat(gw)
    assert wrong.status_code == 401 and no_token.status_code == 401
    assert "token" in wrong.json()["error"]["message"]
    assert unconfigured.status_code == 404 and "no gemini upstream" in unconfigured.json()["error"]["message"]
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    assert not_json.status_code == 400 and "JSON object" in not_json.json()["error"]["message"]
    assert nan.status_code == 400 and nan.json()["error"]["code"] == "invalid_request"
    assert after.status_code == 409 and after.json()["error"]["code"] == "run_closed"
    assert up.requests == []
    assert [c["outcome"] for c in read_calls(record)] == ["refused"] * 4  # unconfigured, 2 bad bodies, closed
    assert json.loads((record / "summary.json").read_text())["closed"] is True


def test_usd_budget_needs_a_price(tmp_path: Path, upstream: Any) -> None:
    base, _ = upstream
    prices = tmp_path / "prices.yaml"
    prices.write_text("house-model: {input: 1, output: 1000000}\n")
    with gateway(tmp_path, base, budget_usd=45.0, prices_path=str(prices), min_output=5) as (gw, record):
        answers = [chat(gw, model="house-model", max_tokens=30) for _ in range(3)]
        unpriced = chat(gw, model="mystery-model")
    # 1 USD per output token, 20 tokens generated a call: the first call holds 30, the second is lowered to the
    # 24 that remain, the third (4 would remain) is refused
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert [c["reserved"]["max_output"] for c in read_calls(record)[:2]] == [30, 24]
    assert answers[2].json()["error"]["code"] == "llm_budget_exhausted"
    assert unpriced.status_code == 429  # closed for the budget already
    with gateway(tmp_path / "b", base, budget_usd=15.0, prices_path=str(prices)) as (gw, _):
        unpriced = chat(gw, model="mystery-model")
    assert unpriced.status_code == 400 and "no price for model 'mystery-model'" in unpriced.json()["error"]["message"]


def test_rate_limits_pass_through(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    up.mode = "rate-limited"
    with gateway(tmp_path, base, budget_tokens=10_000) as (gw, record):
        resp = chat(gw)
        assert usage_of(gw)["reserved_tokens"] == 0  # released: nothing was billed
    assert resp.status_code == 429 and resp.headers["retry-after"] == "7"
    assert resp.headers["x-ratelimit-remaining-requests"] == "0"
    assert resp.json() == {"error": {"message": "slow down"}}
    (call,) = read_calls(record)
    assert call["status"] == 429 and call["outcome"] == "failed" and call["usage"] is None


def test_a_stream_cut_halfway_is_recorded_as_failed(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    up.mode = "cut"
    with gateway(tmp_path, base) as (gw, record):
        with (
            pytest.raises(httpx.HTTPError),
            httpx.stream(
                "POST",
                f"{gw}/openai/v1/chat/completions",
                headers=AUTH,
                json={"model": "gpt-4o", "messages": [], "stream": True},
            ) as resp,
        ):
            got = b""
            for piece in resp.iter_raw():
                got += piece
        up.mode = "ok"
        ok = chat(gw)  # the gateway lives on
    assert ok.status_code == 200
    full = openai_chunks(up.words, openai_usage(11, 20, 2))
    assert got == b"".join(full[: len(full) // 2])  # what the upstream sent before it broke off
    cut, fine = read_calls(record)
    assert cut["outcome"] == "failed" and "broke off" in cut["error"] and cut["stream"] is True
    # the text that came through, counted (the upstream billed the 11 words it sent)
    assert cut["usage"]["source"] == "counted" and up.bills[0]["completion_tokens"] == 11
    assert cut["usage"]["completion_tokens"] == -(-len("".join(up.words[:11])) // 4)
    assert fine["outcome"] == "ok"


def test_a_hanging_upstream_times_out(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    up.mode = "hang"
    with gateway(tmp_path, base, timeout_s=0.5) as (gw, record):
        whole = chat(gw)
        with (
            pytest.raises(httpx.HTTPError),
            httpx.stream(
                "POST",
                f"{gw}/openai/v1/chat/completions",
                headers=AUTH,
                json={"model": "gpt-4o", "messages": [], "stream": True},
            ) as resp,
        ):
            for _ in resp.iter_raw():
                pass
        up.mode = "ok"
        assert chat(gw).status_code == 200
    assert whole.status_code == 504 and whole.json()["error"]["code"] == "upstream_timeout"
    calls = read_calls(record)
    assert [c["outcome"] for c in calls] == ["failed", "failed", "ok"]
    assert "ReadTimeout" in calls[1]["error"]
    # a call that timed out may still be generating upstream: it is charged its worst case
    assert calls[0]["usage"]["source"] == "reserved"


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


def test_a_resetting_upstream_and_answers_that_cannot_be_metered(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with resetting_server() as port, gateway(tmp_path, f"http://127.0.0.1:{port}") as (gw, record):
        reset = chat(gw)
    assert reset.status_code == 502 and reset.json()["error"]["code"] == "upstream_unreachable"
    assert read_calls(record)[0]["outcome"] == "failed"
    with gateway(tmp_path / "g", base, budget_tokens=10_000) as (gw, record2):
        up.mode = "garbage"
        garbage = chat(gw, max_tokens=100)
        up.mode = "plain"
        plain = chat(gw, max_tokens=100)
        spent = usage_of(gw)["tokens"]
    # neither body reaches the agent, and each call is charged its whole reservation
    for resp in (garbage, plain):
        assert resp.status_code == 502 and resp.json()["error"]["code"] == "unmeterable_response"
        assert b"not json" not in resp.content and b"w0" not in resp.content
    calls = read_calls(record2)
    assert [c["usage"]["source"] for c in calls] == ["reserved"] * 2
    assert spent == sum(c["reserved"]["tokens"] for c in calls) >= up.billed


def test_taps_follow_each_shape_split_anywhere() -> None:
    data = b"".join(anthropic_chunks(["a", "b"], 5, 2)).replace(b"\n", b"\r\n")
    array = b"".join(gemini_array(["c", 'd\u00e9]{\\"'], 4, 2))
    ndjson = b"".join(
        json.dumps(e).encode() + b"\n"
        for e in [{"choices": [{"delta": {"content": "e"}}]}, {"choices": [], "usage": openai_usage(3, 1, 0)}]
    )
    for family, shape, body, text, usage in (
        ("anthropic", "sse", data, "ab", (5, 2)),
        ("gemini", JSON, array, 'cd\u00e9]{\\"', (4, 2)),
        ("openai", NDJSON, ndjson, "e", (3, 1)),
    ):
        tap = Tap(family, shape)
        for i in range(0, len(body), 3):
            tap.feed(body[i : i + 3])
        tap.close()
        assert tap.finished and not tap.broken and tap.streamed_text == text and tap.usage is not None, family
        assert (tap.usage.prompt_tokens, tap.usage.completion_tokens) == usage
    broken = Tap("gemini", JSON)
    broken.feed(b'[{"candidates": []}, 42')
    assert broken.broken
    cut = Tap("gemini", JSON)
    cut.feed(array[:-5])
    cut.close()
    assert cut.broken and not cut.finished


def test_the_dashboard_shows_the_gateway_record_as_the_trajectory(tmp_path: Path, upstream: Any) -> None:
    from autorl.ui import trajectory

    base, up = upstream
    up.words = ["<script>alert(1)</script>", " done"]
    with gateway(tmp_path, base, budget_tokens=60, min_output=4) as (gw, record):
        chat(gw, stream=True)
        chat(gw)
        chat(gw)
        chat(gw)
    traj = trajectory.gateway_trajectory({"meta": {"llm_gateway": {"record_dir": str(record)}}})
    assert traj is not None and [t["kind"] for t in traj["turns"]] == ["turn", "turn", "turn", "event"]
    assert traj["turns"][0]["content"] == "<script>alert(1)</script> done"
    assert traj["turns"][1]["usage"] == {"prompt_tokens": 11, "completion_tokens": 2}
    assert "refused" in traj["turns"][3]["event"] and "budget" in traj["turns"][3]["detail"]
    html = trajectory.trajectory_html(traj)
    assert "recorded by the LLM gateway" in html and "3 turns, 33 in / 6 out tokens" in html
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert trajectory.gateway_trajectory({"meta": {}}) is None
