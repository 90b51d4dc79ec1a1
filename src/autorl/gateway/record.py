"""The gateway's record of every call: ``calls.jsonl`` in the run's gateway folder, outside the workspace.

One JSON object a line, written by the gateway alone: ``id``, ``time``, ``family``, ``path``, ``model``,
``stream``, ``status`` (the HTTP status the agent got), ``outcome`` (``ok``, ``failed``, ``refused``),
``error``, ``latency_s``, ``usage`` (``prompt_tokens``, ``completion_tokens``, ``cached_tokens``,
``source``), ``cost_usd``, ``request`` (the body, cut at ``BODY_LIMIT`` characters) and ``response`` (the
body, or for a stream the text it carried and its number of events). Readers (the dashboard, the audit) use
``read_calls``, which caps what it reads and skips lines it cannot parse: request and response bodies came
from the agent and its model.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CALLS_NAME = "calls.jsonl"
SUMMARY_NAME = "summary.json"
BODY_LIMIT = 256 * 1024
READ_LIMIT = 256 * 1024 * 1024


def cut(value: Any, limit: int = BODY_LIMIT) -> Any:
    """A JSON value as recorded: itself when small, else its text cut at ``limit`` characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = str(value)
    if len(text) <= limit:
        return value
    return {"truncated": True, "chars": len(text), "head": text[:limit]}


class CallLog:
    """Appends call records to ``<folder>/calls.jsonl`` (opened without following links, mode 0600)."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / CALLS_NAME
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self._fh = os.fdopen(fd, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, default=str) + "\n"
        with self._lock:
            self._fh.write(line)
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def read_calls(folder: Path | str, limit: int = READ_LIMIT) -> list[dict[str, Any]]:
    """The records of a run's gateway folder, oldest first; an absent file gives none."""
    path = Path(folder) / CALLS_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit)
    out = []
    for line in data.splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # bodies came from the agent: a line too deep is skipped
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def call_texts(folder: Path | str) -> Iterator[tuple[str, str, bytes]]:
    """What the audit scans of each recorded call, as (where, name, bytes): the prompt the agent sent (named
    ``*.prompt``: it holds the harness's own instructions, so download commands are not looked for there) and
    the model's answer (``*.answer.txt``)."""
    for call in read_calls(folder):
        where = f"llm gateway call {str(call.get('id'))[:32]}"
        yield f"{where} (prompt)", "request.prompt", json.dumps(call.get("request"))[: BODY_LIMIT * 2].encode()
        response = call.get("response")
        text = response.get("text") if isinstance(response, dict) and "events" in response else response
        yield f"{where} (answer)", "answer.txt", (text if isinstance(text, str) else json.dumps(text)).encode()
