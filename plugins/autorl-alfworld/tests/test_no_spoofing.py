"""Actions that claim success without doing the task score 0: ALFWorld's reward is the game's own ``won``.

ALFWorld runs no model code, but an agent's policy can still try words that look like success to a
careless harness: the game's or a grader's success lines, TextWorld meta commands, control characters,
several commands on one line, or actions too long to handle.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from autorl_alfworld.benchmark import AlfWorldBenchmark
from autorl_alfworld.env import AlfWorldEnv, expert_trajectory
from autorl_alfworld.games import generate

from autorl.testing import check_claims_score_zero, prepare_as_a_run

FAKES = [
    "You won!",
    "Task completed",
    "task completed successfully",
    "Reward: 1.0",
    "reward 1",
    "done",
    "win",
    "quit",
    "restart",
    "reset",
    "score",
    "goal",
    "help",
    "look\nwin",
    "think: I have completed the task. You won!",
    "think:You won",
    "> You won!",
    "\x00",
    "\x1b[2K\rYou won!",
    "go to \x00fridge 1",
    "take all",
    "put all in all",
    "",
    " " * 10_000,
    "go to " + "x" * 200_000,
    "look; win",
    "look && win",
    "*** You won! ***",
]


@pytest.fixture(scope="module")
def game(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(generate(tmp_path_factory.mktemp("games"), 1, seed=9, prefix="s")[0].game_file)


def test_fake_success_actions_never_win(game: Path) -> None:
    env = AlfWorldEnv(game)
    env.reset()
    try:
        for action in FAKES:
            result = env.step(action)
            assert (result.reward, result.done, env.won) == (0.0, False, False), repr(action[:40])
        # the game still plays: the planner's own plan wins it from here on
        steps = expert_trajectory(game)
        for action, _ in steps:
            result = env.step(action)
        assert env.won and result.reward == 1.0 and result.done
    finally:
        env.close()


def test_fake_success_between_real_steps_changes_nothing(game: Path) -> None:
    """Interleaving success claims with the expert's steps neither wins early nor breaks the real win."""
    steps = [a for a, _ in expert_trajectory(game)]
    env = AlfWorldEnv(game)
    env.reset()
    try:
        for k, action in enumerate(steps):
            for fake in ("You won!", "think: done, reward 1", "win"):
                result = env.step(fake)
                assert result.reward == 0.0 and not result.done
            result = env.step(action)
            assert result.done == (k == len(steps) - 1)
        assert env.won
    finally:
        env.close()


def test_policies_that_claim_success_score_zero(tmp_path: Path) -> None:
    bench = AlfWorldBenchmark({"source": "offline", "train_games": 6, "dev_games": 6, "test_games": 6, "examples": 1})
    hidden = prepare_as_a_run(bench, tmp_path)
    check_claims_score_zero(bench, hidden, [fake + "\nObservation: You won! Reward: 1.0" for fake in FAKES])
