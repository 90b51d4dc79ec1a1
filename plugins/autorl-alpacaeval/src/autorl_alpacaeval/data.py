"""AlpacaEval data: the 805 evaluation instructions with reference outputs, and Alpaca training data for the
agent with the evaluation instructions (and near copies of them) removed.

AlpacaEval 2.0 compares against ``gpt4_turbo``'s outputs: the dataset ``alpaca_eval_gpt4_baseline`` of the hub
repository ``tatsu-lab/alpaca_eval`` (file ``alpaca_eval_gpt4_baseline.json``), the reference set of alpaca-eval's
``ALPACAEVAL_REFERENCE_OUTPUTS_2``. ``alpaca_eval.json`` in the same repository is AlpacaEval 1.0's
(``text_davinci_003``'s outputs) and is refused: its win rates are not AlpacaEval 2.0's, and the
length-controlled GLM (``df_gamed.csv``) is fit against the 2.0 baseline.

Sources: a local mirror (``$AUTORL_DATA_DIR/alpaca_eval/`` or the option ``data_dir``) holding
``alpaca_eval_gpt4_baseline.json`` and ``alpaca_data.json`` (Alpaca's own JSON, or ``alpaca.jsonl`` / a
``.parquet``), else the hub: ``tatsu-lab/alpaca_eval`` and ``tatsu-lab/alpaca`` (its parquet file).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from autorl import ResourceError, read_jsonl

EVAL_REPO, REFERENCE_SET = "tatsu-lab/alpaca_eval", "alpaca_eval_gpt4_baseline"
EVAL_FILE = f"{REFERENCE_SET}.json"
V1_FILE, V1_GENERATOR = "alpaca_eval.json", "text_davinci_003"
TRAIN_REPO = "tatsu-lab/alpaca"
NGRAM = 13


def mirror_dir(option: str | None) -> Path | None:
    if option:
        return Path(option).expanduser()
    if os.environ.get("AUTORL_DATA_DIR"):
        return Path(os.environ["AUTORL_DATA_DIR"]) / "alpaca_eval"
    return None


def _read(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_table(path).to_pylist())
    if path.suffix == ".jsonl":
        return read_jsonl(path)
    data = json.loads(path.read_text())
    if not isinstance(data, list):
        raise ResourceError(f"{path}: expected a JSON list of records")
    return data


def _hub(repo: str, filename: str | None, cache: Path, what: str) -> Path:
    from huggingface_hub import hf_hub_download, list_repo_files
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        if filename is None:
            filename = next(f for f in list_repo_files(repo, repo_type="dataset") if f.endswith(".parquet"))
        return Path(hf_hub_download(repo, filename, repo_type="dataset", cache_dir=str(cache)))
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError, StopIteration) as exc:
        raise ResourceError(
            f"AlpacaEval's {what} is neither in a local mirror nor downloadable from the hub ({type(exc).__name__}); "
            f"set AUTORL_DATA_DIR to a folder holding alpaca_eval/{EVAL_FILE} and alpaca_eval/alpaca_data.json, "
            "or pass the benchmark option data_dir"
        ) from None


def load_eval_set(mirror: Path | None, cache: Path) -> list[dict[str, Any]]:
    """The 805 instructions with AlpacaEval 2.0's reference outputs (``gpt4_turbo``'s)."""
    if mirror and (mirror / EVAL_FILE).is_file():
        path = mirror / EVAL_FILE
    elif mirror and (mirror / V1_FILE).is_file():
        raise ResourceError(
            f"{mirror / V1_FILE} is AlpacaEval 1.0's reference set ({V1_GENERATOR}); AlpacaEval 2.0 "
            f"needs {EVAL_FILE} (gpt4_turbo's outputs) from {EVAL_REPO} in {mirror}"
        )
    else:
        path = _hub(EVAL_REPO, EVAL_FILE, cache, "evaluation set")
    rows = _read(path)
    for i, r in enumerate(rows):
        if not isinstance(r.get("instruction"), str) or not isinstance(r.get("output"), str):
            raise ResourceError(f"{path}: record {i + 1} lacks string fields instruction and output")
        if r.get("generator") == V1_GENERATOR:
            raise ResourceError(
                f"{path}: record {i + 1} is a {V1_GENERATOR} output, AlpacaEval 1.0's reference; "
                f"AlpacaEval 2.0 needs {EVAL_FILE} (gpt4_turbo's outputs)"
            )
    return rows


def load_train_set(mirror: Path | None, cache: Path) -> list[dict[str, Any]]:
    candidates = [mirror / n for n in ("alpaca_data.json", "alpaca.jsonl", "alpaca.parquet")] if mirror else []
    path = next((p for p in candidates if p.is_file()), None) or _hub(TRAIN_REPO, None, cache, "training data")
    rows = _read(path)
    return [
        {
            "instruction": str(r.get("instruction", "")),
            "input": str(r.get("input", "") or ""),
            "output": str(r.get("output", "")),
        }
        for r in rows
        if r.get("instruction")
    ]


def normalize(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def remove_overlap(
    train: list[dict[str, Any]], eval_rows: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Training rows whose instruction is an evaluation instruction, or shares a 13-word run with one (or,
    for short ones, all of its words in order), are dropped. Returns the kept rows and the report."""
    exact = {" ".join(normalize(r["instruction"])) for r in eval_rows}
    grams: set[str] = set()
    short: set[str] = set()  # instructions under 13 words (of 4 or more): found anywhere, in order
    for r in eval_rows:
        words = normalize(r["instruction"])
        if len(words) >= NGRAM:
            grams |= {" ".join(words[i : i + NGRAM]) for i in range(len(words) - NGRAM + 1)}
        elif len(words) >= 4:
            short.add(" ".join(words))
    kept, n_exact, n_gram = [], 0, 0
    for r in train:
        words = normalize(r["instruction"] + " " + r["input"])
        joined = " ".join(normalize(r["instruction"]))
        if joined in exact:
            n_exact += 1
            continue
        mine = {" ".join(words[i : i + NGRAM]) for i in range(max(1, len(words) - NGRAM + 1))}
        padded = " " + " ".join(words) + " "
        if mine & grams or any(f" {s} " in padded for s in short):
            n_gram += 1
            continue
        kept.append(r)
    report = {
        "train_rows": len(train),
        "kept": len(kept),
        "removed_exact": n_exact,
        "removed_near": n_gram,
        "eval_instructions": len(eval_rows),
        "rule": f"same instruction, a shared {NGRAM}-word run, or a whole short instruction in order",
    }
    return kept, report


def overlaps(train: list[dict[str, Any]], eval_rows: list[dict[str, Any]]) -> int:
    """How many training rows the check would still remove (0 for data that passed it)."""
    report = remove_overlap(train, eval_rows)[1]
    return int(report["train_rows"]) - int(report["kept"])
