"""What the smith tests share: a benchmark folder written to disk, and the real command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def write_folder(root: Path, name: str, *, eval_py: str, train: list[dict[str, Any]],
                 test: list[dict[str, Any]] | None = None, config: dict[str, Any] | None = None,
                 files: dict[str, str] | None = None) -> Path:
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
    return subprocess.run([sys.executable, "-c", "from autorl.cli import main; main()", *args],
                          capture_output=True, text=True, env={**os.environ, **env}, timeout=900)
