"""``arith``: the offline demo benchmark, two-digit addition with hidden dev and test splits."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from autorl.benchmark import Benchmark, EvalConfig, Item

_SEED = 20240611
_DEV, _TEST = 300, 500
_NUMBER = re.compile(r"-?\d+")


def all_problems() -> list[tuple[int, int]]:
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    random.Random(_SEED).shuffle(pairs)
    return pairs


def _split(name: str) -> list[tuple[int, int]]:
    pairs = all_problems()
    return {"dev": pairs[:_DEV], "test": pairs[_DEV : _DEV + _TEST], "train": pairs[_DEV + _TEST :]}[name]


def extract_answer(completion: str) -> int | None:
    match = _NUMBER.search(completion)
    return int(match.group()) if match else None


class Arith(Benchmark):
    """# arith: two-digit addition

    Each item asks for the sum of two two-digit numbers. The model must answer with the number.

    ## Data
    `data/train.jsonl`: one JSON object a line, `{"question": "What is 23+45?", "answer": "68"}`.
    The grader's dev and test items are other pairs, never in the training data.

    ## Metric
    Exact match of the first integer in the completion with the sum, in percent.
    """

    name = "arith"
    version = "1"
    eval_config = EvalConfig(
        prompt_template="Q: {question}\nA:",
        max_new_tokens=8,
        temperature=0.0,
        stop=("\n",),
    )

    def prepare_train_data(self, target_dir: Path) -> None:
        target = target_dir / "train.jsonl"
        if target.is_file():
            return
        target_dir.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        with tmp.open("w") as f:
            for a, b in _split("train"):
                f.write(json.dumps({"question": f"What is {a}+{b}?", "answer": str(a + b)}) + "\n")
        tmp.replace(target)

    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        return [
            Item(id=f"{split}-{a}+{b}", input={"question": f"What is {a}+{b}?"}, reference=str(a + b))
            for a, b in _split(split)
        ]

    def score(self, item: Item, completion: str) -> float:
        return 1.0 if extract_answer(completion) == int(item.reference) else 0.0
