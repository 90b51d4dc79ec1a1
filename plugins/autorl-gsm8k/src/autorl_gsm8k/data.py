"""GSM8K data: the hub's ``openai/gsm8k`` (config ``main``) or a local mirror, normalised to JSONL."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

from autorl.errors import ResourceError

REPO_ID = "openai/gsm8k"
HUB_FILES = {"train": "main/train-00000-of-00001.parquet", "test": "main/test-00000-of-00001.parquet"}
DEV_SIZE = 500
DEV_SEED = 1234


def _read_rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path, columns=["question", "answer"]).to_pylist()
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("question"), str) or not isinstance(row.get("answer"), str):
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


def load_official(split: str, raw_dir: Path, mirror: Path | None) -> list[dict[str, Any]]:
    """The official split, cached as JSONL in ``raw_dir`` (a grader-owned folder)."""
    cached = raw_dir / f"{split}.jsonl"
    if cached.is_file():
        return _read_rows(cached)
    mirror = mirror or (Path(os.environ["AUTORL_DATA_DIR"]) / "gsm8k" if os.environ.get("AUTORL_DATA_DIR") else None)
    rows = _from_mirror(mirror, split) if mirror else None
    if rows is None:
        rows = _from_hub(split, raw_dir / "hub")
    raw_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(cached, [{"question": r["question"], "answer": r["answer"]} for r in rows])
    return rows


def dev_indices(n_train: int) -> set[int]:
    """The fixed, seeded slice of the official train split that is held back as the hidden dev split."""
    return set(random.Random(DEV_SEED).sample(range(n_train), min(DEV_SIZE, n_train // 5)))


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(path)
