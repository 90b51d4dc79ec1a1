"""ALFWorld on offline games: the planner wins them, a bad policy does not, episodes are batched in lockstep."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from autorl_alfworld.benchmark import AlfWorldBenchmark
from autorl_alfworld.env import AlfWorldEnv, expert_trajectory
from autorl_alfworld.games import TASK_TYPES, find_games, generate

from autorl import Completion, EpisodeEvaluator, GenerationRequest, UsageError
from autorl.testing import PolicyBackend

SMALL = {"source": "offline", "train_games": 6, "dev_games": 6, "test_games": 6, "examples": 1}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[AlfWorldBenchmark, Path, Path]:
    root = tmp_path_factory.mktemp("alfworld")
    bench = AlfWorldBenchmark(SMALL)
    bench.prepare_train_data(root / "train")
    bench.prepare_eval_data(root / "hidden")
    return bench, root / "train", root / "hidden"


def test_generated_games_cover_every_task_type_and_are_solvable(tmp_path: Path) -> None:
    games = generate(tmp_path, 12, seed=5, prefix="t")
    assert [g.task_type for g in games[:6]] == list(TASK_TYPES)
    assert [g.path.name for g in find_games(tmp_path)] == sorted(g.path.name for g in games)
    for game in games:
        traj = json.loads((game.path / "traj_data.json").read_text())
        assert traj["task_type"] == game.task_type and "_bar_" in (game.path / "initial_state.pddl").read_text()
        steps = expert_trajectory(game.game_file)
        assert steps and steps[-1][1], game.path  # the planner's plan wins the game
        env = AlfWorldEnv(game.game_file)
        env.reset()
        for action, _ in steps:
            env.step(action)
        assert env.won, game.path
        env.close()
    again = generate(tmp_path / "again", 12, seed=5, prefix="t")
    assert [(g.task, g.task_type) for g in again] == [(g.task, g.task_type) for g in games]  # deterministic


def test_environment_answers_like_alfworld(tmp_path: Path) -> None:
    game = generate(tmp_path, 1, seed=9, prefix="e")[0]
    env = AlfWorldEnv(game.game_file)
    obs = env.reset()
    assert obs.startswith("You are in the middle of a room.") and f"Your task is to: {game.task}." in obs
    assert "Welcome to TextWorld" not in obs
    assert env.step("fly to the moon").observation == "Nothing happens."
    think = env.step("think: I should look around first.")
    assert think.observation == "OK." and think.reward == 0.0 and not think.done
    assert "look" in env.admissible_commands()
    with pytest.raises(RuntimeError):
        env.expert_plan()
    env.close()
    expert = AlfWorldEnv(game.game_file, expert=True)
    expert.reset()
    result = None
    while not expert.won:
        result = expert.step(expert.expert_plan()[0])
    assert result is not None and result.reward == 1.0 and result.done
    expert.close()


def test_training_data_has_expert_solutions_and_no_evaluation_game(
    prepared: tuple[AlfWorldBenchmark, Path, Path],
) -> None:
    bench, train, hidden = prepared
    rows = [json.loads(line) for line in (train / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and {r["task_type"] for r in rows} == set(TASK_TYPES)
    assert all(r["expert"] and r["intro"].startswith("You are in") for r in rows)
    assert (train / rows[0]["game"] / "game.tw-pddl").is_file()
    train_problems = {(p / "initial_state.pddl").read_text() for p in (train / "games").iterdir()}
    for split in ("dev", "test"):
        items = bench.load_items(split, hidden)
        assert len(items) == 6
        for item in items:
            problem = (Path(item.input["game_file"]).parent / "initial_state.pddl").read_text()
            assert problem not in train_problems
            assert hidden in Path(item.input["game_file"]).parents
    dev = {i.input["game_file"] for i in bench.load_items("dev", hidden)}
    assert not dev & {i.input["game_file"] for i in bench.load_items("test", hidden)}
    # preparing again with the same options does nothing; the description tells the agent how to play
    before = (train / ".prepared.json").stat().st_mtime_ns
    bench.prepare_train_data(train)
    assert (train / ".prepared.json").stat().st_mtime_ns == before
    assert "AlfWorldEnv" in bench.description() and "train.jsonl" in bench.description()


def test_the_planner_wins_and_a_bad_policy_fails(prepared: tuple[AlfWorldBenchmark, Path, Path]) -> None:
    bench, _, hidden = prepared
    items = bench.load_items("dev", hidden)
    plans = {i.id: [a for a, _ in expert_trajectory(i.input["game_file"])] for i in items}
    by_prompt_task = {i.input["task"]: plans[i.id] for i in items}

    def expert(prompt: Any) -> str:
        text = prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)
        task = text.rsplit("Your task is to: ", 1)[1].split(".\n", 1)[0].split(".", 1)[0]
        done = text.rsplit("Here is the task.", 1)[1].count("\n> ")
        return " " + by_prompt_task[task][done] + "\nextra text after the newline"

    good = EpisodeEvaluator().evaluate(bench, items, PolicyBackend(expert))
    assert [r.score for r in good] == [1.0] * len(items)
    assert all(r.extra["trajectory"][0]["observation"].startswith("You are in") for r in good)
    bench_short = AlfWorldBenchmark({**SMALL, "max_steps": 5})
    bad = EpisodeEvaluator().evaluate(bench_short, items, PolicyBackend(lambda p: "look"))
    assert [r.score for r in bad] == [0.0] * len(items)
    assert all(r.extra["steps"] == 5 for r in bad)


def test_lockstep_batches_one_call_per_turn(prepared: tuple[AlfWorldBenchmark, Path, Path]) -> None:
    bench = AlfWorldBenchmark({**SMALL, "max_steps": 4})
    items = bench.load_items("test", prepared[2])
    backend = PolicyBackend(lambda p: "inventory")
    EpisodeEvaluator().evaluate(bench, items, backend)
    assert backend.calls == [len(items)] * 4  # turns, not games x turns


def test_prompts_are_react_with_examples_of_the_same_task_type(prepared: tuple[AlfWorldBenchmark, Path, Path]) -> None:
    bench, _, hidden = prepared
    item = bench.load_items("dev", hidden)[0]
    intro = AlfWorldEnv(item.input["game_file"]).reset()
    prompt = bench.episode_prompt(item, [(intro, "go to shelf 1")], "Nothing happens.")
    assert isinstance(prompt, str)
    assert prompt.startswith("Interact with a household to solve a task. Here are 1 examples.\n")
    head, game = prompt.split("Here is the task.\n")
    assert "> think: To solve the task" in head and game == f"{intro}\n> go to shelf 1\nNothing happens.\n>"
    chat = AlfWorldBenchmark({**SMALL, "chat": True})
    messages = chat.episode_prompt(item, [(intro, "go to shelf 1")], "Nothing happens.")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert chat.config().chat_template and chat.identity() != AlfWorldBenchmark({**SMALL, "max_steps": 9}).identity()
    assert bench.parse_action("> take apple 1 from countertop 1\nmore") == "take apple 1 from countertop 1"


def test_tiny_model_episodes_run_batched(
    prepared: tuple[AlfWorldBenchmark, Path, Path], request: pytest.FixtureRequest
) -> None:
    pytest.importorskip("torch", reason="the tiny-model run needs the hf backend (autorl[hf])")
    from autorl.inference.hf import HFBackend

    tiny_model: Path = request.getfixturevalue("tiny_model")
    bench = AlfWorldBenchmark({**SMALL, "examples": 0, "max_steps": 3, "max_new_tokens": 8})
    items = bench.load_items("dev", prepared[2])[:3]

    class Counting(HFBackend):
        calls: list[int] = []

        def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
            Counting.calls.append(len(requests))
            return super().generate(requests)

    backend = Counting()
    backend.load(tiny_model)
    results = EpisodeEvaluator().evaluate(bench, items, backend)
    assert len(results) == 3 and all(r.error is None for r in results)
    assert Counting.calls == [3, 3, 3]
    assert all(r.score == 0.0 and r.extra["steps"] == 3 for r in results)


def test_autorl_eval_on_alfworld(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch", reason="the tiny-model run needs the hf backend (autorl[hf])")
    from autorl.testing import check_benchmark_end_to_end

    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "home"))
    opts = {**SMALL, "examples": 0, "max_steps": 2, "max_new_tokens": 8}
    record = check_benchmark_end_to_end("alfworld", limit=2, options=opts)
    assert record["score"] == 0.0  # the untrained tiny model wins nothing in two turns
    assert record["config"]["benchmark_identity"]["max_steps"] == 2
    hidden = tmp_path / "home" / "hidden" / "alfworld" / "games"
    assert sorted(p.name for p in hidden.iterdir()) == ["dev", "test"]
    assert not (tmp_path / "home" / "datasets" / "alfworld" / "games" / "dev").exists()


def test_official_layout_is_found_split_and_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    # ALFWorld's download layout: json_2.1.1/<split>/<task>/<trial>/{traj_data.json, initial_state.pddl}
    data = tmp_path / "alfworld-data"
    for split, seed, n in (("train", 11, 6), ("valid_unseen", 12, 8)):
        for game in generate(tmp_path / f"gen-{split}", n, seed, split):
            trial = data / "json_2.1.1" / split / game.path.name / "trial_T0"
            trial.mkdir(parents=True)
            for name in ("traj_data.json", "initial_state.pddl"):
                shutil.copy(game.path / name, trial / name)
    monkeypatch.setenv("ALFWORLD_DATA", str(data))
    bench = AlfWorldBenchmark({"official_dev": 3, "examples": 0})
    assert bench.source == "official"
    bench.prepare_train_data(tmp_path / "train")
    bench.prepare_eval_data(tmp_path / "hidden")
    assert len((tmp_path / "train" / "train.jsonl").read_text().splitlines()) == 6
    dev, test = bench.load_items("dev", tmp_path / "hidden"), bench.load_items("test", tmp_path / "hidden")
    assert (len(dev), len(test)) == (3, 5)
    for item in dev + test:  # the game files got ALFWorld's templated task descriptions
        env = AlfWorldEnv(item.input["game_file"])
        assert f"Your task is to: {item.input['task']}." in env.reset()
        env.close()
    assert data / "json_2.1.1" / "valid_unseen" in bench.hidden_paths()
    with pytest.raises(UsageError, match='alfworld takes one of "auto", "official", "offline" for source'):
        AlfWorldBenchmark({"source": "somewhere"})


def test_hidden_games_contract_offline(tmp_path: Path) -> None:
    """The offline evaluation games come from the installation's secret, not from seeds in this package."""
    from autorl.testing import check_hidden_items_secret

    check_hidden_items_secret(AlfWorldBenchmark({**SMALL, "dev_games": 2, "test_games": 2}), tmp_path)


def test_hardening_checks(tmp_path: Path) -> None:
    """Adversarial actions (exits, floods, success words, control characters) solve no game."""
    from autorl.hardening import ADVERSARIAL
    from autorl.testing import check_hardening

    small = {**SMALL, "train_games": 2, "dev_games": 2, "test_games": 2, "max_steps": 5}
    actions = {
        k: ADVERSARIAL[k] for k in ("os._exit(0) at top level", "success words", "output flood", "control characters")
    }
    check_hardening(lambda: AlfWorldBenchmark(small), tmp_path, draws=2, limit=1, completions=actions)


def test_hidden_games_contract_official(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The official valid_unseen games are split into dev and test with the secret; ids follow the games."""
    import shutil

    from autorl.testing import check_hidden_items_secret

    data = tmp_path / "alfworld-data"
    for game in generate(tmp_path / "gen", 8, 12, "valid_unseen"):
        trial = data / "json_2.1.1" / "valid_unseen" / game.path.name / "trial_T0"
        trial.mkdir(parents=True)
        for name in ("traj_data.json", "initial_state.pddl"):
            shutil.copy(game.path / name, trial / name)
    monkeypatch.setenv("ALFWORLD_DATA", str(data))
    bench = AlfWorldBenchmark({"official_dev": 4, "examples": 0})
    assert bench.source == "official" and bench.dev_public and "recoverable" in bench.description()
    assert not AlfWorldBenchmark(SMALL).dev_public
    check_hidden_items_secret(bench, tmp_path / "contract")
    hidden = tmp_path / "contract" / "hidden-a"
    ids = {i.id for s in ("dev", "test") for i in bench.load_items(s, hidden)}
    assert len(ids) == 8 and all("valid_unseen" not in i for i in ids)


def test_secret_change_redraws_and_keeps_the_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = AlfWorldBenchmark({**SMALL, "dev_games": 2, "test_games": 2})
    hidden = tmp_path / "hidden"
    bench.prepare_eval_data(hidden)
    secret = (hidden / "secret").read_bytes()
    before = bench.hidden_items_hash("dev", hidden)
    monkeypatch.setenv("AUTORL_HIDDEN_SECRET", "cd" * 32)  # the operator reproduces another study here
    bench.prepare_eval_data(hidden)
    assert bench.hidden_items_hash("dev", hidden) != before
    monkeypatch.delenv("AUTORL_HIDDEN_SECRET")
    bench.prepare_eval_data(hidden)
    assert (hidden / "secret").read_bytes() == secret and bench.hidden_items_hash("dev", hidden) == before
