"""The GSM8K benchmark: grade-school math word problems, 8-shot chain-of-thought, exact numeric match."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from autorl import (
    Benchmark,
    EvalConfig,
    HiddenDataError,
    Item,
    autorl_home,
    items_digest,
    read_hidden_items,
    secret_rng,
    write_hidden_items,
    write_jsonl_atomic,
)
from autorl_gsm8k.answers import is_correct, reference_answer
from autorl_gsm8k.data import DEV_SIZE, content_ids, load_official, mirror_dir

# The 8 exemplars of Wei et al. (2022), "Chain-of-Thought Prompting Elicits Reasoning in Large Language Models".
FEW_SHOT = (
    (
        "There are 15 trees in the grove. Grove workers will plant trees in the grove today. After they are done, "
        "there will be 21 trees. How many trees did the grove workers plant today?",
        "There are 15 trees originally. Then there were 21 trees after some more were planted. So there must have "
        "been 21 - 15 = 6. The answer is 6.",
    ),
    (
        "If there are 3 cars in the parking lot and 2 more cars arrive, how many cars are in the parking lot?",
        "There are originally 3 cars. 2 more cars arrive. 3 + 2 = 5. The answer is 5.",
    ),
    (
        "Leah had 32 chocolates and her sister had 42. If they ate 35, how many pieces do they have left in total?",
        "Originally, Leah had 32 chocolates. Her sister had 42. So in total they had 32 + 42 = 74. After eating 35, "
        "they had 74 - 35 = 39. The answer is 39.",
    ),
    (
        "Jason had 20 lollipops. He gave Denny some lollipops. Now Jason has 12 lollipops. How many lollipops did "
        "Jason give to Denny?",
        "Jason started with 20 lollipops. Then he had 12 after giving some to Denny. So he gave Denny 20 - 12 = 8. "
        "The answer is 8.",
    ),
    (
        "Shawn has five toys. For Christmas, he got two toys each from his mom and dad. How many toys does he have now?",
        "Shawn started with 5 toys. If he got 2 toys each from his mom and dad, then that is 4 more toys. "
        "5 + 4 = 9. The answer is 9.",
    ),
    (
        "There were nine computers in the server room. Five more computers were installed each day, from monday to "
        "thursday. How many computers are now in the server room?",
        "There were originally 9 computers. For each of 4 days, 5 more computers were added. So 5 * 4 = 20 "
        "computers were added. 9 + 20 is 29. The answer is 29.",
    ),
    (
        "Michael had 58 golf balls. On tuesday, he lost 23 golf balls. On wednesday, he lost 2 more. How many golf "
        "balls did he have at the end of wednesday?",
        "Michael started with 58 golf balls. After losing 23 on tuesday, he had 58 - 23 = 35. After losing 2 more, "
        "he had 35 - 2 = 33 golf balls. The answer is 33.",
    ),
    (
        "Olivia has $23. She bought five bagels for $3 each. How much money does she have left?",
        "Olivia had 23 dollars. 5 bagels for 3 dollars each will be 5 x 3 = 15 dollars. So she has 23 - 15 dollars "
        "left. 23 - 15 is 8. The answer is 8.",
    ),
)


class GSM8K(Benchmark):
    """GSM8K (grade-school math), 8-shot chain-of-thought."""

    name = "gsm8k"
    #: ``--benchmark-option`` names and what each takes (anything else is refused before a run starts)
    declared_options: ClassVar[dict[str, Any]] = {"data_dir": str, "raw_dir": str}
    version = "2"
    #: The dev slice is drawn with the secret from the public train split: anyone holding that split holds it.
    dev_public = True
    #: The test split is GSM8K's published test set.
    public_splits = ("test",)
    eval_config = EvalConfig(
        prompt_template="Q: {question}\nA:",
        few_shot=tuple((f"Q: {q}\nA:", f" {a}") for q, a in FEW_SHOT),
        few_shot_separator="\n\n",
        max_new_tokens=256,
        temperature=0.0,
        stop=("\n\nQ:", "\nQ:", "</s>", "<|im_end|>", "<|endoftext|>"),
    )

    def description(self) -> str:
        return resources.files("autorl_gsm8k").joinpath("description.md").read_text()

    def _hidden_dir(self) -> Path:
        return Path(self.hidden_dir) if self.hidden_dir else autorl_home() / "hidden" / self.name

    def _raw_dir(self) -> Path:
        return Path(self.options.get("raw_dir") or self._hidden_dir() / "raw")

    def _official(self, split: str) -> list[dict[str, Any]]:
        return load_official(split, self._raw_dir(), mirror_dir(self.options.get("data_dir")))

    def _splits(self, hidden_dir: Path) -> dict[str, list[Item]]:
        """train (for the agent), dev (a slice of the official train split drawn with the secret) and test."""
        rows = self._official("train")
        ids = content_ids("train", rows)
        order = sorted(range(len(rows)), key=lambda i: ids[i])  # independent of the file's order
        dev = set(secret_rng(hidden_dir, f"{self.name}/dev").sample(order, min(DEV_SIZE, len(rows) // 5)))
        test = self._official("test")

        def item(split: str, i: str, row: dict[str, Any], full: bool = False) -> Item:
            reference = row["answer"] if full else str(reference_answer(row["answer"]))
            return Item(i, {"question": row["question"]}, reference)

        return {
            "train": [item("train", ids[i], rows[i], full=True) for i in range(len(rows)) if i not in dev],
            "dev": [item("dev", ids[i].replace("train-", "dev-", 1), rows[i]) for i in sorted(dev)],
            "test": [item("test", i, r) for i, r in zip(content_ids("test", test), test, strict=True)],
        }

    def prepare_train_data(self, target_dir: Path) -> None:
        """The official train split minus the hidden dev slice (which the installation's secret chooses)."""
        train = self._splits(self._hidden_dir())["train"]
        rows = [{"question": str(i.input["question"]), "answer": str(i.reference)} for i in train]
        write_jsonl_atomic(target_dir / "train.jsonl", rows, if_changed=True)

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        """Dev and test items as the source holds them now: a changed mirror changes them (and their hash)."""
        splits = self._splits(hidden_dir)
        for split in self.splits:
            try:
                current = items_digest(read_hidden_items(self.name, hidden_dir, split))
            except HiddenDataError:  # missing or unreadable: written anew
                current = None
            if current != items_digest(splits[split]):
                write_hidden_items(hidden_dir, split, splits[split])

    def hidden_paths(self) -> list[Path]:
        """The local mirror holds the test split (and the whole train split, dev included)."""
        mirror = mirror_dir(self.options.get("data_dir"))
        return [mirror] if mirror else []

    def score(self, item: Item, completion: str) -> float:
        reference = str(item.reference)
        if "####" in reference:  # a full solution, as in the training data
            reference = str(reference_answer(reference))
        return 1.0 if is_correct(completion, reference) else 0.0
