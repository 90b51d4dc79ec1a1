"""The ``webshop`` benchmark: the small model shops in a simulated web store; score = mean reward."""

from __future__ import annotations

import functools
import hashlib
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from autorl import (
    Benchmark,
    EpisodeBenchmark,
    EpisodeEvaluator,
    EvalConfig,
    Item,
    ItemResult,
    UsageError,
    episode_steps,
    has_hidden_items,
    secret_rng,
    write_hidden_items,
    write_jsonl_atomic,
)
from autorl_webshop import official
from autorl_webshop.catalog import make_catalog, make_goals
from autorl_webshop.env import WebShopEnv, expert_actions
from autorl_webshop.reward import DIFFERENCES
from autorl_webshop.search import SearchEngine

#: fixed seeds for what the agent gets anyway (catalog, training goals, the prompt's example); hidden goals are
#: drawn with the installation's secret (``secret_rng``), never with these
SEEDS = {"catalog": 0, "train": 1, "example": 99}
DEFAULT_COUNTS = {
    "generated": {"train": 200, "dev": 50, "test": 100},
    "official": {"train": -1, "dev": 50, "test": official.N_TEST},
}
INSTRUCTION = (
    "You are shopping in WebShop for what the instruction asks. Each turn, answer with one action: "
    "search[query] on the search page, or click[button] with one of the buttons shown."
)

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
  `options`, `price_upper`, ...); the evaluation instructions are different ones and are not here. As in
  WebShop, every goal asks for at least one attribute, and its price bound (of the first four multiples of
  10 dollars above the product's price, the larger of two drawn at random) is written into the instruction.
{source_note}- `expert.jsonl`: for each training goal, an expert's episode as `[action, observation]` pairs (reward 1).

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
    ``generated``), ``train_goals``/``dev_goals``/``test_goals`` (generated: 200/50/100; official: all of
    WebShop's training goals, 50 of its eval goals, its 500 test goals), ``products_per_type`` (10),
    ``examples`` (1), ``max_steps`` (15), ``chat``, ``max_new_tokens`` (32)."""

    name = "webshop"
    #: ``--benchmark-option`` names and what each takes (anything else is refused before a run starts)
    declared_options: ClassVar[dict[str, Any]] = {
        **EpisodeBenchmark.EPISODE_OPTIONS,
        "source": ("auto", "official", "generated"),
        "products_per_type": int,
        "train_goals": int,
        "dev_goals": int,
        "test_goals": int,
    }
    version = "2"
    eval_config = EvalConfig(
        prompt_template="<instruction, solved example(s), 'Here is the task.'>\nObservation: {observation}\nAction:",
        max_new_tokens=32,
        temperature=0.0,
        stop=("\n",),
    )
    #: the episode options' defaults (``max_steps``, ``examples``)
    max_steps = 15
    n_examples = 1

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.read_episode_options()
        source = str(self.options.get("source", "auto"))  # one of declared_options["source"] (checked above)
        if source == "auto":
            source = "official" if official.available() else "generated"
        elif source == "official" and not official.available():
            raise UsageError(
                f"webshop: no WebShop data in {official.data_dir()} (items_shuffle.json, "
                "items_human_ins.json); set WEBSHOP_DATA or use source=generated"
            )
        self.source = source
        #: catalog path -> (products, search engine), built once per catalog
        self._engines: dict[str, tuple[list[dict[str, Any]], SearchEngine]] = {}

    def config(self) -> EvalConfig:
        """Options ``chat`` (or the harness's ``chat_template``) and ``max_new_tokens``."""
        return self.episode_config()

    def description(self) -> str:
        if self.source == "official":
            note = (
                "- The instructions are WebShop's published human instructions: the evaluation ones come from "
                "WebShop's own test and eval splits\n  (public, as in WebShop), with price bounds drawn by the "
                "grader; the training ones from its training split.\n"
            )
        else:
            note = ""
        return (
            DESCRIPTION.format(max_steps=self.max_steps, examples=self.n_examples, source_note=note)
            + "\n## How this scorer differs from WebShop's code\n"
            + "".join(f"- {d}\n" for d in DIFFERENCES)
        )

    def _counts(self) -> dict[str, int]:
        defaults = DEFAULT_COUNTS[self.source]
        return {
            "products_per_type": int(self.options.get("products_per_type", 10)),
            **{s: int(self.options.get(f"{s}_goals", d)) for s, d in defaults.items()},
        }

    def _data_identity(self) -> dict[str, Any]:
        """What the prepared data depends on: a change prepares it again (the marker) and changes the hash."""
        out: dict[str, Any] = {"version": self.version, "source": self.source, **self._counts()}
        if self.source == "official":
            out["files"] = official.fingerprint()
        return out

    def identity(self) -> dict[str, Any]:
        shots = json.dumps(self._examples(), sort_keys=True)
        return {
            "max_steps": self.max_steps,
            "examples": self.n_examples,
            "data": self._data_identity(),
            "source": self.source,
            "examples_sha256": hashlib.sha256(shots.encode()).hexdigest()[:16],
            "reward_differences_from_webshop": list(DIFFERENCES),
        }

    def hidden_paths(self) -> list[Path]:
        """``$WEBSHOP_DATA`` holds WebShop's evaluation instructions: masked in the sandbox."""
        root = official.data_dir()
        return [root] if root.exists() else []

    # -- data --------------------------------------------------------------------------------------------
    @functools.cached_property
    def _official(self) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
        products = official.load_products()
        return products, official.webshop_split(official.human_goals(products))

    def _catalog(self) -> list[dict[str, Any]]:
        if self.source == "official":
            return self._official[0]
        return make_catalog(SEEDS["catalog"], self._counts()["products_per_type"])

    def _train_goals(self) -> list[dict[str, Any]]:
        n = self._counts()["train"]
        if self.source == "official":
            rng = random.Random(SEEDS["train"])
            train = [official.with_price_bound(g, rng) for g in self._official[1]["train"]]
            return train if n < 0 else train[:n]
        return make_goals(self._catalog(), n, SEEDS["train"])

    def _hidden_goals(self, hidden_dir: Path) -> dict[str, list[dict[str, Any]]]:
        """The dev and test goals, drawn with the installation's secret."""
        counts = self._counts()
        if self.source == "official":
            split = self._official[1]
            test_rng = secret_rng(hidden_dir, "webshop/official/test")
            test = [official.with_price_bound(g, test_rng) for g in split["test"][: counts["test"]]]
            dev_rng = secret_rng(hidden_dir, "webshop/official/dev")
            chosen = sorted(dev_rng.sample(range(len(split["eval"])), min(counts["dev"], len(split["eval"]))))
            dev = [official.with_price_bound(split["eval"][i], dev_rng) for i in chosen]
            return {"dev": dev, "test": test}
        products = self._catalog()
        seen = {g["instruction"] for g in self._train_goals()}
        test = make_goals(products, counts["test"], secret_rng(hidden_dir, "webshop/generated/test"), exclude=seen)
        seen |= {g["instruction"] for g in test}
        dev = make_goals(products, counts["dev"], secret_rng(hidden_dir, "webshop/generated/dev"), exclude=seen)
        return {"dev": dev, "test": test}

    def _prepared(self, root: Path) -> bool:
        marker = root / ".prepared.json"
        try:
            return bool(marker.is_file() and json.loads(marker.read_text()) == self._data_identity())
        except ValueError:
            return False

    def _mark(self, root: Path) -> None:
        (root / ".prepared.json").write_text(json.dumps(self._data_identity()))

    def prepare_train_data(self, target_dir: Path) -> None:
        if self._prepared(target_dir):
            return
        target_dir.mkdir(parents=True, exist_ok=True)
        for old in target_dir.iterdir():
            old.unlink()
        products = self._catalog()
        goals = self._train_goals()
        (target_dir / "catalog.json").write_text(json.dumps(products, indent=1))
        write_jsonl_atomic(target_dir / "train_goals.jsonl", goals)
        engine = SearchEngine(products)
        write_jsonl_atomic(
            target_dir / "expert.jsonl",
            ({"instruction": g["instruction"], "steps": _expert_steps(products, g, engine)} for g in goals),
        )
        self._mark(target_dir)

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        if self._prepared(hidden_dir) and all(has_hidden_items(hidden_dir, s) for s in self.splits):
            return
        hidden_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        goals = self._hidden_goals(hidden_dir)
        (hidden_dir / "catalog.json").write_text(json.dumps(self._catalog()))
        for split in self.splits:
            write_hidden_items(
                hidden_dir, split, [Item(f"{split}-{i:04d}", {"goal": g}) for i, g in enumerate(goals[split])]
            )
        self._mark(hidden_dir)

    # -- episodes ----------------------------------------------------------------------------------------
    def evaluator(self) -> WebShopEvaluator:
        return WebShopEvaluator()

    def make_env(self, item: Item) -> WebShopEnv:
        path = str(item.input.get("catalog") or Path(self.hidden_dir or ".") / "catalog.json")
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
        return line[len("Action:") :].strip() if line.lower().startswith("action:") else line

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
