"""The ``webshop`` benchmark: the small model shops in a simulated web store; score = mean reward."""

from __future__ import annotations

import functools
import hashlib
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autorl import Benchmark, EvalConfig, Item
from autorl.errors import UsageError
from autorl.evaluation.base import ItemResult
from autorl.evaluation.episode import EpisodeBenchmark, EpisodeEvaluator, episode_steps
from autorl_webshop import official
from autorl_webshop.catalog import make_catalog, make_goals, read_jsonl, write_jsonl
from autorl_webshop.env import WebShopEnv, expert_actions
from autorl_webshop.search import SearchEngine

SEEDS = {"catalog": 0, "train": 1, "dev": 2, "test": 3, "example": 99}
INSTRUCTION = ("You are shopping in WebShop for what the instruction asks. Each turn, answer with one action: "
               "search[query] on the search page, or click[button] with one of the buttons shown.")

DESCRIPTION = """# webshop: shopping to an instruction (WebShop)

The model shops in a simulated web store: it reads a text page and answers with one action a turn,
`search[<query>]` on the search page or `click[<button>]` (a product id, an option value, `Next >`,
`< Prev`, `Back to Search`, `Description`, `Features`, `Reviews`, `Buy Now`). Pages are WebShop's simple
text mode, elements joined by ` [SEP] `. `click[Buy Now]` ends the episode with WebShop's reward:

    r = r_type * (|goal attributes matched| + |goal options chosen| + 1[price <= bound]) / (|attributes| + |options| + 1)

(r_type: 1 when the product is of the wanted type, lower as the type match weakens). The score is the mean
reward over the hidden instructions, in percent, within {max_steps} turns (no purchase: 0); the record also
holds the success rate (reward 1). The grader prompts with the instruction above, {examples} solved example(s),
then "Here is the task." and the episode so far as `Observation:` / `Action:` lines; the answer up to the first
newline is the action (greedy decoding).

## Training data (`$DATA_PATH`)
- `catalog.json`: every product (`asin`, `name`, `category`, `query`, `price`, `attributes`, `options`,
  `features`, `description`); evaluation instructions are about products of this same catalog.
- `train_goals.jsonl`: training instructions with what they ask for (`instruction`, `asin`, `attributes`,
  `options`, `price_upper`, ...); the evaluation instructions are different ones and are not here.
- `expert.jsonl`: for each training goal, an expert's episode as `[action, observation]` pairs (reward 1).

## Rollouts for RL
```python
import json
from autorl_webshop.env import WebShopEnv
goal = json.loads(open("$DATA_PATH/train_goals.jsonl").readline())
env = WebShopEnv.from_data_dir("$DATA_PATH", goal)
obs = env.reset()
result = env.step("search[sulfate free shampoo]")   # .observation, .reward (at Buy Now), .done
env.available_actions()                              # {{"has_search_bar": ..., "clickables": [...]}}
```
"""


class WebShopEvaluator(EpisodeEvaluator):
    def summary(self, results: Sequence[ItemResult]) -> dict[str, Any]:
        done = [r for r in results if r.error is None]
        return {"success_rate": 100.0 * sum(1 for r in done if r.score >= 1.0) / len(results) if results else 0.0}


class WebShopBenchmark(Benchmark, EpisodeBenchmark):
    """Options: ``source`` (auto: WebShop's published data in ``$WEBSHOP_DATA`` when present, ``official``,
    ``generated``), ``train_goals``/``dev_goals``/``test_goals`` (200/50/100), ``products_per_type`` (10),
    ``examples`` (1), ``max_steps`` (15), ``chat``, ``max_new_tokens`` (32)."""

    name = "webshop"
    version = "1"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.max_steps = int(self.options.get("max_steps", 15))
        self.n_examples = int(self.options.get("examples", 1))
        source = str(self.options.get("source", "auto"))
        if source not in ("auto", "official", "generated"):
            raise UsageError("webshop: source must be auto, official or generated")
        if source == "auto":
            source = "official" if official.available() else "generated"
        elif source == "official" and not official.available():
            raise UsageError(f"webshop: no WebShop data in {official.data_dir()} (items_shuffle.json, "
                             "items_human_ins.json); set WEBSHOP_DATA or use source=generated")
        self.source = source
        #: catalog path -> (products, search engine), built once per catalog
        self._engines: dict[str, tuple[list[dict[str, Any]], SearchEngine]] = {}

    @property
    def eval_config(self) -> EvalConfig:  # type: ignore[override]
        return EvalConfig(prompt_template="<instruction, solved example(s), 'Here is the task.'>\n"
                                          "Observation: {observation}\nAction:",
                          chat_template=bool(self.options.get("chat", False)),
                          max_new_tokens=int(self.options.get("max_new_tokens", 32)), temperature=0.0, stop=("\n",))

    def description(self) -> str:
        return DESCRIPTION.format(max_steps=self.max_steps, examples=self.n_examples)

    def _counts(self) -> dict[str, int]:
        return {"products_per_type": int(self.options.get("products_per_type", 10)),
                **{s: int(self.options.get(f"{s}_goals", d)) for s, d in (("train", 200), ("dev", 50), ("test", 100))}}

    def identity(self) -> dict[str, Any]:
        shots = json.dumps(self._examples(), sort_keys=True)
        return {"max_steps": self.max_steps, "examples": self.n_examples, "data": self._counts(), "source": self.source,
                "examples_sha256": hashlib.sha256(shots.encode()).hexdigest()[:16]}

    # -- data --------------------------------------------------------------------------------------------
    @functools.cached_property
    def _official(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return official.load()

    def _catalog(self) -> list[dict[str, Any]]:
        if self.source == "official":
            return self._official[0]
        return make_catalog(SEEDS["catalog"], self._counts()["products_per_type"])

    def _all_goals(self) -> dict[str, list[dict[str, Any]]]:
        if self.source == "official":
            goals = self._official[1]
            evaluation, train = goals[:official.N_EVAL], goals[official.N_EVAL:]
            order = list(range(len(evaluation)))
            random.Random(SEEDS["dev"]).shuffle(order)
            n_dev = min(self._counts()["dev"], len(evaluation))
            dev = [evaluation[i] for i in sorted(order[:n_dev])]
            test = [evaluation[i] for i in sorted(order[n_dev:])]
            return {"train": train[: self._counts()["train"]], "dev": dev, "test": test}
        products, counts = self._catalog(), self._counts()
        test = make_goals(products, counts["test"], SEEDS["test"])
        dev = make_goals(products, counts["dev"], SEEDS["dev"], exclude={g["instruction"] for g in test})
        held = {g["instruction"] for g in test + dev}
        train = make_goals(products, counts["train"], SEEDS["train"], exclude=held)
        return {"train": train, "dev": dev, "test": test}

    def _prepared(self, root: Path) -> bool:
        marker = root / ".prepared.json"
        want = {"version": self.version, **self._counts()}
        return bool(marker.is_file() and json.loads(marker.read_text()) == want)

    def _mark(self, root: Path) -> None:
        (root / ".prepared.json").write_text(json.dumps({"version": self.version, **self._counts()}))

    def prepare_train_data(self, target_dir: Path) -> None:
        if self._prepared(target_dir):
            return
        target_dir.mkdir(parents=True, exist_ok=True)
        for old in target_dir.iterdir():
            old.unlink()
        products = self._catalog()
        goals = self._all_goals()["train"]
        (target_dir / "catalog.json").write_text(json.dumps(products, indent=1))
        write_jsonl(target_dir / "train_goals.jsonl", goals)
        engine = SearchEngine(products)
        write_jsonl(target_dir / "expert.jsonl", [{"instruction": g["instruction"], "steps": _expert_steps(products, g, engine)}
                                                   for g in goals])
        self._mark(target_dir)

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        if self._prepared(hidden_dir):
            return
        goals = self._all_goals()
        hidden_dir.mkdir(parents=True, exist_ok=True)
        (hidden_dir / "catalog.json").write_text(json.dumps(self._catalog()))
        for split in ("dev", "test"):
            write_jsonl(hidden_dir / f"{split}_goals.jsonl", goals[split])
        self._mark(hidden_dir)

    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        goals = read_jsonl(hidden_dir / f"{split}_goals.jsonl")
        return [Item(f"{split}-{i:04d}", {"goal": g, "catalog": str(hidden_dir / "catalog.json")})
                for i, g in enumerate(goals)]

    # -- episodes ----------------------------------------------------------------------------------------
    def evaluator(self) -> WebShopEvaluator:
        return WebShopEvaluator()

    def make_env(self, item: Item) -> WebShopEnv:
        path = item.input["catalog"]
        if path not in self._engines:
            products = json.loads(Path(path).read_text())
            self._engines[path] = (products, SearchEngine(products))
        products, engine = self._engines[path]
        return WebShopEnv(products, item.input["goal"], engine)

    def _examples(self) -> list[str]:
        if self.n_examples <= 0:
            return []
        products = make_catalog(SEEDS["example"], 3)
        engine = SearchEngine(products)
        out = []
        for goal in make_goals(products, self.n_examples, SEEDS["example"]):
            env = WebShopEnv(products, goal, engine)
            steps = _expert_steps(products, goal, engine)
            out.append(_transcript(env.reset(), steps))
        return out

    def episode_prompt(self, item: Item, history: list[tuple[str, str]], observation: str) -> Any:
        shots = self._cached_examples
        first = history[0][0] if history else observation
        steps = episode_steps(history, observation)
        if self.config().chat_template:
            system = INSTRUCTION + ("\n\nExample:\n" + "\n\n".join(shots) if shots else "")
            messages = [{"role": "system", "content": system}, {"role": "user", "content": first}]
            for action, obs in steps:
                messages += [{"role": "assistant", "content": action}, {"role": "user", "content": obs}]
            return messages
        head = INSTRUCTION + "\n\n" + "".join(f"Example:\n{s}\n\n" for s in shots)
        return head + "Here is the task.\n" + _transcript(first, steps) + "\nAction:"

    @functools.cached_property
    def _cached_examples(self) -> list[str]:
        return self._examples()

    def parse_action(self, completion: str) -> str:
        line = completion.strip().split("\n", 1)[0].strip()
        return line[len("Action:"):].strip() if line.lower().startswith("action:") else line

    def score(self, item: Item, completion: str) -> float:
        raise NotImplementedError("webshop is scored by episodes (EpisodeEvaluator)")


def _expert_steps(products: list[dict[str, Any]], goal: dict[str, Any], engine: SearchEngine) -> list[list[str]]:
    """The expert's episode; empty when search cannot reach the product."""
    env = WebShopEnv(products, goal, engine)
    env.reset()
    steps: list[list[str]] = []
    try:
        actions = expert_actions(env)
    except ValueError:
        return steps
    for action in actions:
        steps.append([action, env.step(action).observation])
    return steps


def _transcript(first: str, steps: Sequence[Sequence[str]]) -> str:
    return f"Observation: {first}" + "".join(f"\nAction: {a}\nObservation: {o}" for a, o in steps)
