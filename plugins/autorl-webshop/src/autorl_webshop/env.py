"""The WebShop environment: its pages and text observations, its two actions, its reward at "Buy Now".

Observations follow WebShop's simple text mode (elements joined by ``[SEP]``):

- search page: ``WebShop [SEP] Instruction: [SEP] <instruction> [SEP] Search``
- results: ``... [SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] <asin> [SEP]
  <title> [SEP] $<price> [SEP] ...`` (10 a page)
- item: ``... [SEP] Back to Search [SEP] < Prev [SEP] <option name> [SEP] <value> ... [SEP] <title> [SEP]
  Price: $<price> [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now``

Actions: ``search[<query>]`` on the search page, ``click[<button>]`` on any button shown (case does not
matter). Anything else is answered ``Invalid action!`` and changes nothing. ``click[Buy Now]`` ends the
episode with the reward of the product and options chosen (:mod:`autorl_webshop.reward`).

    from autorl_webshop.env import WebShopEnv
    env = WebShopEnv(products, goal)        # or WebShopEnv.from_data_dir(data_dir, goal)
    obs = env.reset(); env.available_actions(); env.step("search[sulfate free shampoo]")
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autorl import Environment, StepResult
from autorl_webshop.reward import reward
from autorl_webshop.search import SearchEngine

PAGE_SIZE = 10
_ACTION = re.compile(r"^\s*(search|click)\[(.*)\]\s*$", re.I | re.S)


@dataclass
class _State:
    page: str = "search"  # search | results | item | detail
    query: str = ""
    results: list[dict[str, Any]] = field(default_factory=list)
    page_no: int = 1
    item: dict[str, Any] | None = None
    chosen: dict[str, str] = field(default_factory=dict)
    detail: str = ""


class WebShopEnv(Environment):
    def __init__(
        self, products: list[dict[str, Any]], goal: dict[str, Any], engine: SearchEngine | None = None
    ) -> None:
        self.products = {p["asin"]: p for p in products}
        self.goal = goal
        self.engine = engine or SearchEngine(products)
        self.state = _State()
        self.done = False
        self.last_reward = 0.0

    @classmethod
    def from_data_dir(cls, data_dir: Path | str, goal: dict[str, Any]) -> WebShopEnv:
        return cls(json.loads((Path(data_dir) / "catalog.json").read_text()), goal)

    # -- observations ------------------------------------------------------------------------------------
    def _head(self) -> list[str]:
        return ["Instruction:", self.goal["instruction"], "Back to Search"]

    def observation(self) -> str:
        s = self.state
        if s.page == "search":
            parts = ["WebShop", "Instruction:", self.goal["instruction"], "Search"]
        elif s.page == "results":
            shown = s.results[(s.page_no - 1) * PAGE_SIZE : s.page_no * PAGE_SIZE]
            parts = [*self._head(), f"Page {s.page_no} (Total results: {len(s.results)})"]
            parts += (["< Prev"] if s.page_no > 1 else []) + (
                ["Next >"] if s.page_no * PAGE_SIZE < len(s.results) else []
            )
            for p in shown:
                parts += [p["asin"], p["name"], f"${p['price']:.2f}"]
        elif s.page == "item":
            assert s.item is not None
            parts = [*self._head(), "< Prev"]
            for name, values in s.item["options"].items():
                parts += [name, *values]
            parts += [
                s.item["name"],
                f"Price: ${s.item['price']:.2f}",
                "Rating: N.A.",
                "Description",
                "Features",
                "Reviews",
                "Buy Now",
            ]
        else:
            parts = [*self._head(), "< Prev", s.detail]
        return " [SEP] ".join(parts)

    def available_actions(self) -> dict[str, Any]:
        """WebShop's ``get_available_actions``: whether there is a search bar, and the buttons shown."""
        s = self.state
        if s.page == "search":
            return {"has_search_bar": True, "clickables": ["search"]}
        clickables = ["back to search"]
        if s.page == "results":
            if s.page_no > 1:
                clickables.append("< prev")
            if s.page_no * PAGE_SIZE < len(s.results):
                clickables.append("next >")
            clickables += [p["asin"].lower() for p in s.results[(s.page_no - 1) * PAGE_SIZE : s.page_no * PAGE_SIZE]]
        elif s.page == "item":
            assert s.item is not None
            clickables += [
                "< prev",
                *[v.lower() for vs in s.item["options"].values() for v in vs],
                "description",
                "features",
                "reviews",
                "buy now",
            ]
        else:
            clickables.append("< prev")
        return {"has_search_bar": False, "clickables": clickables}

    # -- the episode -------------------------------------------------------------------------------------
    def reset(self) -> str:
        self.state = _State()
        self.done = False
        self.last_reward = 0.0
        return self.observation()

    def step(self, action: str) -> StepResult:
        if self.done:
            return StepResult("The episode is over.", self.last_reward, True)
        m = _ACTION.match(action)
        if not m:
            return StepResult("Invalid action!", 0.0, False, {"valid": False})
        verb, arg = m.group(1).lower(), m.group(2).strip()
        avail = self.available_actions()
        s = self.state
        if verb == "search":
            if not avail["has_search_bar"] or not arg:
                return StepResult("Invalid action!", 0.0, False, {"valid": False})
            self.state = _State(page="results", query=arg, results=self.engine.search(arg))
            return StepResult(self.observation(), 0.0, False, {"valid": True})
        button = arg.lower()
        if button not in avail["clickables"]:
            return StepResult("Invalid action!", 0.0, False, {"valid": False})
        if button == "back to search":
            self.state = _State()
        elif button == "next >":
            s.page_no += 1
        elif button == "< prev":
            if s.page == "results":
                s.page_no -= 1
            elif s.page == "item":
                s.page, s.item, s.chosen = "results", None, {}
            else:
                s.page = "item"
        elif s.page == "results":
            s.page, s.item, s.chosen = "item", self.products[arg.upper()], {}
        elif s.page == "item" and s.item is not None:
            if button == "buy now":
                parts = reward(s.item, s.chosen, self.goal)
                self.done, self.last_reward = True, parts.total
                obs = (
                    f"Thank you for shopping with us! [SEP] Purchased [SEP] {s.item['asin']} [SEP] options "
                    f"[SEP] {json.dumps(s.chosen)} [SEP] Reward [SEP] {parts.total:.2f}"
                )
                return StepResult(obs, parts.total, True, {"valid": True, "reward_parts": parts.__dict__})
            if button in ("description", "features", "reviews"):
                s.page = "detail"
                s.detail = {
                    "description": s.item.get("description", ""),
                    "features": " [SEP] ".join(s.item.get("features", [])),
                    "reviews": "No reviews yet.",
                }[button]
            else:
                for name, values in s.item["options"].items():
                    match = next((v for v in values if v.lower() == button), None)
                    if match is not None:
                        s.chosen[name] = match
                        return StepResult(f"You have clicked {match}.", 0.0, False, {"valid": True})
        return StepResult(self.observation(), 0.0, False, {"valid": True})


def expert_actions(env: WebShopEnv) -> list[str]:
    """The actions of a shopper who knows the goal: search its query, open its product, choose its options,
    buy. Used for SFT data and as the test's expert policy."""
    goal = env.goal
    product = env.products[goal["asin"]]
    results = env.engine.search(goal["query"])
    actions = [f"search[{goal['query']}]"]
    position = next((i for i, p in enumerate(results) if p["asin"] == goal["asin"]), None)
    if position is None:  # search by the exact title instead
        actions = [f"search[{product['name']}]"]
        results = env.engine.search(product["name"])
        position = next((i for i, p in enumerate(results) if p["asin"] == goal["asin"]), None)
        if position is None:
            raise ValueError(f"search finds no way to product {goal['asin']}")
    actions += ["click[Next >]"] * (position // PAGE_SIZE)
    actions.append(f"click[{goal['asin']}]")
    actions += [f"click[{v}]" for v in goal["options"].values()]
    actions.append("click[Buy Now]")
    return actions
