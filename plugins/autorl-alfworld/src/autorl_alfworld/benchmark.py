"""The ``alfworld`` benchmark: the small model plays ALFWorld's text household games; score = success rate."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
from pathlib import Path
from typing import Any, ClassVar

from autorl import (
    Benchmark,
    EpisodeBenchmark,
    EpisodeEvaluator,
    EvalConfig,
    HiddenDataError,
    Item,
    hidden_secret,
    items_digest,
    secret_rng,
    write_jsonl_atomic,
)
from autorl_alfworld.env import AlfWorldEnv, expert_trajectory
from autorl_alfworld.games import TASK_TYPES, find_games, generate
from autorl_alfworld.prompts import chat_prompt, completion_prompt, examples

#: the seed of the offline training games (public: the agent gets them); the evaluation games are generated
#: from the installation's secret, and the official valid_unseen games are split into dev and test with it
TRAIN_SEED = 1
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
    #: ``--benchmark-option`` names and what each takes (anything else is refused before a run starts)
    declared_options: ClassVar[dict[str, Any]] = {
        **EpisodeBenchmark.EPISODE_OPTIONS,
        "source": ("auto", "official", "offline"),
        "official_dev": int,
        "train_games": int,
        "dev_games": int,
        "test_games": int,
    }
    version = "2"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.read_episode_options()
        source = str(self.options.get("source", "auto"))  # one of declared_options["source"] (checked above)
        if source == "auto":
            source = "official" if (official_root() / "valid_unseen").is_dir() else "offline"
        self.source = source
        self.official_dev = int(self.options.get("official_dev", OFFICIAL_DEV))
        #: ALFWorld's official valid_unseen games are a public download: which are dev is secret, not the games
        self.dev_public = self.source == "official"  # type: ignore[misc]

    # -- what the agent is told and how the grader decodes ------------------------------------------------
    eval_config = EvalConfig(
        prompt_template="<ReAct: the instruction, solved examples of the game's task type, 'Here is the task.'>\n"
        "{observation}\n>",
        max_new_tokens=64,
        temperature=0.0,
        stop=("\n",),
    )
    #: the episode options' defaults (``max_steps``, ``examples``)
    max_steps = 50
    n_examples = 2

    def config(self) -> EvalConfig:
        """Options ``chat`` (or the harness's ``chat_template``) and ``max_new_tokens``."""
        return self.episode_config()

    def description(self) -> str:
        text = DESCRIPTION.format(max_steps=self.max_steps, examples=self.n_examples)
        if self.source == "official":
            text += (
                "\n## Evaluation games\nThe dev and test games are ALFWorld's published `valid_unseen` games, "
                "split with a secret of this installation: by nature the dev games are recoverable from that "
                "public download (only which are dev is secret). The headline is the test score.\n"
            )
        return text

    def identity(self) -> dict[str, Any]:
        import hashlib

        shots = json.dumps(examples(self.n_examples), sort_keys=True)
        return {
            "source": self.source,
            "max_steps": self.max_steps,
            "examples": self.n_examples,
            "official_dev": self.official_dev,
            "examples_sha256": hashlib.sha256(shots.encode()).hexdigest()[:16],
            "games": self._counts() if self.source == "offline" else "official valid_unseen",
        }

    # -- data --------------------------------------------------------------------------------------------
    def _counts(self) -> dict[str, int]:
        return {s: int(self.options.get(f"{s}_games", d)) for s, d in (("train", 120), ("dev", 24), ("test", 48))}

    def _marker(self, what: str) -> dict[str, Any]:
        return {
            "version": self.version,
            "source": self.source,
            "counts": self._counts(),
            "what": what,
            "official_dev": self.official_dev,
        }

    def _eval_marker(self, hidden_dir: Path) -> dict[str, Any]:
        # which secret drew the games (a keyed fingerprint, kept in the grader's folder only)
        tag = hmac.new(hidden_secret(hidden_dir), b"alfworld/prepared", hashlib.sha256).hexdigest()[:16]
        return {**self._marker("eval"), "secret": tag}

    def _prepared(self, root: Path, what: str, marker_data: dict[str, Any] | None = None) -> bool:
        """Whether ``root`` already holds this data; if it holds other data (other options), clear it (but
        never the installation's secret)."""
        marker = root / ".prepared.json"
        expected = marker_data or self._marker(what)
        try:
            if marker.is_file() and json.loads(marker.read_text()) == expected:
                return True
        except ValueError:
            pass
        if root.exists():
            for child in root.iterdir():
                if child.name == "secret":
                    continue
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        return False

    def _mark(self, root: Path, what: str, marker_data: dict[str, Any] | None = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        (root / ".prepared.json").write_text(json.dumps(marker_data or self._marker(what)))

    def prepare_train_data(self, target_dir: Path) -> None:
        if self._prepared(target_dir, "train"):
            return
        games_dir = target_dir / "games"
        if self.source == "official":
            games = find_games(official_root() / "train")
            games_dir.mkdir(parents=True, exist_ok=True)
            games = [_copy_game(g.path, games_dir / f"{g.task_type}-{i:05d}") for i, g in enumerate(games)]
        else:
            games = generate(games_dir, self._counts()["train"], TRAIN_SEED, "train")
        rows = []
        for game in games:
            env = AlfWorldEnv(game.game_file)
            try:
                intro = env.reset()
            finally:
                env.close()
            rows.append(
                {
                    "game": str(game.path.relative_to(target_dir)),
                    "task_type": game.task_type,
                    "task": game.task,
                    "intro": intro,
                    "expert": [list(s) for s in expert_trajectory(game.game_file)],
                }
            )
        write_jsonl_atomic(target_dir / "train.jsonl", rows)
        self._mark(target_dir, "train")

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        """Offline: dev and test games generated from the installation's secret. Official: the valid_unseen
        games split into dev and test with it. Either way the split exists only in ``hidden_dir``."""
        marker = self._eval_marker(hidden_dir)
        if self._prepared(hidden_dir, "eval", marker):
            return
        root = hidden_dir / "games"
        if self.source == "official":
            games = find_games(official_root() / "valid_unseen")
            names = [_game_digest(g.path) for g in games]
            order = sorted(range(len(games)), key=lambda i: names[i])  # independent of the download's layout
            secret_rng(hidden_dir, f"{self.name}/official-split").shuffle(order)
            for rank, i in enumerate(order):
                split = "dev" if rank < self.official_dev else "test"
                _copy_game(games[i].path, root / split / f"{games[i].task_type}-{names[i]}")
        else:
            counts = self._counts()
            for split in ("dev", "test"):
                seed = secret_rng(hidden_dir, f"{self.name}/offline/{split}").getrandbits(128)
                generate(root / split, counts[split], seed, split)
        self._mark(hidden_dir, "eval", marker)

    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        """The games of ``split`` in the grader's hidden folder; ids from the games' content."""
        if not (hidden_dir / ".prepared.json").is_file() or not (hidden_dir / "games" / split).is_dir():
            raise HiddenDataError(
                f"alfworld's hidden {split} games are not in {hidden_dir}: only the grader's "
                "hidden folder holds them (the grader prepares them from the installation's secret)"
            )
        games = find_games(hidden_dir / "games" / split)
        return [
            Item(
                f"{split}-{g.task_type}-{_game_digest(g.path)}",
                {
                    "game_file": str(g.game_file),
                    "task_type": g.task_type,
                    "task": g.task,
                    "game_sha256": _game_digest(g.path, full=True),
                },
            )
            for g in games
        ]

    def hidden_items_hash(self, split: str, hidden_dir: Path) -> str:
        """The games' ids and content, not where the hidden folder is."""
        items = self.load_items(split, hidden_dir)
        return items_digest(Item(i.id, {k: v for k, v in i.input.items() if k != "game_file"}) for i in items)

    def hidden_paths(self) -> list[Path]:
        # the official evaluation games in ALFWorld's local mirror ($ALFWORLD_DATA)
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


def _game_digest(path: Path, full: bool = False) -> str:
    """A game's content hash: its problem and trajectory files (the same game wherever it lives)."""
    h = hashlib.sha256()
    for name in ("initial_state.pddl", "traj_data.json"):
        f = path / name
        h.update(name.encode() + b"\0" + (f.read_bytes() if f.is_file() else b"") + b"\0")
    return h.hexdigest() if full else h.hexdigest()[:12]


def _copy_game(src: Path, dst: Path) -> Any:
    from autorl_alfworld.games import Game

    shutil.copytree(src, dst, dirs_exist_ok=True)
    game = json.loads((dst / "game.tw-pddl").read_text())
    traj = json.loads((dst / "traj_data.json").read_text())
    return Game(dst, traj["task_type"], str(game.get("task", "")))


__all__ = ["TASK_TYPES", "AlfWorldBenchmark"]
