"""GSM8K data: the hub's ``openai/gsm8k`` (config ``main``) or a local mirror, normalised to JSONL."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from autorl import ResourceError, read_jsonl, write_jsonl_atomic

REPO_ID = "openai/gsm8k"
HUB_FILES = {"train": "main/train-00000-of-00001.parquet", "test": "main/test-00000-of-00001.parquet"}
DEV_SIZE = 500


def _read_rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path, columns=["question", "answer"]).to_pylist()
    else:
        rows = read_jsonl(path)
    for i, row in enumerate(rows):
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("question"), str)
            or not isinstance(row.get("answer"), str)
        ):
            raise ResourceError(f"{path}: row {i + 1} lacks string fields question and answer")
    return rows


def _from_mirror(folder: Path, split: str) -> list[dict[str, Any]] | None:
    for candidate in (folder / f"{split}.jsonl", folder / HUB_FILES[split], folder / f"{split}.parquet"):
        if candidate.is_file():
            return _read_rows(candidate)
    return None


def _from_hub(split: str, cache_dir: Path) -> list[dict[str, Any]]:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        path = hf_hub_download(REPO_ID, HUB_FILES[split], repo_type="dataset", cache_dir=str(cache_dir))
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError) as exc:
        raise ResourceError(
            f"GSM8K's {split} split is neither in a local mirror nor downloadable from the hub ({type(exc).__name__}); "
            "set AUTORL_DATA_DIR to a folder holding gsm8k/train.jsonl and gsm8k/test.jsonl (or the hub's "
            "main/*.parquet files), or pass the benchmark option data_dir"
        ) from None
    return _read_rows(Path(path))


def mirror_dir(option: str | None) -> Path | None:
    """The local mirror in force: the benchmark option ``data_dir``, else ``AUTORL_DATA_DIR/gsm8k``."""
    if option:
        return Path(option)
    return Path(os.environ["AUTORL_DATA_DIR"]) / "gsm8k" if os.environ.get("AUTORL_DATA_DIR") else None


def load_official(split: str, raw_dir: Path, mirror: Path | None) -> list[dict[str, Any]]:
    """The official split: read from the local mirror whenever one is given (what it holds now, never an
    older copy), else from the hub download cached as JSONL in ``raw_dir`` (a grader-owned folder)."""
    if mirror is not None:
        rows = _from_mirror(mirror, split)
        if rows is not None:
            return rows
    cached = raw_dir / f"{split}.jsonl"
    if cached.is_file():
        return _read_rows(cached)
    rows = _from_hub(split, raw_dir / "hub")
    raw_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(cached, [{"question": r["question"], "answer": r["answer"]} for r in rows])
    return rows


def content_ids(split: str, rows: list[dict[str, Any]]) -> list[str]:
    """Ids from each problem's content (question and solution), so another data version or order never pairs
    different problems under one id; a repeated problem gets ``-2``, ``-3``... in order."""
    seen: dict[str, int] = {}
    ids = []
    for row in rows:
        digest = hashlib.sha256(json.dumps([row["question"], row["answer"]]).encode()).hexdigest()[:12]
        seen[digest] = seen.get(digest, 0) + 1
        ids.append(f"{split}-{digest}" + (f"-{seen[digest]}" if seen[digest] > 1 else ""))
    return ids
