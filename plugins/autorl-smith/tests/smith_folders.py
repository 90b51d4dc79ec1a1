"""What the smith tests share: a benchmark folder written to disk, the real command line, and a scripted driver
model (a real OpenAI-compatible server on 127.0.0.1) for `autorl smith generate`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def write_folder(
    root: Path,
    name: str,
    *,
    eval_py: str,
    train: list[dict[str, Any]],
    test: list[dict[str, Any]] | None = None,
    config: dict[str, Any] | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """``root/name``: config.yaml (per_sample, nothing exposed, then ``config``), eval.py, data/train.jsonl,
    data/test.jsonl when ``test`` is given, and ``files`` (relative path -> text)."""
    folder = root / name
    (folder / "data").mkdir(parents=True)
    cfg = {"name": name, "eval_mode": "per_sample", "expose_files": [], **(config or {})}
    (folder / "config.yaml").write_text(json.dumps(cfg))  # JSON is YAML
    (folder / "eval.py").write_text(eval_py)
    (folder / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
    if test is not None:
        (folder / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in test))
    for rel, text in (files or {}).items():
        (folder / rel).write_text(text)
    return folder


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real ``autorl`` command line in a subprocess, with ``env`` over this one's environment."""
    return subprocess.run(
        [sys.executable, "-c", "from autorl.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=900,
    )


GOOD_EVAL = (
    "def evaluate(question, model_answer, reference_answer, **kwargs):\n"
    "    return 1.0 if model_answer.strip() == reference_answer.strip() else 0.0\n"
)
LAX_EVAL = "def evaluate(question, model_answer, reference_answer, **kwargs):\n    return 1.0\n"


def folder_reply(eval_py: str = GOOD_EVAL, question: str = "What is {a} times {b}?") -> str:
    files = {
        "config.yaml": yaml.safe_dump(
            {
                "name": "whatever",
                "eval_mode": "per_sample",
                "expose_files": [],
                "prompt_template": "Q: {question}\nA:",
                "max_new_tokens": 8,
            }
        ),
        "eval.py": eval_py,
        "description.md": "# Products\n\nMultiply two numbers; answer with digits.\n",
    }
    return (
        "Here it is:\n```json\n"
        + json.dumps({"columns": {"question": question, "answer": "product"}, "files": files})
        + "\n```"
    )


@contextmanager
def scripted_driver(replies: list[str]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An OpenAI-compatible chat server answering with ``replies`` in order."""
    seen: list[dict[str, Any]] = []

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        content = replies[min(len(seen), len(replies)) - 1]
        return JSONResponse(
            {
                "id": "x",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                ],
                "usage": {"prompt_tokens": 500, "completion_tokens": 200, "total_tokens": 700},
            }
        )

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])]),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        server.should_exit = True
        thread.join(timeout=10)
