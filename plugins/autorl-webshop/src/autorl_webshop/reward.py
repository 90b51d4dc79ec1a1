"""WebShop's reward (Yao et al., 2022, section 3.2): how well the bought product matches the instruction.

    r = r_type * (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price <= u_price]) / (|U_att| + |U_opt| + 1)

``U`` is the goal (attributes, options, price bound), ``Y`` the bought product with the options chosen.
An attribute counts when it fuzzily matches one of the product's attributes or appears in its title or
features; an option when it fuzzily matches a chosen option (token-set ratio above 85, rapidfuzz). ``r_type``
checks that the product is of the wanted type: 1 when the query or the category matches, or the title
shares enough of the goal product's nouns; 0.5, 0.1 or 0 as that match weakens.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FUZZ_THRESHOLD = 85
STOPWORDS = frozenset(["a", "an", "and", "the", "for", "of", "with", "in", "on", "to", "by", "from", "or", "at", "as", "is", "are", "be", "this", "that", "it", "its", "your", "you", "our", "set", "pack", "pcs", "piece", "pieces", "count", "oz", "ounce", "ounces", "inch", "inches", "lb", "lbs", "ml", "x"])


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]+", text.lower()) if w not in STOPWORDS and len(w) > 1]


def _fuzzy(a: str, b: str) -> bool:
    from rapidfuzz import fuzz

    return bool(fuzz.token_set_ratio(a.lower(), b.lower()) > FUZZ_THRESHOLD)


@dataclass(frozen=True)
class RewardParts:
    r_type: float
    attributes: int
    options: int
    price: int
    total: float


def type_reward(product: Mapping[str, Any], goal: Mapping[str, Any]) -> float:
    query_match = product.get("query") == goal.get("query")
    cats = {c.strip().lower() for c in str(product.get("category", "")).split("›")}
    goal_cats = {c.strip().lower() for c in str(goal.get("category", "")).split("›")}
    category_match = len(cats & goal_cats) >= 2
    desired = set(_words(str(goal.get("name", ""))))
    got = set(_words(str(product.get("name", ""))))
    title_score = len(desired & got) / len(desired) if desired else 0.2
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type


def reward(product: Mapping[str, Any], chosen: Mapping[str, str], goal: Mapping[str, Any]) -> RewardParts:
    """The reward of buying ``product`` with options ``chosen`` (option name -> value) for ``goal``."""
    attrs: Sequence[str] = goal.get("attributes", [])
    opts: Sequence[str] = list(goal.get("options", {}).values()) if isinstance(goal.get("options"), dict) \
        else list(goal.get("options", []))
    text = " ".join([str(product.get("name", "")), *map(str, product.get("features", []))]).lower()
    p_attrs = [str(a) for a in product.get("attributes", [])]
    n_att = sum(1 for a in attrs if any(_fuzzy(a, p) for p in p_attrs) or a.lower() in text)
    chosen_values = [str(v) for v in chosen.values()]
    n_opt = sum(1 for o in opts if any(_fuzzy(o, v) for v in chosen_values))
    n_price = int(goal.get("price_upper") is None or float(product.get("price", 0)) <= float(goal["price_upper"]))
    r_type = type_reward(product, goal)
    total = r_type * (n_att + n_opt + n_price) / (len(attrs) + len(opts) + 1)
    return RewardParts(r_type, n_att, n_opt, n_price, total)
