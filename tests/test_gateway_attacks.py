"""The LLM gateway under attack, as a reward-hacking agent would try it: the budget overrun by concurrent calls,
calls after the budget's refusal, answers in shapes that escape metering, methods disguised as free ones,
request parameters whose cost the gateway cannot see. Each against a scripted upstream that keeps a bill."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from autorl.gateway import read_calls
from autorl.gateway.budget import BudgetBusy, BudgetSpent, Meter
from autorl.gateway.usage import Usage

from .gateway_harness import AUTH, TOKEN, chat, gateway, recorded_by_marker, usage_of
from .scripted_upstreams import Upstream as Scripted
from .scripted_upstreams import scripted_upstream

GEMINI = {"x-goog-api-key": TOKEN}


@pytest.fixture
def upstream() -> Iterator[tuple[str, Scripted]]:
    with scripted_upstream() as up:
        yield up


def long_answer(up: Scripted, words: int) -> None:
    """The upstream generates ``words`` tokens unless the call's limit stops it (each word counts as 2 or more
    tokens when the gateway has to count it)."""
    up.words = [f"tok{i:05d} " for i in range(words)]


async def _at_once(gw: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=30) as client:
        return list(
            await asyncio.gather(
                *(client.post(f"{gw}/openai/v1/chat/completions", headers=AUTH, json=b) for b in bodies)
            )
        )


def test_concurrent_calls_cannot_overrun_the_budget(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    long_answer(up, 3000)
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "go"}], "max_tokens": 2000}
    with gateway(tmp_path, base, budget_tokens=3000) as (gw, record):
        answers = asyncio.run(_at_once(gw, [body] * 8))
        later = [chat(gw, max_tokens=2000) for _ in range(3)]
        summary = usage_of(gw)
    # eight calls at once, each asking for 2,000 tokens: before, all eight ran and 24,000 tokens were billed
    assert up.billed <= 3000 and summary["tokens"] == up.billed
    forwarded = [r["body"]["max_tokens"] for r in up.requests]
    assert forwarded[0] == 2000 and all(m < 2000 for m in forwarded[1:])  # lowered to what remained
    codes = sorted({a.status_code for a in answers})
    assert codes == [200, 429] and {a.json()["error"]["code"] for a in answers if a.status_code == 429} <= {
        "llm_budget_busy",
        "llm_budget_exhausted",
    }
    assert later[-1].status_code == 429 and later[-1].json()["error"]["code"] == "llm_budget_exhausted"
    assert summary["in_flight"] == 0 and summary["reserved_tokens"] == 0
    assert all(c["reserved"]["tokens"] <= 3000 for c in read_calls(record) if c.get("reserved"))


def test_a_call_without_a_limit_gets_one_written(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base, budget_tokens=5000, default_max_output=1000) as (gw, record):
        assert chat(gw).status_code == 200
        assert (
            httpx.post(
                f"{gw}/gemini/v1beta/models/gemini-2.5-pro:generateContent", headers=GEMINI, json={"contents": []}
            ).status_code
            == 200
        )
        assert (
            httpx.post(
                f"{gw}/anthropic/v1/messages",
                headers={"x-api-key": TOKEN},
                json={
                    "model": "claude-sonnet-4",
                    "max_tokens": 64000,
                    "messages": [],
                    "thinking": {"type": "enabled", "budget_tokens": 32000},
                },
            ).status_code
            == 200
        )
        assert (
            httpx.post(f"{gw}/openai/v1/responses", headers=AUTH, json={"model": "gpt-5", "input": "hi"}).status_code
            == 200
        )
        assert chat(gw, n=3, max_tokens=2000).status_code == 200
    chat_body, gem, claude, resp, three = (r["body"] for r in up.requests)
    assert chat_body["max_completion_tokens"] == 1000 and "max_tokens" not in chat_body
    assert gem["generationConfig"] == {"maxOutputTokens": 1000}
    room = claude["max_tokens"]
    assert 3000 < room < 5000 and claude["thinking"]["budget_tokens"] == room - 1  # lowered to what remains
    assert resp["max_output_tokens"] == 1000
    assert 3 * three["max_tokens"] < 5000 - 4 * 31  # three candidates, each lowered
    assert [c["reserved"]["asked"] for c in read_calls(record)] == [None, None, 64000, None, 2000]


def test_after_the_budget_refusal_nothing_reaches_the_upstream(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    gem = f"{base}/v1beta/models/gemini-2.5-pro"
    with gateway(tmp_path, base, budget_tokens=100, min_output=64) as (gw, record):
        gem = f"{gw}/gemini/v1beta/models/gemini-2.5-pro"
        assert httpx.post(f"{gem}:generateContent", headers=GEMINI, json={"contents": []}).status_code == 200
        refused = httpx.post(f"{gem}:generateContent", headers=GEMINI, json={"contents": []})
        after = [
            httpx.post(f"{gem}:generateContent", headers=GEMINI, json={"contents": []}),
            httpx.post(f"{gem}:streamGenerateContent?alt=sse", headers=GEMINI, json={"contents": []}),
            httpx.post(f"{gem}:streamGenerateContent", headers=GEMINI, json={"contents": []}),
            httpx.post(f"{gem}:countTokens", headers=GEMINI, json={"contents": []}),
            httpx.get(f"{gw}/gemini/v1beta/models", headers=GEMINI),
            httpx.get(f"{gw}/openai/v1/models", headers=AUTH),
            httpx.post(
                f"{gw}/anthropic/v1/messages/count_tokens",
                headers={"x-api-key": TOKEN},
                json={"model": "claude-sonnet-4", "messages": []},
            ),
            chat(gw, max_tokens=1),  # small enough to fit what remains: the run is closed all the same
        ]
    assert refused.status_code == 429 and "budget is spent" in refused.json()["error"]["message"]
    assert [a.status_code for a in after] == [429] * len(after)
    assert {a.json()["error"].get("status") or a.json()["error"]["code"] for a in after} == {
        "LLM_BUDGET_EXHAUSTED",
        "llm_budget_exhausted",
    }
    assert len(up.requests) == 1 and len(up.bills) == 1
    assert [c["outcome"] for c in read_calls(record)] == ["ok"] + ["refused"] * (1 + len(after))


def test_gemini_stream_without_alt_sse_is_metered(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    long_answer(up, 2000)
    with gateway(tmp_path, base, budget_tokens=3000) as (gw, record):
        resp = httpx.post(
            f"{gw}/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent",
            headers=GEMINI,
            json={"contents": [], "generationConfig": {"maxOutputTokens": 2000}},
        )
        summary = usage_of(gw)
    # before, this JSON array stream was recorded with 0 completion tokens while the upstream billed 2,000
    assert resp.status_code == 200 and resp.json()[-1]["usageMetadata"]["candidatesTokenCount"] == 2000
    (call,) = read_calls(record)
    assert call["usage"]["completion_tokens"] == 2000 == up.bills[0]["completion_tokens"]
    assert summary["tokens"] == up.billed


DISGUISED = [
    "gemini/v1beta/models/x:generateContent%3Fx=:countTokens",
    "gemini/v1beta/models/x:generateContent%23:countTokens",
    "gemini/v1beta/models/x:generateContent%253F:countTokens",
    "gemini/v1beta/models/x:generateContent%2F..%2F:countTokens",
    "gemini/v1beta/models/x:generateContent/:countTokens",
    "gemini/v1beta/models/x:generateContent;:countTokens",
    "gemini/v1beta/models/x:countTokens:generateContent",
    "gemini/v1beta/models/x:generateContent%00:countTokens",
    "gemini/v1beta/models/x:GenerateContent",
    "gemini/v1beta//models/x:countTokens",
    "gemini/v9/models/x:countTokens",
    "anthropic/v1/messages%3F/count_tokens",
    "openai/v1/chat/completions%3Fmodels",
]


def test_disguised_methods_are_not_served(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base, budget_tokens=100) as (gw, record):
        for path in DISGUISED:
            resp = httpx.post(httpx.URL(f"{gw}/{path}"), headers={**AUTH, **GEMINI}, json={"contents": []})
            assert resp.status_code == 404, path
    assert up.requests == [] and read_calls(record) == []


def test_classification_from_the_decoded_path_alone() -> None:
    from autorl.gateway.routes import COUNT, GENERATE, classify

    count = classify("gemini", "POST", "v1beta/models/gemini-2.5-pro:countTokens")
    assert count is not None and count.kind == COUNT and count.model == "gemini-2.5-pro"
    gen = classify("gemini", "POST", "v1/models/x:streamGenerateContent")
    assert gen is not None and gen.kind == GENERATE and gen.upstream_path == "v1/models/x:streamGenerateContent"
    for family, method, path in [
        ("gemini", "POST", "v1beta/models/../models/x:countTokens"),
        ("gemini", "POST", "v1beta/models/./x:countTokens"),
        ("gemini", "POST", "v1beta/models/x:generateContent?:countTokens"),
        ("gemini", "POST", "v1beta/models/x:generateContent#:countTokens"),
        ("gemini", "POST", "v1beta/models/x:generateContent%3F:countTokens"),
        ("gemini", "GET", "v1beta/models/x:countTokens"),
        ("openai", "POST", "v1/models/../chat/completions"),
        ("openai", "GET", "v1/chat/completions"),
        ("anthropic", "POST", "v1/messages/"),
        ("anthropic", "POST", "v1/messages/batches"),
    ]:
        assert classify(family, method, path) is None, path


def _raw(port: int, target: str, body: bytes) -> int:
    """POST ``target`` exactly as written on the request line; the HTTP status."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(
            f"POST {target} HTTP/1.1\r\nHost: x\r\nx-goog-api-key: {TOKEN}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        head = s.recv(65536).split(b" ", 2)
    return int(head[1])


def test_a_raw_query_or_fragment_is_never_the_method(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base) as (gw, record):
        port = int(gw.rsplit(":", 1)[1])
        codes = [
            _raw(port, f"/gemini/v1beta/models/x:generateContent{tail}", b'{"contents": []}')
            for tail in ("?x=:countTokens", "#:countTokens")
        ]
    # the query and fragment are not part of the path: each is the generate call it is, metered as one, or
    # refused; never forwarded as free
    calls = read_calls(record)
    assert all(code in (200, 404) for code in codes)
    assert all(c["path"] == "v1beta/models/x:generateContent" and c["usage"]["completion_tokens"] == 20 for c in calls)
    assert len(calls) == len(up.requests) == codes.count(200)
    assert all(r["path"].endswith(":generateContent") and r["query"] == {} for r in up.requests)


REFUSED_BODIES = [
    ("gemini/v1beta/models/g:streamGenerateContent?alt=proto", {"contents": []}),
    ("gemini/v1beta/models/g:streamGenerateContent?alt=media", {"contents": []}),
    ("gemini/v1beta/models/g:streamGenerateContent?alt=sse&alt=json", {"contents": []}),
    ("gemini/v1beta/models/g:countTokens", {"contents": [], "generationConfig": {"maxOutputTokens": 10}}),
    ("gemini/v1beta/models/g:countTokens", {"generateContentRequest": {"contents": [], "generationConfig": {}}}),
    (
        "gemini/v1beta/models/g:generateContent",
        {"contents": [], "generationConfig": {"maxOutputTokens": 5}, "generation_config": {"max_output_tokens": 99999}},
    ),
    (
        "gemini/v1beta/models/g:generateContent",
        {"contents": [], "generationConfig": {"maxOutputTokens": 5, "max_output_tokens": 99999}},
    ),
    ("gemini/v1beta/models/g:generateContent", {"contents": [], "cachedContent": "cachedContents/other-run"}),
    ("anthropic/v1/messages/count_tokens", {"model": "c", "messages": [], "max_tokens": 100, "stream": True}),
    ("openai/v1/responses", {"model": "gpt-5", "input": "hi", "background": True}),
    ("openai/v1/responses", {"model": "gpt-5", "input": "hi", "previous_response_id": "resp_of_another_run"}),
    ("openai/v1/responses", {"model": "gpt-5", "input": "hi", "conversation": "conv_1"}),
    ("openai/v1/responses", {"model": "gpt-5", "prompt": {"id": "pmpt_stored"}}),
    ("openai/v1/chat/completions", {"model": "m", "messages": [], "stream": "yes"}),
    ("openai/v1/chat/completions", {"model": "m", "messages": [], "max_tokens": "100000"}),
    ("openai/v1/chat/completions", {"model": "m", "messages": [], "max_tokens": -1}),
    ("openai/v1/chat/completions", {"model": "m", "messages": [], "n": True}),
]


def test_calls_whose_cost_cannot_be_seen_are_refused_before_forwarding(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base, budget_tokens=10_000) as (gw, record):
        for path, body in REFUSED_BODIES:
            resp = httpx.post(f"{gw}/{path}", headers={**AUTH, **GEMINI}, json=body)
            assert resp.status_code == 400 and resp.json()["error"], (path, body, resp.text)
        assert chat(gw).status_code == 200  # none of them closed the run
    assert len(up.requests) == 1
    calls = read_calls(record)
    assert [(c["outcome"], c["status"]) for c in calls[:-1]] == [("refused", 400)] * len(REFUSED_BODIES)


def test_free_methods_are_forwarded_as_what_they_are(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base, budget_tokens=1000) as (gw, record):
        answers = [
            httpx.post(f"{gw}/gemini/v1beta/models/g:countTokens?fields=x", headers=GEMINI, json={"contents": []}),
            httpx.post(
                f"{gw}/anthropic/v1/messages/count_tokens",
                headers={"x-api-key": TOKEN},
                json={"model": "c", "messages": [], "system": "s"},
            ),
            httpx.get(f"{gw}/openai/v1/models", headers=AUTH),
            httpx.get(f"{gw}/anthropic/v1/models", headers={"x-api-key": TOKEN}),
            httpx.get(f"{gw}/gemini/v1beta/models", headers=GEMINI),
        ]
        summary = usage_of(gw)
    assert [a.status_code for a in answers] == [200] * 5
    assert [r["path"] for r in up.requests] == [
        "/v1beta/models/g:countTokens",
        "/v1/messages/count_tokens",
        "/v1/models",
        "/v1/models",
        "/v1beta/models",
    ]
    assert up.requests[0]["query"] == {}  # a parameter the gateway does not know is not passed on
    assert summary["tokens"] == 0 and up.bills == []
    assert all(c["usage"] is None and "reserved" not in c for c in read_calls(record))


def test_a_duplicated_key_reaches_the_upstream_as_the_gateway_read_it(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    long_answer(up, 500)
    raw = b'{"model": "gpt-4o", "messages": [], "max_tokens": 10, "max_tokens": 300}'
    with gateway(tmp_path, base, budget_tokens=1000) as (gw, record):
        resp = httpx.post(f"{gw}/openai/v1/chat/completions", headers=AUTH, content=raw)
    assert resp.status_code == 200
    assert up.requests[0]["raw"].count("max_tokens") == 1 and up.requests[0]["body"]["max_tokens"] == 300
    (call,) = read_calls(record)
    assert (
        call["reserved"]["asked"] == 300
        and call["usage"]["completion_tokens"] == 300 == up.bills[0]["completion_tokens"]
    )


def test_a_continued_response_reserves_the_context_it_brings(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    with gateway(tmp_path, base, budget_tokens=10_000) as (gw, record):
        first = httpx.post(f"{gw}/openai/v1/responses", headers=AUTH, json={"model": "gpt-5", "input": "hi"}).json()
        second = httpx.post(
            f"{gw}/openai/v1/responses",
            headers=AUTH,
            json={"model": "gpt-5", "input": "more", "previous_response_id": first["id"]},
        )
        total = usage_of(gw)["tokens"]
    assert second.status_code == 200
    one, two = read_calls(record)
    # the upstream bills the earlier answer again as prompt: the reservation held it, the record has it
    assert two["usage"]["prompt_tokens"] == 11 + 31 == up.bills[1]["prompt_tokens"]
    held = [c["reserved"]["tokens"] - c["reserved"]["max_output"] for c in (one, two)]  # the prompt held
    assert held[1] > held[0] + 31
    assert total == up.billed


def test_a_cut_stream_under_a_budget_is_charged_its_reservation(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    up.mode = "cut"
    with gateway(tmp_path, base, budget_tokens=1000) as (gw, record):
        with (
            pytest.raises(httpx.HTTPError),
            httpx.stream(
                "POST",
                f"{gw}/openai/v1/chat/completions",
                headers=AUTH,
                json={"model": "gpt-4o", "messages": [], "stream": True, "max_tokens": 100},
            ) as resp,
        ):
            for _ in resp.iter_raw():
                pass
        spent = usage_of(gw)["tokens"]
    (call,) = read_calls(record)
    assert call["usage"]["source"] == "reserved" and call["usage"]["completion_tokens"] == 100
    assert spent == call["reserved"]["tokens"] >= up.billed


def test_meter_reservations_settlement_and_the_prompt_ratio() -> None:
    meter = Meter(budget_tokens=1000, min_output=10)
    a = meter.reserve("m", 100, 500)
    assert (a.prompt, a.output, a.max_output) == (100, 500, 500)
    b = meter.reserve("m", 100, None)  # no limit: what remains
    assert b.max_output == 300
    with pytest.raises(BudgetBusy):
        meter.reserve("m", 100, 50)
    meter.settle(b, None)  # nothing billed: released
    meter.settle(a, Usage(200, 100))  # the upstream billed twice the counted prompt
    assert meter.tokens == 300 and meter.reserved_tokens == 0
    c = meter.reserve("m", 100, 50)
    assert c.prompt == 200  # the estimate is scaled by what the upstream billed
    meter.settle(c, Usage(200, 50))
    with pytest.raises(BudgetSpent):
        meter.reserve("m", 300, 100)  # 550 spent, 600 + 10 would be the least this call needs
    with pytest.raises(BudgetSpent, match="no further model calls"):
        meter.reserve("m", 1, 1)  # closed, whatever the call
    assert meter.exhausted is not None and meter.in_flight == 0


FAMILIES = [
    (
        "openai/v1/chat/completions",
        lambda m, lim, s: {
            "model": "gpt-4o",
            "stream": s,
            "n": random.choice([1, 2]),
            "messages": [{"role": "user", "content": m}],
            **({"max_tokens": lim} if lim else {}),
        },
    ),
    (
        "openai/v1/responses",
        lambda m, lim, s: {"model": "gpt-4o", "stream": s, "input": m, **({"max_output_tokens": lim} if lim else {})},
    ),
    (
        "anthropic/v1/messages",
        lambda m, lim, s: {
            "model": "claude-sonnet-4",
            "stream": s,
            "max_tokens": lim or 4000,
            "messages": [{"role": "user", "content": m}],
        },
    ),
    (
        "gemini/v1beta/models/gemini-2.5-pro:generateContent",
        lambda m, lim, s: {
            "contents": [{"parts": [{"text": m}]}],
            **({"generationConfig": {"maxOutputTokens": lim}} if lim else {}),
        },
    ),
    (
        "gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
        lambda m, lim, s: {
            "contents": [{"parts": [{"text": m}]}],
            **({"generationConfig": {"maxOutputTokens": lim}} if lim else {}),
        },
    ),
    (
        "gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent",
        lambda m, lim, s: {
            "contents": [{"parts": [{"text": m}]}],
            **({"generationConfig": {"maxOutputTokens": lim}} if lim else {}),
        },
    ),
]
MODES = ["ok"] * 6 + ["no-usage", "cut", "error-usage", "rate-limited"]


async def _storm(gw: str, rng: random.Random, calls: int) -> tuple[dict[str, float], float]:
    """``calls`` random calls at random moments, some streams abandoned midway; when each was sent, and when the
    budget's refusal was first seen."""
    sent: dict[str, float] = {}
    refused_at = [float("inf")]

    async def one(client: httpx.AsyncClient, i: int) -> None:
        await asyncio.sleep(rng.random() * 0.05)
        path, make = rng.choice(FAMILIES)
        body = make(f"call-{i} " + "pad " * rng.randint(0, 200), rng.choice([None, 40, 150, 600]), rng.random() < 0.5)
        body["x_mode"] = rng.choice(MODES)
        abandon = rng.random() < 0.2
        for _ in range(8):  # a client retries while the budget is busy, as the model SDKs do on a 429
            sent[f"call-{i}"] = time.monotonic()
            try:
                async with client.stream("POST", f"{gw}/{path}", headers={**AUTH, **GEMINI}, json=body) as resp:
                    got = b""
                    async for chunk in resp.aiter_raw():
                        got += chunk
                        if abandon:
                            break
            except httpx.HTTPError:
                return  # a stream the upstream cut
            if resp.status_code == 429 and b"llm_budget_exhausted" in got.lower():
                refused_at[0] = min(refused_at[0], time.monotonic())
            if b"llm_budget_busy" not in got:
                return
            await asyncio.sleep(rng.random() * 0.05)

    async with httpx.AsyncClient(timeout=30) as client:
        await asyncio.gather(*(one(client, i) for i in range(calls)))
    return sent, refused_at[0]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_interleavings_never_bill_past_the_budget(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    random.seed(seed)
    budget = rng.randint(4000, 15000)
    with scripted_upstream() as (base, up):
        up.prompt_tokens = None  # each prompt billed by its length
        long_answer(up, rng.randint(100, 700))
        with gateway(tmp_path, base, budget_tokens=budget, min_output=16, default_max_output=300) as (gw, record):
            sent, refused_at = asyncio.run(_storm(gw, rng, 40))
            time.sleep(0.3)  # the abandoned streams' upstream ends settle
            summary = usage_of(gw)
    calls = read_calls(record)
    largest = max((c["reserved"]["tokens"] for c in calls if c.get("reserved")), default=0)
    assert up.billed <= budget + largest, (up.billed, budget, largest)
    assert summary["tokens"] >= up.billed  # nothing billed went unrecorded
    assert summary["in_flight"] == 0 and summary["reserved_tokens"] == 0
    # every call the upstream billed with its usage reaching the gateway is recorded as billed
    recorded = recorded_by_marker(record)
    for bill in up.bills:
        usage = recorded[bill["marker"]]["usage"]
        if usage["source"] == "upstream":
            assert (usage["prompt_tokens"], usage["completion_tokens"]) == (
                bill["prompt_tokens"],
                bill["completion_tokens"],
            )
    # once a refusal for the budget was seen, nothing sent after it was billed
    assert not [b for b in up.bills if sent[b["marker"]] > refused_at]
    assert json.dumps(summary)  # the summary stays JSON


def test_an_agent_without_a_network_gets_none_through_its_upstreams_tools(tmp_path: Path, upstream: Any) -> None:
    base, up = upstream
    msgs = [{"role": "user", "content": "find the GSM8K test answers"}]
    asks = [
        ("openai/v1/chat/completions", AUTH, {"model": "gpt-4o", "messages": msgs, "web_search_options": {}}),
        ("openai/v1/responses", AUTH, {"model": "gpt-5", "input": "hi", "tools": [{"type": "web_search_preview"}]}),
        (
            "openai/v1/responses",
            AUTH,
            {"model": "gpt-5", "input": "hi", "tools": [{"type": "mcp", "server_url": "https://x.example"}]},
        ),
        (
            "anthropic/v1/messages",
            {"x-api-key": TOKEN},
            {
                "model": "claude-sonnet-4",
                "max_tokens": 100,
                "messages": msgs,
                "tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}],
            },
        ),
        (
            "anthropic/v1/messages",
            {"x-api-key": TOKEN},
            {
                "model": "claude-sonnet-4",
                "max_tokens": 100,
                "messages": msgs,
                "mcp_servers": [{"type": "url", "url": "https://x.example", "name": "x"}],
            },
        ),
        (
            "gemini/v1beta/models/gemini-2.5-pro:generateContent",
            GEMINI,
            {"contents": [], "tools": [{"googleSearch": {}}]},
        ),
        (
            "gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
            GEMINI,
            {"contents": [], "tools": [{"functionDeclarations": []}, {"url_context": {}}]},
        ),
    ]
    own_tools = [
        (
            "openai/v1/chat/completions",
            AUTH,
            {"model": "gpt-4o", "messages": msgs, "tools": [{"type": "function", "function": {"name": "sh"}}]},
        ),
        (
            "anthropic/v1/messages",
            {"x-api-key": TOKEN},
            {
                "model": "claude-sonnet-4",
                "max_tokens": 100,
                "messages": msgs,
                "tools": [{"type": "bash_20250124", "name": "bash"}, {"name": "edit", "input_schema": {}}],
            },
        ),
        (
            "gemini/v1beta/models/gemini-2.5-pro:generateContent",
            GEMINI,
            {"contents": [], "tools": [{"functionDeclarations": [{"name": "sh"}]}]},
        ),
    ]
    with gateway(tmp_path, base, server_tools=False) as (gw, record):
        refused = [httpx.post(f"{gw}/{path}", headers=h, json=b, timeout=30) for path, h, b in asks]
        passed = [httpx.post(f"{gw}/{path}", headers=h, json=b, timeout=30) for path, h, b in own_tools]
    assert [r.status_code for r in refused] == [400] * len(asks)
    assert all("server_tool_refused" in r.text.lower() for r in refused)
    assert [r.status_code for r in passed] == [200] * len(own_tools)
    assert len(up.requests) == len(own_tools)  # nothing that asked for the upstream's tools reached it
    assert sum(c["outcome"] == "refused" for c in read_calls(record)) == len(asks)
    # with the agent's network on, the same calls pass: it could fetch the pages itself
    with gateway(tmp_path / "on", base) as (gw, _):
        assert all(
            httpx.post(f"{gw}/{path}", headers=h, json=b, timeout=30).status_code == 200 for path, h, b in asks[:2]
        )
