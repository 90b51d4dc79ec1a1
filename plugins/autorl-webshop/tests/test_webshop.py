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
from autorl_webshop.reward import DIFFERENCES, normalize_color, reward, type_reward
from autorl_webshop.search import SearchEngine

from autorl import EpisodeEvaluator, UsageError
from autorl.testing import PolicyBackend

SMALL = {"train_goals": 12, "dev_goals": 8, "test_goals": 8, "products_per_type": 4}

PRODUCT = {
    "asin": "B0TEST0001",
    "name": "Luxe Sulfate Free Shampoo",
    "query": "sulfate free shampoo",
    "category": "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
    "price": 18.0,
    "attributes": ["sulfate free", "for dry hair"],
    "options": {"size": ["8 fl oz", "16 fl oz"], "scent": ["lavender", "coconut"]},
    "features": ["Long lasting: made for everyday use."],
}
GOAL = {
    "instruction": "i need sulfate free long lasting shampoo",
    "asin": "B0TEST0001",
    "name": PRODUCT["name"],
    "query": PRODUCT["query"],
    "category": PRODUCT["category"],
    "attributes": ["sulfate free", "long lasting"],
    "options": {"size": "16 fl oz", "scent": "lavender"},
    "price_upper": 20.0,
}


def test_reward_hand_checked_cases() -> None:
    # everything right: (2 attributes + 2 options + price) / (2 + 2 + 1); "long lasting" is in the features
    assert reward(PRODUCT, {"size": "16 fl oz", "scent": "lavender"}, GOAL).total == pytest.approx(1.0)
    # one wrong option: 4 of 5
    assert reward(PRODUCT, {"size": "8 fl oz", "scent": "lavender"}, GOAL).total == pytest.approx(4 / 5)
    # no options chosen at all: 3 of 5
    assert reward(PRODUCT, {}, GOAL).total == pytest.approx(3 / 5)
    # over budget: 4 of 5
    assert reward({**PRODUCT, "price": 25.0}, {"size": "16 fl oz", "scent": "lavender"}, GOAL).total == pytest.approx(
        4 / 5
    )
    # a partial attribute match: the product lacks "long lasting" everywhere
    partial = {**PRODUCT, "features": []}
    assert reward(partial, {"size": "16 fl oz", "scent": "lavender"}, GOAL).attributes == 1
    # the wrong kind of product: no noun of the goal's title in its title -> r_type 0, reward 0
    shoes = {**PRODUCT, "name": "Apex Running Trainers", "query": "running shoes", "category": "Clothing › Men › Shoes"}
    assert type_reward(shoes, GOAL) == 0.0 and reward(shoes, {}, GOAL).total == 0.0
    # same query or category but a weaker title match: r_type 1 while the title shares more than 20%
    assert type_reward({**PRODUCT, "name": "Shampoo Deluxe Bottle"}, GOAL) == 1.0
    # a title sharing under 20% of the goal's words, with neither query nor category in common: 0.5
    other = {**PRODUCT, "name": "Luxe Brush Comb Mirror Towel Set", "query": "x", "category": "a › b"}
    assert type_reward(other, {**GOAL, "name": "Luxe Sulfate Free Shampoo Conditioner"}) == 0.5


def test_reward_follows_webshops_code() -> None:
    right = {"size": "16 fl oz", "scent": "lavender"}
    # an attribute found only in the description counts, as in WebShop's get_attribute_reward
    described = {**PRODUCT, "features": [], "description": "A long lasting formula."}
    assert reward(described, right, GOAL).attributes == 2
    # size is matched exactly: 6 fl oz is not 16 fl oz (a fuzzy token-set match would say it is)
    assert reward(PRODUCT, {"size": "6 fl oz", "scent": "lavender"}, GOAL).total == pytest.approx(4 / 5)
    # colours are normalised before matching: "jet black" and "black forest" are both black
    dark = {**GOAL, "options": {"size": "16 fl oz", "color": "jet black"}}
    assert reward(PRODUCT, {"size": "16 fl oz", "color": "black forest"}, dark).options == 2
    assert reward(PRODUCT, {"size": "16 fl oz", "color": "white"}, dark).options == 1
    # an option value written in the title counts even when it is not the goal's, as WebShop counts it
    titled = {**PRODUCT, "name": "Luxe Sulfate Free Shampoo, Coconut"}
    assert reward(titled, {"size": "16 fl oz", "scent": "coconut"}, GOAL).options == 2
    # never above 1: more matching options chosen than the goal asks for
    assert reward(titled, {"size": "16 fl oz", "scent": "lavender", "extra": "coconut"}, GOAL).total == 1.0
    # WebShop's own test cases for its colour normalisation
    for text, want in [
        ("", ""),
        ("black forest", "black"),
        ("violet lavender", "lavender"),
        ("steelivy fuchsia", "fuchsia"),
        ("123alabaster", "alabaster"),
        ("webshop", "webshop"),
    ]:
        assert normalize_color(text) == want


def test_generated_price_bounds_follow_webshop() -> None:
    products = make_catalog(0, 5)
    for goal in make_goals(products, 40, seed=6):
        price = next(p["price"] for p in products if p["asin"] == goal["asin"])
        above = [10.0 * i for i in range(1, 100) if 10.0 * i > price][:4]
        assert goal["price_upper"] in above[1:], (price, goal["price_upper"])  # the larger of two draws
        assert goal["instruction"].endswith(f", and price lower than {goal['price_upper']:.2f} dollars")
        assert goal["attributes"]


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
            action = (
                f"search[{rng.choice(['lamp', 'coffee', 'shoes', 'case'])}]"
                if avail["has_search_bar"]
                else f"click[{rng.choice(avail['clickables'])}]"
            )
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
    bench.hidden_dir = root / "hidden"  # as the harness sets it before preparing and evaluating
    bench.prepare_train_data(root / "train")
    bench.prepare_eval_data(root / "hidden")
    return bench, root / "train", root / "hidden"


def test_hidden_goals_come_from_the_secret(tmp_path: Path) -> None:
    from autorl.testing import check_hidden_items_secret

    check_hidden_items_secret(WebShopBenchmark({**SMALL, "source": "generated"}), tmp_path)


def test_hardening_checks(tmp_path: Path) -> None:
    """Adversarial actions (exits, floods, success words, control characters) buy nothing."""
    from autorl.testing import check_hardening

    # left out: generated dev and test goals can name the very product, options and price bound of a training
    # goal (the catalog is small), which the audit reads as a hidden item in the training data
    check_hardening(
        lambda: WebShopBenchmark({**SMALL, "source": "generated"}), tmp_path, limit=2, skip=("nothing-visible",)
    )
    # the package's own seeds do not give the hidden goals (before, dev was make_goals(catalog, n, seed=2))
    bench = WebShopBenchmark({**SMALL, "source": "generated"})
    bench.prepare_eval_data(tmp_path / "hidden")
    catalog = make_catalog(0, SMALL["products_per_type"])
    for split in ("dev", "test"):
        hidden = [i.input["goal"]["instruction"] for i in bench.load_items(split, tmp_path / "hidden")]
        for seed in range(10):
            assert hidden != [g["instruction"] for g in make_goals(catalog, 8, seed)]


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
    assert prompt.endswith(
        f"Here is the task.\nObservation: {obs}\nAction: search[lamp]\nObservation: Invalid action!\nAction:"
    )
    chat = WebShopBenchmark({**SMALL, "chat": True}).episode_prompt(item, [(obs, "search[lamp]")], "Invalid action!")
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user"]
    assert bench.parse_action("Action: click[Buy Now]\nObservation") == "click[Buy Now]"


def test_autorl_eval_on_webshop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch", reason="the tiny-model run needs the hf backend (autorl[hf])")
    from autorl.testing import check_benchmark_end_to_end

    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "home"))
    record = check_benchmark_end_to_end(
        "webshop", limit=3, options={**SMALL, "examples": 0, "max_steps": 2, "max_new_tokens": 8}
    )
    assert record["score"] == 0.0 and record["extra"]["success_rate"] == 0.0
    assert record["config"]["benchmark_identity"]["max_steps"] == 2


def published_files(root: Path, n_products: int = 60, per_product: int = 28) -> list[dict[str, Any]]:
    """WebShop's published files with their real fields: items_shuffle_1000.json (the scraped products),
    items_ins_v2_1000.json (asin -> attributes, instruction, instruction_attributes) and items_human_ins.json
    (asin -> the annotators' instructions: asin, instruction, attributes, options, instruction_attributes,
    instruction_options, assignment_id, worker_id; no price). Returns the products as WebShop's loader keeps them, in order."""
    products = make_catalog(3, n_products // 10)
    pricing = ["${:.2f}", "${:.2f} - ${:.2f}", ""]
    items, ins, human = [], {}, {}
    for n, p in enumerate(products):
        price = pricing[n % 3].format(p["price"], p["price"] + 5) if n % 3 else f"${p['price']:.2f}"
        items.append(
            {
                "asin": p["asin"],
                "name": p["name"],
                "full_description": p["description"],
                "small_description": p["features"],
                "pricing": price,
                "images": ["https://x/1.jpg"],
                "product_category": p["category"],
                "query": p["query"].upper() + " ",
                "category": "beauty",
                "brand": "x",
                "customization_options": {
                    k.title(): [{"value": v.title(), "image": None} for v in vs] for k, vs in p["options"].items()
                }
                or None,
            }
        )
        ins[p["asin"]] = {"attributes": p["attributes"], "instruction": "", "instruction_attributes": []}
        entries = []
        for j in range(per_product):
            opts = [vs[j % len(vs)] for vs in p["options"].values()]
            attrs = [] if j % 13 == 5 else p["attributes"][: 1 + j % 2]  # some annotations have no attribute
            entries.append(
                {
                    "asin": p["asin"],
                    "instruction": f"i need {' '.join(attrs)} {p['query']} in {' '.join(opts)}, number {j}.",
                    "attributes": p["attributes"],
                    "options": [f"{k}: {v}" for k, v in zip(p["options"], opts, strict=True)],
                    "instruction_attributes": attrs,
                    "instruction_options": opts,
                    "assignment_id": f"A{n}-{j}",
                    "worker_id": f"W{j % 7}",
                }
            )
        human[p["asin"]] = entries
    items.append({**items[0], "asin": "nan"})  # skipped by WebShop's loader
    items.append(dict(items[1]))  # a repeat: skipped
    (root / "items_shuffle_1000.json").write_text(json.dumps(items))
    (root / "items_ins_v2_1000.json").write_text(json.dumps(ins))
    (root / "items_human_ins.json").write_text(json.dumps(human))
    return products


def webshop_goal_order(products: list[dict[str, Any]], human: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The instructions in the order WebShop's SimServer holds them: get_human_goals then the seeded shuffle."""
    texts = [e["instruction"].strip(".") for p in products for e in human[p["asin"]] if e["instruction_attributes"]]
    random.seed(233)
    random.shuffle(texts)
    return texts


def test_webshop_published_data_builds_webshops_goals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "webshop"
    data.mkdir()
    products = published_files(data)
    human = json.loads((data / "items_human_ins.json").read_text())
    monkeypatch.setenv("WEBSHOP_DATA", str(data))
    bench = WebShopBenchmark({"dev_goals": 100})
    assert bench.source == "official" and bench.hidden_paths() == [data]
    hidden = bench.hidden_dir = tmp_path / "hidden"  # as the harness sets it before preparing and evaluating
    bench.prepare_train_data(tmp_path / "train")
    bench.prepare_eval_data(hidden)
    dev, test = bench.load_items("dev", hidden), bench.load_items("test", hidden)
    order = webshop_goal_order(products, human)
    assert len(order) == 60 * 26 and len(order) > 1500  # two annotations of each product have no attribute: skipped
    strip = [g["instruction"].split(", and price lower than")[0] for g in (i.input["goal"] for i in test)]
    assert strip == order[:500]  # WebShop's test split, in its order
    assert len(dev) == 100 and {i.input["goal"]["instruction"].split(", and price lower than")[0] for i in dev} <= set(
        order[500:1500]
    )
    train = [json.loads(x) for x in (tmp_path / "train" / "train_goals.jsonl").read_text().splitlines()]
    assert [g["instruction"].split(", and price lower than")[0] for g in train] == order[1500:] and len(train) == 60
    for goal in (i.input["goal"] for i in test + dev):
        assert goal["attributes"] and goal["price_upper"] < 1e6
        assert goal["instruction"].endswith(f", and price lower than {goal['price_upper']:.2f} dollars")
    catalog = json.loads((hidden / "catalog.json").read_text())
    assert len(catalog) == 60 and catalog[0]["query"] == products[0]["query"]  # lower-cased and stripped
    assert catalog[2]["price"] == 100.0 and catalog[1]["price"] != products[1]["price"]  # no pricing; a range
    assert all(v == v.lower() for p in catalog for vs in p["options"].values() for v in vs)
    env = bench.make_env(test[0])  # the expert still wins a published goal
    env.reset()
    result = None
    for action in expert_actions(env):
        result = env.step(action)
    assert result is not None and result.reward == pytest.approx(1.0)
    monkeypatch.setenv("WEBSHOP_DATA", str(tmp_path / "none"))
    with pytest.raises(Exception, match="no WebShop data"):
        WebShopBenchmark({"source": "official"})
    with pytest.raises(UsageError, match='webshop takes one of "auto", "official", "generated" for source'):
        WebShopBenchmark({"source": "offline"})


def test_published_goals_hidden_by_the_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autorl.testing import check_hidden_items_secret

    data = tmp_path / "webshop"
    data.mkdir()
    published_files(data)
    monkeypatch.setenv("WEBSHOP_DATA", str(data))
    check_hidden_items_secret(WebShopBenchmark({"dev_goals": 20, "test_goals": 40}), tmp_path / "check")


def test_prepared_data_follows_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "webshop"
    data.mkdir()
    monkeypatch.setenv("WEBSHOP_DATA", str(data))  # empty: auto means generated
    generated = WebShopBenchmark({"dev_goals": 20, "test_goals": 40})
    generated.prepare_train_data(tmp_path / "train")
    generated.prepare_eval_data(tmp_path / "hidden")
    products = published_files(data)
    published = WebShopBenchmark({"dev_goals": 20, "test_goals": 40})
    assert published.source == "official" and published.identity() != generated.identity()
    published.prepare_train_data(tmp_path / "train")
    published.prepare_eval_data(tmp_path / "hidden")
    assert [p["asin"] for p in json.loads((tmp_path / "train" / "catalog.json").read_text())] == [
        p["asin"] for p in products
    ]
    assert {i.input["goal"]["asin"] for i in published.load_items("test", tmp_path / "hidden")} <= {
        p["asin"] for p in products
    }
    assert published.identity()["reward_differences_from_webshop"] == list(DIFFERENCES)
