"""Where ``autorl smith generate`` takes its data from: a local folder or file, a git URL, a hub dataset id.

The rows are read by code (jsonl, json, csv, parquet); a file whose path names a test, eval, validation or
dev split holds the evaluation rows, every other one the training rows.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from autorl import UsageError

SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
EVAL_WORDS = {"test", "eval", "evaluation", "valid", "validation", "dev"}
MAX_FILE_BYTES = 2 * 2**30


def fetch(source: str, scratch: Path) -> Path:
    """A local path for ``source``: itself, a shallow clone of a git URL, or a hub dataset's snapshot."""
    local = Path(source).expanduser()
    if local.exists():
        return local
    if re.match(r"^(https?|file|ssh|git)://|^git@", source) or source.endswith(".git"):
        dest = scratch / "repo"
        proc = subprocess.run(
            ["git", "clone", "--depth", "1", "--quiet", "--", source, str(dest)],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"cannot clone {source}: {tail[:200]}")
        return dest
    if not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", source):
        raise UsageError(f"{source} is neither a local path, a git URL nor a hub dataset id (owner/name)")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise UsageError("a hub dataset needs huggingface_hub: pip install huggingface_hub") from None
    try:
        return Path(snapshot_download(repo_id=source, repo_type="dataset", allow_patterns=[f"*{s}" for s in SUFFIXES]))
    except Exception as exc:  # the hub's errors are many kinds; each is one line here
        raise UsageError(f"cannot get the hub dataset {source}: {str(exc).splitlines()[0][:200]}") from None


def read_table(path: Path) -> list[dict[str, Any]]:
    """The rows (objects) of one data file; anything that is not an object is skipped."""
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise UsageError(f"{path}: reading parquet needs pyarrow: pip install pyarrow") from None
        rows: list[Any] = pq.read_table(path).to_pylist()
    elif path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8", errors="replace") as f:
            rows = list(csv.DictReader(f))
    elif path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        rows = data if isinstance(data, list) else []
    else:
        rows = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    return [r for r in rows if isinstance(r, dict)]


def is_eval_file(rel: Path) -> bool:
    words = {w for part in rel.with_suffix("").parts for w in re.split(r"[^a-z]+", part.lower())}
    return bool(words & EVAL_WORDS)


def load_rows(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(training rows, evaluation rows) of every data file under ``root`` (links are not followed)."""
    files = (
        [root]
        if root.is_file()
        else sorted(
            p
            for p in root.rglob("*")
            if p.suffix in SUFFIXES and p.is_file() and not p.is_symlink() and ".git" not in p.relative_to(root).parts
        )
    )
    if not files:
        raise UsageError(f"{root}: no data file ({', '.join(SUFFIXES)})")
    train: list[dict[str, Any]] = []
    evals: list[dict[str, Any]] = []
    for path in files:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UsageError(f"{path}: larger than {MAX_FILE_BYTES >> 30} GiB")
        try:
            rows = read_table(path)
        except (ValueError, OSError) as exc:
            raise UsageError(f"{path}: cannot be read: {str(exc).splitlines()[0][:200]}") from None
        (evals if root.is_dir() and is_eval_file(path.relative_to(root)) else train).extend(rows)
    if not train and not evals:
        raise UsageError(f"{root}: the data files hold no rows")
    return train, evals
