"""A benchmark whose answers a model directory scripts, for testing the grader where a model is not the point.

A "model" is a normal checkpoint directory (config.json, safetensors, tokenizer) plus ``answers.json``
mapping item questions to completions. Control files make the worker misbehave on purpose:
``behaviour.json`` = {"sleep": seconds, "crash": true, "hang": true, "kill": true}.

The machine can misbehave too, whatever the checkpoint: a JSON file named by ``AUTORL_SCRIPTED_FAULTS`` (the
worker inherits it from the grader) holds ``{"fail": N, "error": "...", "match": "snapshots"}``: the next N engine
starts of a model whose path contains ``match`` raise ``error`` (counted down in the file), as an engine does when
another process took the GPU's memory.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from autorl import Backend, Benchmark, Completion, EvalConfig, GenerationRequest, Item

N_DEV, N_TEST = 20, 30
SECRET = Path(__file__).resolve().parent / "secret" / "test_answers.jsonl"


class EchoBenchmark(Benchmark):
    """# echo: repeat the number

    Each item says "say N"; the answer is N.
    """

    name = "echo"
    version = "1"
    eval_config = EvalConfig(prompt_template="{question}", max_new_tokens=4)
    declared_options: ClassVar[dict[str, type]] = {}  # chat_template only

    def prepare_train_data(self, target_dir: Path) -> None:
        target_dir.mkdir(parents=True, exist_ok=True)
        rows = [{"question": f"say {k}", "answer": str(k)} for k in range(1000, 1010)]
        (target_dir / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        ks = range(N_DEV) if split == "dev" else range(N_DEV, N_DEV + N_TEST)
        return [Item(f"{split}-{k}", {"question": f"say {k}"}, str(k)) for k in ks]

    def hidden_paths(self) -> list[Path]:
        # installed package data holding the test split's answers, as some benchmark packages ship them
        return [SECRET]

    def score(self, item: Item, completion: str) -> float:
        if completion == "raise":
            raise ValueError("scoring blew up")
        return 1.0 if completion.strip() == item.reference else 0.0


def _machine_fault(model_dir: Path) -> None:
    path = os.environ.get("AUTORL_SCRIPTED_FAULTS")
    if not path or not Path(path).is_file():
        return
    faults = json.loads(Path(path).read_text())
    if int(faults.get("fail", 0)) <= 0 or str(faults.get("match", "")) not in str(model_dir):
        return
    faults["fail"] = int(faults["fail"]) - 1
    Path(path).write_text(json.dumps(faults))
    raise ValueError(str(faults.get("error", "No available memory for the cache blocks")))


class ScriptedBackend(Backend):
    name = "scripted"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.answers: dict[str, str] = {}

    def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
        _machine_fault(model_dir)
        behaviour_file = model_dir / "behaviour.json"
        behaviour = json.loads(behaviour_file.read_text()) if behaviour_file.is_file() else {}
        if behaviour.get("crash"):
            raise RuntimeError("the scripted model refuses to load")
        if behaviour.get("kill"):
            os.kill(os.getpid(), signal.SIGKILL)
        if behaviour.get("hang"):
            time.sleep(10_000)
        time.sleep(float(behaviour.get("sleep", 0)))
        answers = model_dir / "answers.json"
        self.answers = json.loads(answers.read_text()) if answers.is_file() else {}

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        return [Completion([self.answers.get(str(r.prompt), "")] * r.n, 1) for r in requests]
