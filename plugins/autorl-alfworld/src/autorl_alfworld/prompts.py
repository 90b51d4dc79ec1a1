"""ReAct prompting for ALFWorld: solved examples of the same task type, then the game so far.

The examples are games of the plugin's own generator (a fixed seed, never an evaluation game) solved by the
planner, with one opening thought, in the format of the ReAct ALFWorld prompts: ``> action`` lines, each
followed by the game's answer. They are deterministic, so the benchmark version pins them.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from autorl import episode_steps

INSTRUCTION = "Interact with a household to solve a task."
EXAMPLE_SEED = 7_777

THOUGHTS = {
    "pick_and_place_simple": "To solve the task, I need to find and take a {obj}, then put it in {recep}.",
    "look_at_obj_in_light": "To solve the task, I need to find and take a {obj}, then find and use a {toggle}.",
    "pick_clean_then_place_in_recep": "To solve the task, I need to find and take a {obj}, then clean it with "
    "sinkbasin, then put it in {recep}.",
    "pick_heat_then_place_in_recep": "To solve the task, I need to find and take a {obj}, then heat it with "
    "microwave, then put it in {recep}.",
    "pick_cool_then_place_in_recep": "To solve the task, I need to find and take a {obj}, then cool it with "
    "fridge, then put it in {recep}.",
    "pick_two_obj_and_place": "To solve the task, I need to find and take a first {obj}, then put it in {recep}, "
    "then find and take a second {obj}, then put it in {recep}.",
}


def transcript(intro: str, steps: list[tuple[str, str]]) -> str:
    return intro + "".join(f"\n> {action}\n{observation}" for action, observation in steps)


@functools.cache
def examples(per_type: int) -> dict[str, tuple[str, ...]]:
    """``per_type`` solved example transcripts for each task type."""
    import json

    from autorl_alfworld.env import AlfWorldEnv, expert_trajectory
    from autorl_alfworld.games import TASK_TYPES, generate

    out: dict[str, list[str]] = {t: [] for t in TASK_TYPES}
    if per_type <= 0:
        return {t: () for t in TASK_TYPES}
    with tempfile.TemporaryDirectory() as tmp:
        for game in generate(Path(tmp), per_type * len(TASK_TYPES), EXAMPLE_SEED, "example"):
            params = json.loads((game.path / "traj_data.json").read_text())["pddl_params"]
            thought = THOUGHTS[game.task_type].format(
                obj=params["object_target"].lower(),
                recep=params["parent_target"].lower(),
                toggle=params["toggle_target"].lower(),
            )
            env = AlfWorldEnv(game.game_file)
            try:
                intro = env.reset()
            finally:
                env.close()
            steps = [(f"think: {thought}", "OK."), *expert_trajectory(game.game_file)]
            out[game.task_type].append(transcript(intro, steps))
    return {t: tuple(v) for t, v in out.items()}


def completion_prompt(shots: tuple[str, ...], intro: str, history: list[tuple[str, str]], observation: str) -> str:
    """The text-completion prompt; the model continues after the final ``>``."""
    head = INSTRUCTION + (f" Here are {len(shots)} examples.\n" + "\n\n".join(shots) + "\n\n" if shots else "\n")
    steps = episode_steps(history, observation)
    return head + "Here is the task.\n" + transcript(intro, steps) + "\n>"


def chat_prompt(
    shots: tuple[str, ...], intro: str, history: list[tuple[str, str]], observation: str
) -> list[dict[str, str]]:
    """Chat messages: the instruction and examples as the system message, then observation/action turns."""
    system = INSTRUCTION + " Answer with one action a turn, e.g. `go to countertop 1` or `think: ...`."
    if shots:
        system += f" Here are {len(shots)} examples.\n\n" + "\n\n".join(shots)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": intro}]
    for action, obs in episode_steps(history, observation):
        messages += [{"role": "assistant", "content": action}, {"role": "user", "content": obs}]
    return messages
