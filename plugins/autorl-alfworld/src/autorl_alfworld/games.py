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

TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")

OPENABLE = {"Cabinet", "Drawer", "Fridge", "Microwave", "Safe", "Box"}
#: scene -> (receptacles with counts, objects), ALFRED class names
SCENES: dict[str, tuple[dict[str, int], list[str]]] = {
    "kitchen": ({"CounterTop": 2, "Cabinet": 4, "Drawer": 2, "Fridge": 1, "Microwave": 1, "SinkBasin": 1,
                 "StoveBurner": 2, "DiningTable": 1, "GarbageCan": 1, "Shelf": 1},
                ["Apple", "Tomato", "Potato", "Egg", "Lettuce", "Bread", "Mug", "Cup", "Plate", "Bowl", "Pan", "Pot",
                 "Knife", "Fork", "Spoon", "Spatula", "Ladle", "SaltShaker", "PepperShaker", "DishSponge"]),
    "bathroom": ({"CounterTop": 1, "SinkBasin": 2, "Toilet": 1, "Cabinet": 3, "Drawer": 2, "TowelHolder": 1,
                  "GarbageCan": 1, "BathtubBasin": 1, "Shelf": 1},
                 ["SoapBar", "Cloth", "SprayBottle", "Candle", "ToiletPaper", "SoapBottle", "Towel", "HandTowel"]),
    "bedroom": ({"Desk": 1, "Bed": 1, "Shelf": 2, "Drawer": 3, "SideTable": 1, "Dresser": 1, "GarbageCan": 1,
                 "Safe": 1},
                ["Book", "CellPhone", "Pen", "Pencil", "KeyChain", "CreditCard", "AlarmClock", "Pillow", "CD",
                 "Laptop", "Mug", "Bowl", "Vase"]),
    "livingroom": ({"Sofa": 1, "ArmChair": 1, "CoffeeTable": 1, "SideTable": 2, "Shelf": 2, "Drawer": 2,
                    "GarbageCan": 1, "Dresser": 1, "Box": 1},
                   ["Book", "RemoteControl", "KeyChain", "CreditCard", "Newspaper", "Watch", "Vase", "Statue",
                    "Pillow", "Laptop"]),
}
CLEANABLE = {"Apple", "Tomato", "Potato", "Egg", "Lettuce", "Mug", "Cup", "Plate", "Bowl", "Pan", "Pot", "Knife",
             "Fork", "Spoon", "Spatula", "Ladle", "DishSponge", "SoapBar", "Cloth"}
HEATABLE = {"Apple", "Tomato", "Potato", "Egg", "Bread", "Mug", "Cup", "Plate"}
COOLABLE = {"Apple", "Tomato", "Potato", "Egg", "Lettuce", "Bread", "Mug", "Cup", "Plate", "Bowl", "Pan", "Pot"}
LOOKABLE = {"Book", "CellPhone", "Pen", "Pencil", "KeyChain", "CreditCard", "AlarmClock", "CD", "Pillow", "Watch",
            "Newspaper", "RemoteControl", "Statue", "Vase"}
#: receptacles a desk lamp stands on
LAMP_STANDS = ("Desk", "SideTable", "Dresser")


@dataclass(frozen=True)
class Game:
    """One game directory and what its traj_data says."""

    path: Path
    task_type: str
    task: str

    @property
    def game_file(self) -> Path:
        return self.path / "game.tw-pddl"


def _coords(rng: random.Random) -> str:
    def one() -> str:
        v = rng.uniform(-4.0, 4.0)
        sign = "_minus_" if v < 0 else "_plus_"
        return f"{sign}{abs(v):05.2f}".replace(".", "_dot_")

    return "_bar_".join(one() for _ in range(3))


def _mangle(cls: str, rng: random.Random) -> str:
    """An ALFRED object id; sink and bathtub basins carry their basin class as ALFRED's do."""
    if cls == "SinkBasin":
        return f"Sink_bar_{_coords(rng)}_bar_SinkBasin"
    if cls == "BathtubBasin":
        return f"Bathtub_bar_{_coords(rng)}_bar_BathtubBasin"
    return f"{cls}_bar_{_coords(rng)}"


def _logic() -> tuple[str, str]:
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    return Path(ALFRED_PDDL_PATH).read_text(), Path(ALFRED_TWL2_PATH).read_text()


def _goal(task_type: str, params: dict[str, str]) -> str:
    import alfworld.gen.goal_library as glib

    pddl = glib.gdict[task_type]["pddl"].replace("#", "-")
    return str(pddl.format(obj=params["object_target"], recep=params["parent_target"],
                           toggle=params["toggle_target"], mrecep=params["mrecep_target"]))


def _task_desc(task_type: str, params: dict[str, str], rng: random.Random) -> str:
    import alfworld.gen.goal_library as glib

    template = rng.choice(glib.gdict[task_type]["templates"])
    return str(template.format(obj=params["object_target"].lower(), recep=params["parent_target"].lower(),
                               toggle=params["toggle_target"].lower(), mrecep=params["mrecep_target"].lower()))


def _feasible(task_type: str, scene: str) -> bool:
    receps, objects = SCENES[scene]
    if task_type == "look_at_obj_in_light":
        return any(s in receps for s in LAMP_STANDS) and bool(LOOKABLE & set(objects))
    if task_type == "pick_clean_then_place_in_recep":
        return "SinkBasin" in receps and bool(CLEANABLE & set(objects))
    if task_type == "pick_heat_then_place_in_recep":
        return "Microwave" in receps and bool(HEATABLE & set(objects))
    if task_type == "pick_cool_then_place_in_recep":
        return "Fridge" in receps and bool(COOLABLE & set(objects))
    return True


def make_problem(task_type: str, rng: random.Random, name: str) -> tuple[str, dict[str, Any]]:
    """One solvable ALFRED problem of ``task_type``: (PDDL problem, traj_data)."""
    scene = rng.choice([s for s in SCENES if _feasible(task_type, s)])
    recep_counts, object_pool = SCENES[scene]
    receps: list[tuple[str, str]] = []  # (id, class)
    for cls, count in recep_counts.items():
        receps += [(_mangle(cls, rng), cls) for _ in range(count)]
    pool = {
        "look_at_obj_in_light": LOOKABLE, "pick_clean_then_place_in_recep": CLEANABLE,
        "pick_heat_then_place_in_recep": HEATABLE, "pick_cool_then_place_in_recep": COOLABLE,
    }.get(task_type, set(object_pool))
    target = rng.choice(sorted(set(object_pool) & pool))
    params = {"object_target": target, "parent_target": "", "toggle_target": "", "mrecep_target": "",
              "object_sliced": False}
    placeable = [c for c in dict.fromkeys(c for _, c in receps) if c not in ("SinkBasin", "Microwave", "BathtubBasin")
                 or task_type == "pick_and_place_simple"]
    if task_type == "look_at_obj_in_light":
        params["toggle_target"] = "DeskLamp"
    else:
        params["parent_target"] = rng.choice([c for c in placeable if c != "GarbageCan"])
    # objects: the target (two for pick_two), distractors of other classes
    n_targets = 2 if task_type == "pick_two_obj_and_place" else 1
    classes = [target] * n_targets + rng.sample([c for c in object_pool if c != target],
                                                k=min(len(object_pool) - 1, rng.randint(4, 7)))
    objects = [(_mangle(c, rng), c) for c in classes]
    if task_type == "look_at_obj_in_light":
        objects.append((_mangle("DeskLamp", rng), "DeskLamp"))
    start_receps = [r for r in receps if r[1] not in ("Microwave", "SinkBasin", "BathtubBasin", "GarbageCan")]
    placement: dict[str, str] = {}
    for oid, cls in objects:
        if cls == "DeskLamp":
            stands = [r for r in receps if r[1] in LAMP_STANDS]
            placement[oid] = rng.choice(stands)[0]
            continue
        # the target does not start where it has to end
        options = [r for r in start_receps if not (cls == target and r[1] == params["parent_target"])]
        placement[oid] = rng.choice(options)[0]
    locations = {rid: f"loc{i}" for i, (rid, _) in enumerate(receps, 1)}
    otypes = sorted({c for _, c in objects})
    rtypes = sorted({c for _, c in receps})
    lines = [f"(define (problem plan_trial_{name})", "(:domain alfred)", "(:objects", "    agent1 - agent"]
    lines += [f"    {t}Type - otype" for t in otypes] + [f"    {t}Type - rtype" for t in rtypes]
    lines += [f"    {oid} - object" for oid, _ in objects] + [f"    {rid} - receptacle" for rid, _ in receps]
    lines += ["    loc0 - location"] + [f"    {loc} - location" for loc in locations.values()] + ["    )", "(:init"]
    lines.append("    (atLocation agent1 loc0)")
    for rid, cls in receps:
        lines += [f"    (receptacleType {rid} {cls}Type)", f"    (receptacleAtLocation {rid} {locations[rid]})"]
        if cls in OPENABLE:
            lines.append(f"    (openable {rid})")
        lines += [f"    (canContain {cls}Type {t}Type)" for t in otypes if t != "DeskLamp"]
    for oid, cls in objects:
        rid = placement[oid]
        lines += [f"    (objectType {oid} {cls}Type)", f"    (inReceptacle {oid} {rid})",
                  f"    (objectAtLocation {oid} {locations[rid]})"]
        if cls == "DeskLamp":
            lines.append(f"    (toggleable {oid})")
            continue
        lines.append(f"    (pickupable {oid})")
        for flag, group in (("cleanable", CLEANABLE), ("heatable", HEATABLE), ("coolable", COOLABLE)):
            if cls in group:
                lines.append(f"    ({flag} {oid})")
    lines.append("    )")
    problem = "\n".join(lines) + "\n" + _goal(task_type, params) + "\n"
    traj = {"task_type": task_type, "scene": scene, "pddl_params": params, "task_id": name,
            "turk_annotations": {"anns": [{"task_desc": _task_desc(task_type, params, rng)}]}}
    return problem, traj


def write_game(root: Path, problem: str, traj: dict[str, Any], task: str | None = None) -> Game:
    """The game files; ``task`` given (official games): only ``game.tw-pddl`` is written, with that task."""
    domain, grammar = _logic()
    root.mkdir(parents=True, exist_ok=True)
    if task is None:
        task = str(traj["turk_annotations"]["anns"][0]["task_desc"])
        (root / "initial_state.pddl").write_text(problem)
        (root / "traj_data.json").write_text(json.dumps(traj, indent=1))
    game = {"pddl_domain": domain, "grammar": grammar.replace("UNKNOWN GOAL", task), "pddl_problem": problem,
            "solvable": True, "task": task}
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
            task = _task_desc(traj["task_type"], params, random.Random(d.name))
            write_game(d, (d / "initial_state.pddl").read_text(), traj, task=task)
        game = json.loads((d / "game.tw-pddl").read_text())
        if not game.get("solvable", True):
            continue
        found.append(Game(d, traj["task_type"], str(game.get("task") or _task_of(game["grammar"]))))
    return found


def _task_of(grammar: str) -> str:
    marker = '"rhs": "Your task is to: '
    return grammar.split(marker, 1)[1].split('."', 1)[0] if marker in grammar else ""
