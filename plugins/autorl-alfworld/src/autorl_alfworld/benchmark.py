"""The ``alfworld`` benchmark: the small model plays ALFWorld's text household games; score = success rate."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

from autorl import Benchmark, EvalConfig, Item
from autorl.errors import UsageError
from autorl.evaluation.episode import EpisodeBenchmark, EpisodeEvaluator
from autorl_alfworld.env import AlfWorldEnv, expert_trajectory
from autorl_alfworld.games import TASK_TYPES, find_games, generate
from autorl_alfworld.prompts import chat_prompt, completion_prompt, examples

#: seeds of the offline game sets; evaluation seeds differ from training and example seeds
SEEDS = {"train": 1, "dev": 2, "test": 3}
OFFICIAL_SPLIT_SEED = 20240
OFFICIAL_DEV = 34  # of the 134 valid_unseen games; the other 100 are the test split

DESCRIPTION = """# alfworld: text household games (ALFWorld)

The model is the policy in ALFWorld's text games: it reads what it sees and answers with one command a turn
(`go to countertop 1`, `take apple 1 from countertop 1`, `open fridge 1`, `move apple 1 to fridge 1`,
`heat/cool/clean X with Y`, `use desklamp 1`, `examine`, `look`, `inventory`, or `think: ...`, which changes
nothing and is answered `OK.`). An unknown command is answered `Nothing happens.`. The score is the share of
games won within {max_steps} turns; six task types: put an object somewhere, look at an object under a lamp,
clean / heat / cool an object and put it somewhere, put two objects somewhere.

The grader prompts ReAct-style: "Interact with a household to solve a task.", {examples} solved example(s) of
the game's task type, then "Here is the task." and the game so far, each command after `> `; the model's
answer up to the first newline is the next command (greedy decoding).

## Training data (`$DATA_PATH`)
- `games/<task_type>-<name>/`: training games in ALFWorld's layout (`game.tw-pddl`, `traj_data.json`,
  `initial_state.pddl`); the evaluation games are different games and are not here.
- `train.jsonl`: one line a game: `game` (its directory, relative), `task_type`, `task`, `intro` (the first
  observation), and `expert` (the planner's solution as `[action, observation]` pairs: SFT warm starts).

## Rollouts for RL
The environment is importable (`pip install autorl-alfworld`, already installed here):

```python
from autorl_alfworld.env import AlfWorldEnv
env = AlfWorldEnv("$DATA_PATH/games/<game>/game.tw-pddl")
obs = env.reset()
result = env.step("go to countertop 1")   # .observation, .reward (1.0 once won), .done
env.admissible_commands()                 # the commands valid now
```
`AlfWorldEnv(game_file, expert=True).expert_plan()` gives the planner's plan from the current state.
"""


class AlfWorldBenchmark(Benchmark, EpisodeBenchmark):
    """Options: ``source`` (auto: the official games when ALFWorld's data is in ``$ALFWORLD_DATA``, else offline;
    ``official``; ``offline``), ``train_games``/``dev_games``/``test_games`` (offline counts), ``examples``
    (solved examples per prompt, 2), ``max_steps`` (50), ``chat`` (use the chat template)."""

    name = "alfworld"
    version = "1"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.max_steps = int(self.options.get("max_steps", 50))
        self.n_examples = int(self.options.get("examples", 2))
        source = str(self.options.get("source", "auto"))
        if source not in ("auto", "official", "offline"):
            raise UsageError("alfworld: source must be auto, official or offline")
        if source == "auto":
            source = "official" if (official_root() / "valid_unseen").is_dir() else "offline"
        self.source = source
        self.official_dev = int(self.options.get("official_dev", OFFICIAL_DEV))

    # -- what the agent is told and how the grader decodes ------------------------------------------------
    @property
    def eval_config(self) -> EvalConfig:  # type: ignore[override]
        return EvalConfig(
            prompt_template="<ReAct: the instruction, solved examples of the game's task type, "
                            "'Here is the task.'>\n{observation}\n>",
            chat_template=bool(self.options.get("chat", False)),
            max_new_tokens=int(self.options.get("max_new_tokens", 64)),
            temperature=0.0,
            stop=("\n",),
        )

    def description(self) -> str:
        return DESCRIPTION.format(max_steps=self.max_steps, examples=self.n_examples)

    def identity(self) -> dict[str, Any]:
        import hashlib

        shots = json.dumps(examples(self.n_examples), sort_keys=True)
        return {"source": self.source, "max_steps": self.max_steps, "examples": self.n_examples,
                "official_dev": self.official_dev,
                "examples_sha256": hashlib.sha256(shots.encode()).hexdigest()[:16], "games": self._counts()
                if self.source == "offline" else "official valid_unseen"}

    # -- data --------------------------------------------------------------------------------------------
    def _counts(self) -> dict[str, int]:
        return {s: int(self.options.get(f"{s}_games", d)) for s, d in (("train", 120), ("dev", 24), ("test", 48))}

    def _marker(self, what: str) -> dict[str, Any]:
        return {"version": self.version, "source": self.source, "counts": self._counts(), "what": what,
                "official_dev": self.official_dev}

    def _prepared(self, root: Path, what: str) -> bool:
        """Whether ``root`` already holds this data; if it holds other data (other options), clear it."""
        marker = root / ".prepared.json"
        if marker.is_file() and json.loads(marker.read_text()) == self._marker(what):
            return True
        if root.exists():
            for child in root.iterdir():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        return False

    def _mark(self, root: Path, what: str) -> None:
        root.mkdir(parents=True, exist_ok=True)
        (root / ".prepared.json").write_text(json.dumps(self._marker(what)))

    def prepare_train_data(self, target_dir: Path) -> None:
        if self._prepared(target_dir, "train"):
            return
        games_dir = target_dir / "games"
        if self.source == "official":
            games = find_games(official_root() / "train")
            games_dir.mkdir(parents=True, exist_ok=True)
            games = [_copy_game(g.path, games_dir / f"{g.task_type}-{i:05d}") for i, g in enumerate(games)]
        else:
            games = generate(games_dir, self._counts()["train"], SEEDS["train"], "train")
        with (target_dir / "train.jsonl").open("w") as f:
            for game in games:
                env = AlfWorldEnv(game.game_file)
                try:
                    intro = env.reset()
                finally:
                    env.close()
                row = {"game": str(game.path.relative_to(target_dir)), "task_type": game.task_type, "task": game.task,
                       "intro": intro, "expert": [list(s) for s in expert_trajectory(game.game_file)]}
                f.write(json.dumps(row) + "\n")
        self._mark(target_dir, "train")

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        if self._prepared(hidden_dir, "eval"):
            return
        root = hidden_dir / "games"
        if self.source == "official":
            games = find_games(official_root() / "valid_unseen")
            order = list(range(len(games)))
            random.Random(OFFICIAL_SPLIT_SEED).shuffle(order)
            for rank, i in enumerate(order):
                split = "dev" if rank < self.official_dev else "test"
                _copy_game(games[i].path, root / split / f"{games[i].task_type}-{i:03d}")
        else:
            counts = self._counts()
            for split in ("dev", "test"):
                generate(root / split, counts[split], SEEDS[split], split)
        self._mark(hidden_dir, "eval")

    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        games = find_games(hidden_dir / "games" / split)
        return [Item(f"{split}-{g.path.name}", {"game_file": str(g.game_file), "task_type": g.task_type,
                                                "task": g.task}) for g in games]

    def hidden_paths(self) -> list[Path]:
        # the official evaluation games in ALFWorld's cache
        return [official_root() / "valid_unseen", official_root() / "valid_seen"]

    # -- episodes ----------------------------------------------------------------------------------------
    def evaluator(self) -> EpisodeEvaluator:
        return EpisodeEvaluator()

    def make_env(self, item: Item) -> AlfWorldEnv:
        return AlfWorldEnv(item.input["game_file"])

    def episode_prompt(self, item: Item, history: list[tuple[str, str]], observation: str) -> Any:
        shots = examples(self.n_examples).get(item.input["task_type"], ())
        intro = history[0][0] if history else observation
        build = chat_prompt if self.config().chat_template else completion_prompt
        return build(shots, intro, history, observation)

    def parse_action(self, completion: str) -> str:
        line = completion.strip().split("\n", 1)[0].strip()
        return line[1:].strip() if line.startswith(">") else line

    def score(self, item: Item, completion: str) -> float:
        raise NotImplementedError("alfworld is scored by episodes (EpisodeEvaluator)")


def official_root() -> Path:
    """ALFWorld's downloaded games (``alfworld-download`` puts them in ``$ALFWORLD_DATA/json_2.1.1``)."""
    return Path(os.environ.get("ALFWORLD_DATA", Path.home() / ".cache" / "alfworld")).expanduser() / "json_2.1.1"


def _copy_game(src: Path, dst: Path) -> Any:
    from autorl_alfworld.games import Game

    shutil.copytree(src, dst, dirs_exist_ok=True)
    game = json.loads((dst / "game.tw-pddl").read_text())
    traj = json.loads((dst / "traj_data.json").read_text())
    return Game(dst, traj["task_type"], str(game.get("task", "")))


__all__ = ["TASK_TYPES", "AlfWorldBenchmark"]
