"""The ALFWorld environment as autorl evaluates it, importable by agents for rollouts and expert data.

    from autorl_alfworld.env import AlfWorldEnv, train_games
    env = AlfWorldEnv(game.game_file)
    obs = env.reset()                      # "You are in the middle of a room. ... Your task is to: ..."
    result = env.step("go to countertop 1")  # StepResult(observation, reward (1.0 once won), done, info)
    env.admissible_commands(), env.expert_plan()   # valid commands now; the planner's plan from here

Like ALFWorld's ReAct setup, an action starting with ``think:`` changes nothing and is answered ``OK.``;
a command the game does not know is answered ``Nothing happens.``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autorl import Environment, StepResult

INTRO = "-= Welcome to TextWorld, ALFRED! =-"


class AlfWorldEnv(Environment):
    """One ALFWorld game (``game.tw-pddl``) through TextWorld's PDDL engine, names demangled as ALFWorld does."""

    def __init__(self, game_file: Path | str, expert: bool = False) -> None:
        self.game_file = str(game_file)
        #: ask the planner for the plan at every state (slower; for expert data, not for evaluation)
        self.expert = expert
        self._env: Any = None
        self._state: Any = None
        self.won = False

    def _start(self) -> Any:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler

        infos = textworld.EnvInfos(won=True, admissible_commands=True, policy_commands=self.expert)
        return textworld.start(self.game_file, request_infos=infos, wrappers=[AlfredDemangler(shuffle=False)])

    def reset(self) -> str:
        if self._env is None:
            self._env = self._start()
        self._state = self._env.reset()
        self.won = False
        return clean(self._state.feedback)

    def step(self, action: str) -> StepResult:
        if self._state is None:
            raise RuntimeError("reset() the environment first")
        action = action.strip()
        if action.lower().startswith("think:"):
            return StepResult("OK.", 1.0 if self.won else 0.0, self.won, {"think": True})
        self._state, _score, done = self._env.step(action)
        self.won = bool(self._state["won"])
        return StepResult(
            clean(self._state.feedback), 1.0 if self.won else 0.0, bool(done) or self.won, {"won": self.won}
        )

    def admissible_commands(self) -> list[str]:
        return list(self._state["admissible_commands"]) if self._state is not None else []

    def expert_plan(self) -> list[str]:
        """The planner's commands from the current state to the goal (empty once won or when unsolvable).
        Needs ``AlfWorldEnv(game, expert=True)``."""
        if not self.expert:
            raise RuntimeError("expert plans need AlfWorldEnv(game_file, expert=True)")
        return list(self._state.get("policy_commands") or []) if self._state is not None else []

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


def clean(feedback: str) -> str:
    text = feedback.replace(INTRO, "").strip()
    return text


def expert_trajectory(game_file: Path | str, max_steps: int = 50) -> list[tuple[str, str]]:
    """(action, observation) pairs of the planner solving the game; for SFT warm starts and examples.

    The game is deterministic, so the plan made at the start is followed to the end (one planner call).
    """
    saved = Path(game_file).with_name("expert_plan.json")  # written when the game was generated
    if saved.is_file():
        plan = [str(a) for a in json.loads(saved.read_text())]
    else:
        planner = AlfWorldEnv(game_file, expert=True)
        try:
            planner.reset()
            plan = planner.expert_plan()
        finally:
            planner.close()
    env = AlfWorldEnv(game_file)  # no planning at each step
    try:
        env.reset()
        steps: list[tuple[str, str]] = []
        for action in plan[:max_steps]:
            result = env.step(action)
            steps.append((action, result.observation))
            if result.done:
                break
        return steps
    finally:
        env.close()
