"""WebShop: the reward on hand-checked cases, search, pages and actions, expert and random policies, lockstep."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from autorl_webshop.benchmark import WebShopBenchmark
from autorl_webshop.catalog import make_catalog, make_goals
from autorl_webshop.env import WebShopEnv, expert_actions
from autorl_webshop.reward import reward, type_reward
from autorl_webshop.search import SearchEngine

from autorl.evaluation.episode import EpisodeEvaluator
from autorl.testing import PolicyBackend

SMALL = {"train_goals": 12, "dev_goals": 8, "test_goals": 8, "products_per_type": 4}

PRODUCT = {"asin": "B0TEST0001", "name": "Luxe Sulfate Free Shampoo", "query": "sulfate free shampoo",
           "category": "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos", "price": 18.0,
           "attributes": ["sulfate free", "for dry hair"], "options": {"size": ["8 fl oz", "16 fl oz"],
                                                                    "scent": ["lavender", "coconut"]},
           "features": ["Long lasting: made for everyday use."]}
GOAL = {"instruction": "i need sulfate free long lasting shampoo", "asin": "B0TEST0001", "name": PRODUCT["name"],
        "query": PRODUCT["query"], "category": PRODUCT["category"], "attributes": ["sulfate free", "long lasting"],
        "options": {"size": "16 fl oz", "scent": "lavender"}, "price_upper": 20.0}


def test_reward_hand_checked_cases() -> None:
    # everything right: (2 attributes + 2 options + price) / (2 + 2 + 1); "long lasting" is in the features
    assert reward(PRODUCT, {"size": "16 fl oz", "scent": "lavender"}, GOAL).total == pytest.approx(1.0)
    # one wrong option: 4 of 5
    assert reward(PRODUCT, {"size": "8 fl oz", "scent": "lavender"}, GOAL).total == pytest.approx(4 / 5)
    # no options chosen at all: 3 of 5
    assert reward(PRODUCT, {}, GOAL).total == pytest.approx(3 / 5)
    # over budget: 4 of 5
    assert reward({**PRODUCT, "price": 25.0}, {"size": "16 fl oz", "scent": "lavender"}, GOAL).total == pytest.approx(4 / 5)
    # a partial attribute match: the product lacks "long lasting" everywhere
    partial = {**PRODUCT, "features": []}
    assert reward(partial, {"size": "16 fl oz", "scent": "lavender"}, GOAL).attributes == 1
    # the wrong kind of product: no noun of the goal's title in its title -> r_type 0, reward 0
    shoes = {**PRODUCT, "name": "Apex Running Trainers", "query": "running shoes",
             "category": "Clothing › Men › Shoes"}
    assert type_reward(shoes, GOAL) == 0.0 and reward(shoes, {}, GOAL).total == 0.0
    # same query or category but a weaker title match: r_type 1 while the title shares more than 20%
    assert type_reward({**PRODUCT, "name": "Shampoo Deluxe Bottle"}, GOAL) == 1.0
    # a title sharing under 20% of the goal's words, with neither query nor category in common: 0.5
    other = {**PRODUCT, "name": "Luxe Brush Comb Mirror Towel Set", "query": "x", "category": "a › b"}
    assert type_reward(other, {**GOAL, "name": "Luxe Sulfate Free Shampoo Conditioner"}) == 0.5


def test_search_finds_the_expected_products() -> None:
    products = make_catalog(0, 5)
    engine = SearchEngine(products)
    shampoos = [p for p in engine.search("sulfate free shampoo")[:5]]
    assert all(p["query"] == "sulfate free shampoo" for p in shampoos)
    target = products[17]
    assert engine.search(target["name"])[0]["asin"] == target["asin"]
    assert engine.search("") == [] and engine.search("zzzz qqqq") == []


def test_pages_actions_and_invalid_actions() -> None:
    products = make_catalog(0, 5)
    goal = make_goals(products, 1, seed=4)[0]
    env = WebShopEnv(products, goal)
    obs = env.reset()
    assert obs == f"WebShop [SEP] Instruction: [SEP] {goal['instruction']} [SEP] Search"
    assert env.available_actions() == {"has_search_bar": True, "clickables": ["search"]}
    assert env.step("click[Buy Now]").observation == "Invalid action!"
    assert env.step("fly away").observation == "Invalid action!"
    results = env.step("search[made for everyday use]")  # every product's features say so
    assert "Page 1 (Total results: 50)" in results.observation and "Next >" in results.observation
    assert results.observation.count("$") == 10
    page2 = env.step("click[next >]")
    assert "< Prev" in page2.observation and "Page 2" in page2.observation
    env.step("click[< Prev]")
    first = env.available_actions()["clickables"][2]
    item = env.step(f"click[{first.upper()}]")
    assert "Buy Now" in item.observation and "Rating: N.A." in item.observation
    assert env.step("search[anything]").observation == "Invalid action!"  # no search bar here
    details = env.step("click[Features]")
    assert "made for everyday use" in details.observation
    env.step("click[< prev]")
    assert env.step("click[Back to Search]").observation.endswith("[SEP] Search")


def test_expert_reaches_reward_one_and_random_scores_low() -> None:
    products = make_catalog(0, 10)
    goals = make_goals(products, 30, seed=5)
    engine = SearchEngine(products)
    for goal in goals:
        env = WebShopEnv(products, goal, engine)
        env.reset()
        result = None
        for action in expert_actions(env):
            result = env.step(action)
        assert result is not None and result.done and result.reward == pytest.approx(1.0), goal
    rng = random.Random(0)
    total = 0.0
    for goal in goals:
        env = WebShopEnv(products, goal, engine)
        env.reset()
        reward_ = 0.0
        for _ in range(15):
            avail = env.available_actions()
            action = (f"search[{rng.choice(['lamp', 'coffee', 'shoes', 'case'])}]" if avail["has_search_bar"]
                      else f"click[{rng.choice(avail['clickables'])}]")
            step = env.step(action)
            if step.done:
                reward_ = step.reward
                break
        total += reward_
    assert total / len(goals) < 0.3


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[WebShopBenchmark, Path, Path]:
    root = tmp_path_factory.mktemp("webshop")
    bench = WebShopBenchmark(SMALL)
    bench.prepare_train_data(root / "train")
    bench.prepare_eval_data(root / "hidden")
    return bench, root / "train", root / "hidden"


def test_data_hides_the_evaluation_goals(prepared: tuple[WebShopBenchmark, Path, Path]) -> None:
    bench, train, hidden = prepared
    train_goals = [json.loads(x) for x in (train / "train_goals.jsonl").read_text().splitlines()]
    expert = [json.loads(x) for x in (train / "expert.jsonl").read_text().splitlines()]
    assert len(train_goals) == 12 and len(expert) == 12 and expert[0]["steps"][-1][0] == "click[Buy Now]"
    seen = {g["instruction"] for g in train_goals}
    for split in ("dev", "test"):
        items = bench.load_items(split, hidden)
        assert len(items) == 8 and not seen & {i.input["goal"]["instruction"] for i in items}
    assert not any("dev_goals" in p.name or "test_goals" in p.name for p in train.iterdir())
    assert json.loads((train / "catalog.json").read_text()) == json.loads((hidden / "catalog.json").read_text())
    assert "WebShopEnv.from_data_dir" in bench.description()


def test_episodes_expert_and_lockstep(prepared: tuple[WebShopBenchmark, Path, Path]) -> None:
    bench, _, hidden = prepared
    items = bench.load_items("dev", hidden)
    plans = {}
    for item in items:
        env = bench.make_env(item)
        env.reset()
        plans[item.input["goal"]["instruction"]] = expert_actions(env)

    def expert(prompt: Any) -> str:
        task = prompt.rsplit("Here is the task.\n", 1)[1]
        instruction = task.split("Instruction: [SEP] ", 1)[1].split(" [SEP]", 1)[0]
        return " " + plans[instruction][task.count("\nAction: ")] + "\nmore"

    backend = PolicyBackend(expert)
    good = bench.evaluator().evaluate(bench, items, backend)
    assert [r.score for r in good] == [1.0] * len(items)
    assert bench.evaluator().summary(good) == {"success_rate": 100.0}
    assert good[0].extra["trajectory"][0]["action"].startswith("search[")
    idle = PolicyBackend(lambda p: "click[nothing]")
    bad = EpisodeEvaluator().evaluate(bench, items, idle)
    assert [r.score for r in bad] == [0.0] * len(items) and idle.calls == [len(items)] * 15


def test_prompt_format(prepared: tuple[WebShopBenchmark, Path, Path]) -> None:
    bench, _, hidden = prepared
    item = bench.load_items("test", hidden)[0]
    obs = bench.make_env(item).reset()
    prompt = bench.episode_prompt(item, [(obs, "search[lamp]")], "Invalid action!")
    assert prompt.startswith("You are shopping in WebShop") and "Example:\nObservation: WebShop" in prompt
    assert prompt.endswith(f"Here is the task.\nObservation: {obs}\nAction: search[lamp]\nObservation: Invalid action!\nAction:")
    chat = WebShopBenchmark({**SMALL, "chat": True}).episode_prompt(item, [(obs, "search[lamp]")], "Invalid action!")
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user"]
    assert bench.parse_action("Action: click[Buy Now]\nObservation") == "click[Buy Now]"


def test_autorl_eval_on_webshop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch", reason="the tiny-model run needs the hf backend (autorl[hf])")
    from autorl.testing import check_benchmark_end_to_end

    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "home"))
    record = check_benchmark_end_to_end("webshop", limit=3, options={**SMALL, "examples": 0, "max_steps": 2,
                                                                     "max_new_tokens": 8})
    assert record["score"] == 0.0 and record["extra"]["success_rate"] == 0.0
    assert record["config"]["benchmark_identity"]["max_steps"] == 2


def test_webshop_published_data_is_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the published files' shapes: items_shuffle (products), items_ins_v2 (attributes), items_human_ins (goals)
    products = make_catalog(3, 6)
    items = [{"asin": p["asin"], "name": p["name"], "product_category": p["category"], "query": p["query"],
              "pricing": f"${p['price']:.2f}", "small_description": p["features"], "full_description": p["description"],
              "customization_options": {k: [{"value": v, "image": None} for v in vs] for k, vs in p["options"].items()}}
             for p in products]
    (tmp_path / "items_shuffle_1000.json").write_text(json.dumps(items))
    (tmp_path / "items_ins_v2_1000.json").write_text(json.dumps({p["asin"]: {"attributes": p["attributes"]} for p in products}))
    goals = make_goals(products, 520, seed=8)
    human: dict[str, list[dict[str, Any]]] = {}
    for g in goals:
        human.setdefault(g["asin"], []).append({"instruction": g["instruction"], "instruction_attributes": g["attributes"],
                                                "instruction_options": list(g["options"].values()),
                                                "price_upper": g["price_upper"]})
    (tmp_path / "items_human_ins.json").write_text(json.dumps(human))
    monkeypatch.setenv("WEBSHOP_DATA", str(tmp_path))
    bench = WebShopBenchmark({"dev_goals": 100})
    assert bench.source == "official"
    bench.prepare_train_data(tmp_path / "train")
    bench.prepare_eval_data(tmp_path / "hidden")
    dev, test = bench.load_items("dev", tmp_path / "hidden"), bench.load_items("test", tmp_path / "hidden")
    assert (len(dev), len(test)) == (100, 400)
    train = (tmp_path / "train" / "train_goals.jsonl").read_text().splitlines()
    assert len(train) == 20 and not {json.loads(x)["instruction"] for x in train} & {i.input["goal"]["instruction"] for i in dev + test}
    # the expert still wins a published goal
    env = bench.make_env(test[0])
    env.reset()
    result = None
    for action in expert_actions(env):
        result = env.step(action)
    assert result is not None and result.reward == pytest.approx(1.0)
    monkeypatch.setenv("WEBSHOP_DATA", str(tmp_path / "none"))
    with pytest.raises(Exception, match="no WebShop data"):
        WebShopBenchmark({"source": "official"})
