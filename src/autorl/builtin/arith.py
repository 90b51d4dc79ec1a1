"""``arith``: the offline demo benchmark, two-digit addition with hidden dev and test splits."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import ClassVar

from autorl.benchmark import Benchmark, OptionKind
from autorl.hidden import has_hidden_items, secret_rng, write_hidden_items
from autorl.jsonio import write_jsonl_atomic
from autorl.scoring import EvalConfig, Item

_SEED = 20240611
_DEV, _TEST = 300, 500
#: Pairs held out of the public training data; the hidden splits are drawn from them with the installation's
#: secret, so knowing which pairs are not in train does not tell which are dev or test.
_POOL = 2000
_NUMBER = re.compile(r"-?\d+")


def all_problems() -> list[tuple[int, int]]:
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    random.Random(_SEED).shuffle(pairs)
    return pairs


def public_pairs(name: str) -> list[tuple[int, int]]:
    """The public, seeded parts: ``train`` (what the agent gets) and ``pool`` (held out; hidden items come from it)."""
    pairs = all_problems()
    return {"pool": pairs[:_POOL], "train": pairs[_POOL:]}[name]


def _item(split: str, a: int, b: int) -> Item:
    return Item(id=f"{split}-{a}+{b}", input={"question": f"What is {a}+{b}?"}, reference=str(a + b))


def extract_answer(completion: str) -> int | None:
    match = _NUMBER.search(completion)
    return int(match.group()) if match else None


class Arith(Benchmark):
    """# arith: two-digit addition

    Each item asks for the sum of two two-digit numbers. The model must answer with the number.

    ## Data
    `data/train.jsonl`: one JSON object a line, `{"question": "What is 28+26?", "answer": "54"}`.
    The grader's dev (300) and test (500) items are other pairs, never in the training data, drawn from the
    remaining pairs with a secret only the grader holds.

    ## Metric
    Exact match of the first integer in the completion with the sum, in percent.
    """

    name = "arith"
    version = "2"
    eval_config = EvalConfig(
        prompt_template="Q: {question}\nA:",
        max_new_tokens=8,
        temperature=0.0,
        stop=("\n",),
    )
    declared_options: ClassVar[dict[str, OptionKind]] = {}  # chat_template only

    def prepare_train_data(self, target_dir: Path) -> None:
        target = target_dir / "train.jsonl"
        if target.is_file():
            return
        write_jsonl_atomic(
            target, ({"question": f"What is {a}+{b}?", "answer": str(a + b)} for a, b in public_pairs("train"))
        )

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        if all(has_hidden_items(hidden_dir, split) for split in self.splits):
            return
        pool = list(public_pairs("pool"))
        secret_rng(hidden_dir, f"{self.name}/v{self.version}/splits").shuffle(pool)
        write_hidden_items(hidden_dir, "dev", [_item("dev", a, b) for a, b in pool[:_DEV]])
        write_hidden_items(hidden_dir, "test", [_item("test", a, b) for a, b in pool[_DEV : _DEV + _TEST]])

    def score(self, item: Item, completion: str) -> float:
        return 1.0 if extract_answer(completion) == int(item.reference) else 0.0
