"""ALFWorld games: the official data when it is in the cache, else ALFRED-style problems generated offline.

A game is a directory in ALFWorld's own layout: ``traj_data.json`` (``task_type``, ``pddl_params``, the task
description), ``initial_state.pddl`` and ``game.tw-pddl`` (the ALFRED PDDL domain, the text grammar with the
task filled in, the problem). Generated problems use ALFWorld's domain, grammar, goal library and task
templates, and ALFRED's mangled object ids (``Apple_bar__plus_01_dot_20...``), so the engine, the demangler
and the planner treat them exactly like the official games.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autorl_alfworld.problems import TASK_TYPES, make_problem, task_desc

__all__ = ["TASK_TYPES", "Game", "find_games", "generate", "make_problem", "write_game"]


@dataclass(frozen=True)
class Game:
    """One game directory and what its traj_data says."""

    path: Path
    task_type: str
    task: str

    @property
    def game_file(self) -> Path:
        return self.path / "game.tw-pddl"


def _logic() -> tuple[str, str]:
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    return Path(ALFRED_PDDL_PATH).read_text(), Path(ALFRED_TWL2_PATH).read_text()


def write_game(root: Path, problem: str, traj: dict[str, Any], task: str | None = None) -> Game:
    """The game files; ``task`` given (official games): only ``game.tw-pddl`` is written, with that task."""
    domain, grammar = _logic()
    root.mkdir(parents=True, exist_ok=True)
    if task is None:
        task = str(traj["turk_annotations"]["anns"][0]["task_desc"])
        (root / "initial_state.pddl").write_text(problem)
        (root / "traj_data.json").write_text(json.dumps(traj, indent=1))
    game = {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", task),
        "pddl_problem": problem,
        "solvable": True,
        "task": task,
    }
    (root / "game.tw-pddl").write_text(json.dumps(game))
    return Game(root, traj["task_type"], task)


def generate(root: Path, n: int, seed: int, prefix: str) -> list[Game]:
    """``n`` games, task types in turn, each checked solvable by the planner before it is kept."""
    from autorl_alfworld.env import AlfWorldEnv

    rng = random.Random(seed)
    games: list[Game] = []
    attempt = 0
    while len(games) < n:
        task_type = TASK_TYPES[len(games) % len(TASK_TYPES)]
        name = f"{prefix}_{len(games):04d}"
        problem, traj = make_problem(task_type, rng, name)
        game = write_game(root / f"{task_type}-{name}", problem, traj)
        attempt += 1
        env = AlfWorldEnv(game.game_file, expert=True)
        try:
            env.reset()
            plan = env.expert_plan()
            ok = bool(plan)
            if ok:
                (game.path / "expert_plan.json").write_text(json.dumps(plan))
        except (Exception, SystemExit):  # the planner's parser exits on a malformed problem
            ok = False
        finally:
            env.close()
        if not ok:
            shutil.rmtree(game.path, ignore_errors=True)
        if ok:
            games.append(game)
        elif attempt > 5 * n:
            raise RuntimeError("could not generate solvable ALFWorld games")
    return games


def find_games(root: Path) -> list[Game]:
    """Every game under ``root`` (ALFWorld's layout: a directory with traj_data.json), in a stable order.

    Official games without ``game.tw-pddl`` get one from their ``initial_state.pddl``, as ALFWorld does.
    """
    found = []
    for dirpath, _dirs, files in sorted(os.walk(root)):
        if "traj_data.json" not in files or "movable" in dirpath or "Sliced" in dirpath:
            continue
        d = Path(dirpath)
        traj = json.loads((d / "traj_data.json").read_text())
        if traj.get("task_type") not in TASK_TYPES:
            continue
        if not (d / "game.tw-pddl").is_file():
            if not (d / "initial_state.pddl").is_file():
                continue
            # ALFWorld's evaluation protocol: the templated task description, seeded per game
            params = {k: str(v) for k, v in traj["pddl_params"].items()}
            task = task_desc(traj["task_type"], params, random.Random(d.name))
            write_game(d, (d / "initial_state.pddl").read_text(), traj, task=task)
        game = json.loads((d / "game.tw-pddl").read_text())
        if not game.get("solvable", True):
            continue
        found.append(Game(d, traj["task_type"], str(game.get("task") or _task_of(game["grammar"]))))
    return found


def _task_of(grammar: str) -> str:
    marker = '"rhs": "Your task is to: '
    return grammar.split(marker, 1)[1].split('."', 1)[0] if marker in grammar else ""
