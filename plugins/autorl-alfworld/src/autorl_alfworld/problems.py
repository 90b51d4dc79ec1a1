"""ALFRED-style problems generated offline: a scene's receptacles and objects with ALFRED's mangled ids
(``Apple_bar__plus_01_dot_20...``), ALFWorld's goal library for the goal and its task templates for the
description, so that the engine, the demangler and the planner treat them exactly like the official games (the
game folders they become: :mod:`autorl_alfworld.games`)."""

from __future__ import annotations

import random
from typing import Any

TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

OPENABLE = {"Cabinet", "Drawer", "Fridge", "Microwave", "Safe", "Box"}
#: scene -> (receptacles with counts, objects), ALFRED class names
SCENES: dict[str, tuple[dict[str, int], list[str]]] = {
    "kitchen": (
        {
            "CounterTop": 2,
            "Cabinet": 4,
            "Drawer": 2,
            "Fridge": 1,
            "Microwave": 1,
            "SinkBasin": 1,
            "StoveBurner": 2,
            "DiningTable": 1,
            "GarbageCan": 1,
            "Shelf": 1,
        },
        [
            "Apple",
            "Tomato",
            "Potato",
            "Egg",
            "Lettuce",
            "Bread",
            "Mug",
            "Cup",
            "Plate",
            "Bowl",
            "Pan",
            "Pot",
            "Knife",
            "Fork",
            "Spoon",
            "Spatula",
            "Ladle",
            "SaltShaker",
            "PepperShaker",
            "DishSponge",
        ],
    ),
    "bathroom": (
        {
            "CounterTop": 1,
            "SinkBasin": 2,
            "Toilet": 1,
            "Cabinet": 3,
            "Drawer": 2,
            "TowelHolder": 1,
            "GarbageCan": 1,
            "BathtubBasin": 1,
            "Shelf": 1,
        },
        ["SoapBar", "Cloth", "SprayBottle", "Candle", "ToiletPaper", "SoapBottle", "Towel", "HandTowel"],
    ),
    "bedroom": (
        {"Desk": 1, "Bed": 1, "Shelf": 2, "Drawer": 3, "SideTable": 1, "Dresser": 1, "GarbageCan": 1, "Safe": 1},
        [
            "Book",
            "CellPhone",
            "Pen",
            "Pencil",
            "KeyChain",
            "CreditCard",
            "AlarmClock",
            "Pillow",
            "CD",
            "Laptop",
            "Mug",
            "Bowl",
            "Vase",
        ],
    ),
    "livingroom": (
        {
            "Sofa": 1,
            "ArmChair": 1,
            "CoffeeTable": 1,
            "SideTable": 2,
            "Shelf": 2,
            "Drawer": 2,
            "GarbageCan": 1,
            "Dresser": 1,
            "Box": 1,
        },
        ["Book", "RemoteControl", "KeyChain", "CreditCard", "Newspaper", "Watch", "Vase", "Statue", "Pillow", "Laptop"],
    ),
}
CLEANABLE = {
    "Apple",
    "Tomato",
    "Potato",
    "Egg",
    "Lettuce",
    "Mug",
    "Cup",
    "Plate",
    "Bowl",
    "Pan",
    "Pot",
    "Knife",
    "Fork",
    "Spoon",
    "Spatula",
    "Ladle",
    "DishSponge",
    "SoapBar",
    "Cloth",
}
HEATABLE = {"Apple", "Tomato", "Potato", "Egg", "Bread", "Mug", "Cup", "Plate"}
COOLABLE = {"Apple", "Tomato", "Potato", "Egg", "Lettuce", "Bread", "Mug", "Cup", "Plate", "Bowl", "Pan", "Pot"}
LOOKABLE = {
    "Book",
    "CellPhone",
    "Pen",
    "Pencil",
    "KeyChain",
    "CreditCard",
    "AlarmClock",
    "CD",
    "Pillow",
    "Watch",
    "Newspaper",
    "RemoteControl",
    "Statue",
    "Vase",
}
#: receptacles a desk lamp stands on
LAMP_STANDS = ("Desk", "SideTable", "Dresser")


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


def _goal(task_type: str, params: dict[str, str]) -> str:
    import alfworld.gen.goal_library as glib

    pddl = glib.gdict[task_type]["pddl"].replace("#", "-")
    return str(
        pddl.format(
            obj=params["object_target"],
            recep=params["parent_target"],
            toggle=params["toggle_target"],
            mrecep=params["mrecep_target"],
        )
    )


def task_desc(task_type: str, params: dict[str, str], rng: random.Random) -> str:
    import alfworld.gen.goal_library as glib

    template = rng.choice(glib.gdict[task_type]["templates"])
    return str(
        template.format(
            obj=params["object_target"].lower(),
            recep=params["parent_target"].lower(),
            toggle=params["toggle_target"].lower(),
            mrecep=params["mrecep_target"].lower(),
        )
    )


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
        "look_at_obj_in_light": LOOKABLE,
        "pick_clean_then_place_in_recep": CLEANABLE,
        "pick_heat_then_place_in_recep": HEATABLE,
        "pick_cool_then_place_in_recep": COOLABLE,
    }.get(task_type, set(object_pool))
    target = rng.choice(sorted(set(object_pool) & pool))
    params = {
        "object_target": target,
        "parent_target": "",
        "toggle_target": "",
        "mrecep_target": "",
        "object_sliced": False,
    }
    placeable = [
        c
        for c in dict.fromkeys(c for _, c in receps)
        if c not in ("SinkBasin", "Microwave", "BathtubBasin") or task_type == "pick_and_place_simple"
    ]
    if task_type == "look_at_obj_in_light":
        params["toggle_target"] = "DeskLamp"
    else:
        params["parent_target"] = rng.choice([c for c in placeable if c != "GarbageCan"])
    # objects: the target (two for pick_two), distractors of other classes
    n_targets = 2 if task_type == "pick_two_obj_and_place" else 1
    classes = [target] * n_targets + rng.sample(
        [c for c in object_pool if c != target], k=min(len(object_pool) - 1, rng.randint(4, 7))
    )
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
        lines += [
            f"    (objectType {oid} {cls}Type)",
            f"    (inReceptacle {oid} {rid})",
            f"    (objectAtLocation {oid} {locations[rid]})",
        ]
        if cls == "DeskLamp":
            lines.append(f"    (toggleable {oid})")
            continue
        lines.append(f"    (pickupable {oid})")
        for flag, group in (("cleanable", CLEANABLE), ("heatable", HEATABLE), ("coolable", COOLABLE)):
            if cls in group:
                lines.append(f"    ({flag} {oid})")
    lines.append("    )")
    problem = "\n".join(lines) + "\n" + _goal(task_type, params) + "\n"
    traj = {
        "task_type": task_type,
        "scene": scene,
        "pddl_params": params,
        "task_id": name,
        "turk_annotations": {"anns": [{"task_desc": task_desc(task_type, params, rng)}]},
    }
    return problem, traj
