"""The agent's trajectory on the run page: the model calls as the LLM gateway recorded them, else the agent's
own ``trajectory.jsonl``/``transcript.jsonl`` (agent-written: read through :mod:`autorl.untrusted`, tails
only, lines capped), and its HTML, every field escaped."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

from autorl import untrusted
from autorl.ui.shell import NOT_SHOWN, untrusted_section

__all__ = ["Trajectory", "Turn", "gateway_trajectory", "trajectory", "trajectory_html"]


class ToolCall(TypedDict):
    """A tool call of a turn, as text."""

    id: str | None
    name: str | None
    arguments: str | None


class Usage(TypedDict):
    """The tokens of a turn (0 where the record gives no number)."""

    prompt_tokens: int
    completion_tokens: int


class Step(TypedDict):
    """One model call: what it answered, the tools it called and their results, its tokens and latency."""

    kind: Literal["turn"]
    step: str
    content: str | None
    tool_calls: list[ToolCall]
    tool_results: list[str]
    usage: Usage
    latency_s: float | None


class Event(TypedDict):
    """Something the agent or the gateway noted that is not a model call (a failed call, the agent's event)."""

    kind: Literal["event"]
    event: str
    detail: str


class OtherRecord(TypedDict):
    """A record of the agent's that is neither: shown as it is, as text."""

    kind: Literal["record"]
    source: str
    type: str | None
    detail: str


#: one entry of a trajectory, every field text or a plain number
Turn = Step | Event | OtherRecord


class Trajectory(TypedDict):
    """The turns of a run (:func:`trajectory`, :func:`gateway_trajectory`), the malformed lines skipped and
    whether earlier ones were left out; or, for a file that cannot be read safely, why."""

    source: str
    turns: list[Turn]
    bad_lines: int
    truncated: bool
    error: NotRequired[str]
    #: ``gateway`` when the LLM gateway recorded the calls (else the agent reported them)
    recorded_by: NotRequired[str]


#: the most of a trajectory file read (its tail), and of one line of it
TRAJECTORY_LIMIT = 4 << 20
TRAJECTORY_LINE_LIMIT = 256 << 10


def trajectory(workspace: Path, limit: int = 500) -> Trajectory | None:
    """The agent's last ``limit`` turns from ``trajectory.jsonl`` (the llm agent) or ``transcript.jsonl`` (a
    coding CLI), as ``{"source", "turns", "bad_lines", "truncated"}`` or ``{"source", "error"}``.

    Agent-written: lines that are not JSON objects, too long or too deep are counted in ``bad_lines``; any
    field of any type is shown as text.
    """
    for name in ("trajectory.jsonl", "transcript.jsonl"):
        stats = untrusted.JsonlStats()
        try:
            records = list(
                untrusted.iter_jsonl(
                    workspace, name, limit=TRAJECTORY_LIMIT, max_line=TRAJECTORY_LINE_LIMIT, stats=stats, tail=True
                )
            )
        except untrusted.UntrustedFileError as exc:
            if "does not exist" in str(exc):
                continue
            return {"source": name, "error": str(exc), "turns": [], "bad_lines": 0, "truncated": False}
        turns = [_turn(r, name) for r in records[-limit:]]
        return {
            "source": name,
            "turns": turns,
            "bad_lines": stats.bad_lines,
            "truncated": stats.truncated or len(records) > limit,
        }
    return None


def gateway_trajectory(result: Mapping[str, Any] | None, limit: int = 500) -> Trajectory | None:
    """The model calls of a finished run as the LLM gateway recorded them (for every agent), in the shape of
    ``trajectory``; None when the run has no gateway record or no call in it."""
    gateway = ((result or {}).get("meta") or {}).get("llm_gateway")
    if not isinstance(gateway, Mapping) or not gateway.get("record_dir"):
        return None
    from autorl.gateway.record import read_calls

    calls = read_calls(str(gateway["record_dir"]), limit=TRAJECTORY_LIMIT)
    if not calls:
        return None
    turns = [_gateway_turn(k, c) for k, c in enumerate(calls, 1)][-limit:]
    return {
        "source": "llm gateway",
        "recorded_by": "gateway",
        "turns": turns,
        "bad_lines": 0,
        "truncated": len(calls) > limit,
    }


def _gateway_turn(step: int, call: Mapping[str, Any]) -> Turn:
    if call.get("outcome") != "ok":
        return {
            "kind": "event",
            "event": f"call {step} {_text(call.get('outcome')) or ''}",
            "detail": _text(call.get("error")) or "",
        }
    response = call.get("response")
    content: Any = response
    calls: list[ToolCall] = []
    if isinstance(response, Mapping) and "events" in response:  # a stream: the text it carried
        content = response.get("text")
    elif isinstance(response, Mapping) and isinstance(response.get("choices"), list) and response["choices"]:
        first = response["choices"][0]
        message = first.get("message") if isinstance(first, Mapping) else None
        if isinstance(message, Mapping):
            content = message.get("content")
            for tc in message.get("tool_calls") or [] if isinstance(message.get("tool_calls"), list) else []:
                fn = tc.get("function") if isinstance(tc, Mapping) else None
                if isinstance(fn, Mapping):
                    calls.append(
                        {
                            "id": _text(tc.get("id")),
                            "name": _text(fn.get("name")),
                            "arguments": _text(fn.get("arguments")),
                        }
                    )
    raw_usage = call.get("usage")
    usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, Mapping) else {}
    return {
        "kind": "turn",
        "step": f"{step} ({_text(call.get('family'))} {_text(call.get('model'))})",
        "content": _text(content),
        "tool_calls": calls,
        "tool_results": [],
        "usage": {
            "prompt_tokens": _int(usage.get("prompt_tokens")),
            "completion_tokens": _int(usage.get("completion_tokens")),
        },
        "latency_s": _num(call.get("latency_s")),
    }


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else _dump(value)


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, indent=1)
    except (TypeError, ValueError, RecursionError):
        return repr(value)[:4000]


def _num(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) else 0


def _turn(record: dict[str, Any], source: str) -> Turn:
    """One trajectory record, every field reduced to text or a plain number (the record is the agent's)."""
    if "event" in record:
        return {
            "kind": "event",
            "event": _text(record["event"]) or "",
            "detail": _dump({k: v for k, v in record.items() if k != "event"}),
        }
    message = record.get("message")
    if "step" in record and isinstance(message, dict):
        calls: list[ToolCall] = []
        raw_calls = message.get("tool_calls")
        for call in raw_calls if isinstance(raw_calls, list) else []:
            call = call if isinstance(call, dict) else {}
            fn: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else {}
            calls.append(
                {"id": _text(call.get("id")), "name": _text(fn.get("name")), "arguments": _text(fn.get("arguments"))}
            )
        results = record.get("tool_results")
        usage: dict[str, Any] = record["usage"] if isinstance(record.get("usage"), dict) else {}
        latency = record.get("latency_s")
        return {
            "kind": "turn",
            "step": _text(record["step"]) or "",
            "content": _text(message.get("content")),
            "tool_calls": calls,
            "tool_results": [_text(r) or "" for r in (results if isinstance(results, list) else [])],
            "usage": {
                "prompt_tokens": _int(usage.get("prompt_tokens")),
                "completion_tokens": _int(usage.get("completion_tokens")),
            },
            "latency_s": _num(latency),
        }
    return {"kind": "record", "source": source, "type": _text(record.get("type")), "detail": _dump(record)}


def trajectory_html(traj: Trajectory | None) -> str:
    """The agent's trajectory (its own record of what it did), every field escaped."""
    if traj is None:
        return ""
    source = str(traj.get("source") or "trajectory")
    if traj.get("error"):
        return untrusted_section(
            f"Trajectory ({source})", f"<p class='warning'>{NOT_SHOWN}: {escape(str(traj['error']))}</p>"
        )
    turns = traj.get("turns") or []
    steps = [t for t in turns if t["kind"] == "turn"]
    total_in = sum(t["usage"]["prompt_tokens"] for t in steps)
    total_out = sum(t["usage"]["completion_tokens"] for t in steps)
    items = []
    for t in turns:
        if t["kind"] == "turn":
            calls = "".join(
                f"<div><b>{escape(str(c.get('name')))}</b><pre>{escape(_pretty(c.get('arguments')))}</pre></div>"
                for c in t["tool_calls"]
            )
            results = "".join(
                f"<div class='muted'>result</div><pre>{escape(_pretty(r))}</pre>" for r in t["tool_results"]
            )
            u = t["usage"]
            names = ", ".join(str(c.get("name")) for c in t["tool_calls"]) or "message"
            latency = f"· {t['latency_s']:.1f} s" if t.get("latency_s") is not None else ""
            items.append(f"""<details class="turn" data-step="{escape(str(t["step"]))}"><summary>step {escape(str(t["step"]))}: {escape(names)}
<span class="muted">· {u["prompt_tokens"]} in / {u["completion_tokens"]} out tokens {latency}</span></summary>
{f"<pre>{escape(str(t['content']))}</pre>" if t.get("content") else ""}{calls}{results}</details>""")
        elif t["kind"] == "event":
            items.append(
                f'<div class="muted">event: {escape(str(t["event"])[:200])} {escape(str(t["detail"])[:300])}</div>'
            )
        else:
            items.append(
                f"<details class='turn'><summary>{escape(str(t.get('type') or 'record'))}</summary>"
                f"<pre>{escape(str(t['detail'])[:4000])}</pre></details>"
            )
    notes = []
    if traj.get("bad_lines"):
        notes.append(f"{int(traj['bad_lines'])} malformed line(s) skipped")
    if traj.get("truncated"):
        notes.append("earlier lines not shown")
    note = f"<p class='note'>{escape('; '.join(notes))}</p>" if notes else ""
    who = "recorded by the LLM gateway" if traj.get("recorded_by") == "gateway" else "agent-reported"
    title = f"Trajectory ({source}: {len(steps)} turns, {total_in} in / {total_out} out tokens, {who})"
    return untrusted_section(title, f"{note}<div id='trajectory'>{''.join(items)}</div>")


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        try:
            return json.dumps(json.loads(value), indent=1)[:6000]
        except (ValueError, RecursionError):
            return value[:6000]
    try:
        return json.dumps(value, indent=1)[:6000]
    except (TypeError, ValueError, RecursionError):
        return repr(value)[:6000]
