"""Following a streamed answer as its bytes pass: the events it carries, the text generated, the usage, and
whether it ended as its API ends a stream.

Three shapes, chosen by the response's content type (``shape_of``): server-sent events (httpx-sse's decoders),
a JSON array streamed element by element (Gemini's ``streamGenerateContent`` without ``alt=sse``) and NDJSON.
The bytes the agent receives are the upstream's, unchanged. A body that breaks its shape (``Tap.broken``)
cannot be metered: the gateway stops passing it on.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass, field
from typing import Any

from httpx_sse._decoders import SSEDecoder, SSELineDecoder

from autorl.gateway.usage import Usage, tokens_of, usage_from_body

SSE, JSON, NDJSON = "sse", "json", "ndjson"
_STRING_STOP = re.compile(r'["\\]')
_NDJSON_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines")


def shape_of(content_type: str) -> str | None:
    """The shape a response's content type announces; None for one the gateway cannot meter."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "text/event-stream":
        return SSE
    if media in _NDJSON_TYPES:
        return NDJSON
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return JSON
    return None


class JsonValues:
    """The complete JSON values of a body as its text arrives: the body when it is one object, each element
    when it is an array of objects. ``broken`` when the text is neither; ``done`` when the body has ended."""

    def __init__(self) -> None:
        self.depth = 0
        self.array = False
        self.done = False
        self.broken = False
        self._capturing = False
        self._in_string = False
        self._escaped = False
        self._buf: list[str] = []

    @property
    def pending(self) -> bool:
        """Whether a value, or the array, is still open."""
        return self._capturing or (self.array and not self.done)

    def feed(self, text: str) -> list[str]:
        out: list[str] = []
        start = 0 if self._capturing else None
        base = 1 if self.array else 0
        i, n = 0, len(text)
        while i < n and not self.broken:
            ch = text[i]
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                else:
                    stop = _STRING_STOP.search(text, i)
                    if stop is None:
                        break
                    i = stop.start()
                    self._escaped = text[i] == "\\"
                    self._in_string = self._escaped
                i += 1
                continue
            if self._capturing:
                if ch == '"':
                    self._in_string = True
                elif ch in "{[":
                    self.depth += 1
                elif ch in "}]":
                    self.depth -= 1
                    if self.depth == base:
                        out.append("".join(self._buf) + text[start or 0 : i + 1])
                        self._buf, start, self._capturing = [], None, False
                        self.done = not self.array
            elif ch in " \t\r\n":
                pass
            elif self.done:
                self.broken = True
            elif self.depth == 0 and ch == "[":
                self.array, self.depth, base = True, 1, 1
            elif ch == "{" or (ch == "[" and self.array):
                self._capturing, start = True, i
                self.depth += 1
            elif self.array and ch == ",":
                pass
            elif self.array and ch == "]":
                self.depth, self.done = 0, True
            else:  # a bare value where an object was expected
                self.broken = True
            i += 1
        if start is not None and self._capturing:
            self._buf.append(text[start:])
        return out


@dataclass
class Tap:
    """Follows a streamed answer of ``family`` in ``shape``: events, generated text, usage, whether it ended."""

    family: str
    shape: str = SSE
    text_limit: int = 256 * 1024
    events: int = 0
    text: list[str] = field(default_factory=list)
    text_chars: int = 0
    usage: Usage | None = None
    finished: bool = False
    error: str | None = None
    broken: bool = False
    #: the id of a responses-API answer (for ``previous_response_id``)
    response_id: str | None = None

    def __post_init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lines = SSELineDecoder()
        self._sse = SSEDecoder()
        self._json = JsonValues()
        self._partial = ""
        self._kept = 0
        self._anthropic = Usage()

    def feed(self, chunk: bytes) -> None:
        self._text(self._utf8.decode(chunk))

    def close(self) -> None:
        self._text(self._utf8.decode(b"", final=True))
        if self.shape == SSE:
            for line in self._lines.flush():
                self._line(line)
            self._line("")
        elif self.shape == NDJSON:
            self._ndjson_line(self._partial)
            self.finished = self.finished or not self.broken
        elif self._json.pending or not (self._json.done or self._json.array):
            self.broken = True
        elif self._json.array:
            self.finished = True

    def _text(self, text: str) -> None:
        if self.shape == SSE:
            for line in self._lines.decode(text):
                self._line(line)
        elif self.shape == NDJSON:
            *lines, self._partial = (self._partial + text).split("\n")
            for line in lines:
                self._ndjson_line(line)
        else:
            for value in self._json.feed(text):
                self._frame("", value)
            self.broken = self.broken or self._json.broken

    def _line(self, line: str) -> None:
        sse = self._sse.decode(line.rstrip("\n"))
        if sse is not None:
            self._frame(sse.event, sse.data)

    def _ndjson_line(self, line: str) -> None:
        if line.strip():
            try:
                self._event("", json.loads(line))
            except ValueError:
                self.broken = True

    def _frame(self, event: str, raw: str) -> None:
        if raw.strip() == "[DONE]":
            self.events += 1
            self.finished = True
            return
        try:
            data = json.loads(raw)
        except ValueError:
            self.events += 1
            self._add_text(raw)  # not JSON: counted as generated text, so that nothing goes uncounted
            return
        self._event(event, data)

    def _add_text(self, piece: str) -> None:
        if self._kept < self.text_limit:
            self.text.append(piece)
            self._kept += len(piece)
        self.text_chars += len(piece)

    def _event(self, event: str, data: Any) -> None:
        self.events += 1
        for piece in texts(self.family, data):
            self._add_text(piece)
        if not isinstance(data, dict):
            return
        kind = str(data["type"]) if isinstance(data.get("type"), str) else event
        if self.family == "anthropic":
            self._anthropic_event(kind, data)
        elif self.family == "gemini":
            self.usage = usage_from_body("gemini", data) or self.usage
            if any(isinstance(c, dict) and c.get("finishReason") for c in data.get("candidates") or []):
                self.finished = True
            if isinstance(data.get("error"), dict):
                self.error = json.dumps(data["error"])[:500]
        else:
            self._openai_event(kind, data)

    def _anthropic_event(self, kind: str, data: dict[str, Any]) -> None:
        message = data.get("message")
        if kind == "message_start" and isinstance(message, dict):
            start = usage_from_body("anthropic", message)
            if start is not None:
                self._anthropic = start
                self.usage = self._anthropic
        elif kind == "message_delta" and isinstance(data.get("usage"), dict):
            usage = data["usage"]
            self._anthropic.completion_tokens = tokens_of(usage.get("output_tokens"))
            if "input_tokens" in usage:  # newer streams give the final input figures here too
                whole = usage_from_body("anthropic", {"usage": usage})
                if whole is not None:
                    self._anthropic.prompt_tokens = max(self._anthropic.prompt_tokens, whole.prompt_tokens)
            self.usage = self._anthropic
        elif kind == "message_stop":
            self.finished = True
        elif kind == "error":
            self.error = json.dumps(data.get("error"))[:500]

    def _openai_event(self, kind: str, data: dict[str, Any]) -> None:
        response = data.get("response")
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            self.response_id = response["id"][:200]
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.usage = usage_from_body("openai", response) or self.usage
            self.finished = True
            if kind == "response.failed":
                self.error = "the upstream reported response.failed"
        elif kind == "error" or (isinstance(data.get("error"), dict) and "choices" not in data):
            self.error = json.dumps(data.get("error") or data)[:500]
            self.usage = usage_from_body("openai", data) or self.usage
        elif "choices" in data or "usage" in data:
            self.usage = usage_from_body("openai", data) or self.usage

    @property
    def streamed_text(self) -> str:
        return "".join(self.text)


def texts(family: str, data: Any) -> list[str]:
    """The generated text a stream event carries (content, tool arguments, reasoning)."""
    out: list[str] = []
    if not isinstance(data, dict):
        return out
    if family == "gemini":
        for cand in data.get("candidates") or []:
            parts = ((cand or {}).get("content") or {}).get("parts") if isinstance(cand, dict) else None
            for part in parts or []:
                if isinstance(part, dict):
                    out += [str(part["text"])] if "text" in part else []
                    out += [json.dumps(part["functionCall"])] if "functionCall" in part else []
        return out
    if family == "anthropic":
        delta = data.get("delta")
        if isinstance(delta, dict):
            out += [str(delta[k]) for k in ("text", "partial_json", "thinking") if isinstance(delta.get(k), str)]
        return out
    if isinstance(data.get("delta"), str):  # responses API: *.delta events
        return [data["delta"]]
    for choice in data.get("choices") or []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            continue
        out += [str(delta[k]) for k in ("content", "reasoning_content") if isinstance(delta.get(k), str)]
        for call in delta.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                out += [str(fn.get(k)) for k in ("name", "arguments") if isinstance(fn.get(k), str)]
    return out


__all__ = ["JSON", "NDJSON", "SSE", "JsonValues", "Tap", "shape_of", "texts"]
