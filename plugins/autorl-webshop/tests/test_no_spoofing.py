"""Actions that claim success score 0: WebShop's reward comes only from "Buy Now" on a product page.

WebShop runs no model code, but a policy can emit the purchase page's own text, a reward line, a
``click[Buy Now]`` on a page that has no such button, control characters, several actions at once or
actions far longer than any button.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from autorl_webshop.benchmark import WebShopBenchmark
from autorl_webshop.catalog import make_catalog, make_goals
from autorl_webshop.env import WebShopEnv, expert_actions

from autorl.testing import check_claims_score_zero, prepare_as_a_run

FAKES = [
    "Thank you for shopping with us! [SEP] Purchased [SEP] B0TEST0001 [SEP] Reward [SEP] 1.00",
    "Reward [SEP] 1.00",
    "reward: 1.0",
    "Task completed",
    "click[Buy Now]",
    "click[buy now]",
    "CLICK[BUY NOW]",
    "click[Buy Now\x00]",
    "click[\x00Buy Now]",
    "\x00click[Buy Now]",
    "click[Buy\u200bNow]",
    "click[Buy  Now]",
    "click[buy now]]",
    "click[[buy now]",
    "click(buy now)",
    "buy now",
    "click[buy now]; click[buy now]",
    "click[description]\nclick[buy now]",
    "click[" + "x" * 200_000 + "]",
    "click[" + "buy now" * 30_000 + "]",
    "search[]",
    "search[   ]",
    "click[]",
    "click[< prev]",
    "click[next >]",
]


def env_at(page: str) -> tuple[WebShopEnv, dict[str, object]]:
    products = make_catalog(0, 5)
    goal = make_goals(products, 1, seed=4)[0]
    env = WebShopEnv(products, goal)
    env.reset()
    plan = expert_actions(env)
    env.reset()
    if page in ("results", "item", "detail"):
        env.step(plan[0])
    if page in ("item", "detail"):
        env.step(next(a for a in plan if a.startswith("click[") and a[6:-1] == goal["asin"]))
    if page == "detail":
        env.step("click[Features]")
    assert env.state.page == page
    return env, goal


@pytest.mark.parametrize("page", ["search", "results", "detail"])
def test_no_fake_purchase_on_pages_without_buy_now(page: str) -> None:
    env, _ = env_at(page)
    for action in FAKES:
        result = env.step(action)
        assert result.reward == 0.0 and not result.done and not env.done, (page, action[:40])
        if env.state.page != page:  # a real navigation (next page, back): go back to the page under test
            env, _ = env_at(page)


def test_on_the_product_page_only_the_exact_button_buys() -> None:
    env, _ = env_at("item")
    for action in FAKES:
        if action.lower() in ("click[buy now]",):
            continue
        result = env.step(action)
        assert result.reward == 0.0 and not result.done, action[:40]
        if env.state.page != "item":
            env, _ = env_at("item")
    bought = env.step("click[Buy Now]")  # the real button still works, and the episode ends there
    assert bought.done and 0.0 < bought.reward <= 1.0
    again = env.step("click[Buy Now]")
    assert again.done and again.reward == bought.reward


def test_a_long_search_is_handled() -> None:
    env, _ = env_at("search")
    result = env.step("search[" + "shampoo " * 20_000 + "]")
    assert result.reward == 0.0 and not result.done and env.state.page == "results"


def test_policies_that_claim_success_score_zero(tmp_path: Path) -> None:
    bench = WebShopBenchmark(
        {"source": "generated", "train_goals": 12, "dev_goals": 8, "test_goals": 8, "products_per_type": 4}
    )
    hidden = prepare_as_a_run(bench, tmp_path)
    claims = [" " + fake + "\nObservation: Thank you for shopping with us! Reward [SEP] 1.00" for fake in FAKES]
    results = check_claims_score_zero(bench, hidden, claims)
    assert bench.evaluator().summary(results) == {"success_rate": 0.0}
