"""``basics``: a small general off-target set that works offline: counting, subtraction, comparison and
word length, the skills a model trained on one task should keep. Used with ``--off-target basics``."""

from __future__ import annotations

import random
from pathlib import Path

from autorl.benchmark import Benchmark
from autorl.builtin.arith import extract_answer
from autorl.hidden import has_hidden_items, write_hidden_items
from autorl.scoring import EvalConfig, Item

_SEED = 20261205
_DEV, _TEST = 100, 200
_WORDS = (
    "apple",
    "river",
    "stone",
    "cloud",
    "garden",
    "pencil",
    "window",
    "orange",
    "planet",
    "silver",
    "bridge",
    "candle",
    "forest",
    "hammer",
    "island",
    "jacket",
    "ladder",
    "marble",
    "needle",
    "pillow",
    "rabbit",
    "saddle",
    "tunnel",
    "velvet",
    "wallet",
    "yellow",
    "cat",
    "dog",
    "sun",
    "moon",
    "tree",
    "book",
    "chair",
    "table",
    "mountain",
    "elephant",
    "computer",
    "butterfly",
    "umbrella",
    "kitchen",
)


def _questions() -> list[tuple[str, str, int]]:
    rng = random.Random(_SEED)
    out: list[tuple[str, str, int]] = []
    for i in range(_DEV + _TEST):
        kind = i % 4
        if kind == 0:
            n = rng.randint(1, 998)
            out.append((f"next-{i}", f"What number comes after {n}?", n + 1))
        elif kind == 1:
            a, b = rng.randint(20, 99), rng.randint(1, 19)
            out.append((f"minus-{i}", f"What is {a}-{b}?", a - b))
        elif kind == 2:
            a, b = rng.sample(range(1, 1000), 2)
            out.append((f"larger-{i}", f"Which is larger, {a} or {b}?", max(a, b)))
        else:
            word = rng.choice(_WORDS)
            out.append((f"letters-{i}", f"How many letters are in the word {word}?", len(word)))
    return out


def question_texts() -> frozenset[str]:
    """Every question of the set (dev and test): what a model's own training data must leave out (the built-in
    model learns two of these skills from other questions, :mod:`autorl.builtin.tiny_model`)."""
    return frozenset(q for _, q, _ in _questions())


class Basics(Benchmark):
    """# basics: general skills an off-target check looks at

    Counting on, two-digit subtraction, the larger of two numbers and the length of a word; each answer is a
    number. A fixed, public set (100 dev, 200 test items), meant for off-target checks (`--off-target
    basics`), not for training: there is no training data.

    ## Metric
    Exact match of the first integer in the completion with the answer, in percent.
    """

    name = "basics"
    version = "1"
    eval_config = EvalConfig(prompt_template="Q: {question}\nA:", max_new_tokens=8, temperature=0.0, stop=("\n",))

    def prepare_train_data(self, target_dir: Path) -> None:
        target_dir.mkdir(parents=True, exist_ok=True)
        (target_dir / "README.md").write_text("basics is an off-target check: it has no training data.\n")

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        if all(has_hidden_items(hidden_dir, split) for split in self.splits):
            return
        items = [Item(id=i, input={"question": q}, reference=str(a)) for i, q, a in _questions()]
        write_hidden_items(hidden_dir, "dev", items[:_DEV])
        write_hidden_items(hidden_dir, "test", items[_DEV:])

    def score(self, item: Item, completion: str) -> float:
        return 1.0 if extract_answer(completion) == int(item.reference) else 0.0
