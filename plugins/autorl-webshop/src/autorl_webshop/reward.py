"""WebShop's reward (Yao et al., 2022, section 3.2; ``web_agent_site/engine/goal.py::get_reward``): how well the
bought product matches the instruction.

    r = r_type * (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price <= u_price]) / (|U_att| + |U_opt| + 1)

``U`` is the goal (attributes, options, price bound), ``Y`` the bought product with the options chosen. As in
WebShop's code: a goal attribute counts when it fuzzily matches one of the product's attributes (token-set
ratio, WebShop's ``thefuzz`` scoring: both strings fully processed, the score rounded, above 85) or appears in
its title, features (bullet points) or description; each *chosen* option counts when, after WebShop's colour
normalisation, it equals a goal option (``size``: exact) or fuzzily matches one (other options), or appears in
the title, features or description. ``r_type`` checks that the product is of the wanted type: 1 when the
query or the category matches, or the title shares enough of the goal product's title words; 0.5, 0.1 or 0
as that match weakens.

Where this differs from WebShop's code (also in :data:`DIFFERENCES`, which is part of the benchmark's
identity): WebShop compares the titles' nouns (spaCy's ``en_core_web_lg`` part-of-speech tags, a 600 MB
model); here the titles' words less a stop list. WebShop counts every chosen option that matches, which
can pass the goal's option count (a reward above 1); here the count is capped there. The colour list of :func:`normalize_color` follows WebShop's
rule (the first colour of an alphabetical list found in the text) and its published test cases, but is this
plugin's own list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FUZZ_THRESHOLD = 85
EXACT_MATCH_OPTS = ("size",)
DIFFERENCES = (
    "title similarity (r_type) over the titles' words less a stop list, not spaCy nouns",
    "colour normalisation with this plugin's alphabetical colour list (WebShop's rule and test cases)",
    "option matches capped at the goal's option count, so that a reward never exceeds 1",
)
#: colour words, in alphabetical order: normalize_color returns the first found in the text
COLOR_SET = (
    "alabaster",
    "apricot",
    "aqua",
    "ash",
    "azure",
    "beige",
    "black",
    "blue",
    "blush",
    "bronze",
    "brown",
    "burgundy",
    "camel",
    "camo",
    "caramel",
    "champagne",
    "charcoal",
    "chocolate",
    "coffee",
    "copper",
    "coral",
    "cream",
    "crimson",
    "denim",
    "emerald",
    "espresso",
    "fuchsia",
    "gold",
    "graphite",
    "gray",
    "green",
    "grey",
    "indigo",
    "ivory",
    "ivy",
    "khaki",
    "lavender",
    "lemon",
    "lilac",
    "lime",
    "magenta",
    "maroon",
    "mauve",
    "mint",
    "mocha",
    "mustard",
    "navy",
    "nude",
    "olive",
    "orange",
    "peach",
    "pewter",
    "pink",
    "plum",
    "purple",
    "red",
    "rose",
    "ruby",
    "rust",
    "sage",
    "salmon",
    "sand",
    "sapphire",
    "silver",
    "slate",
    "steel",
    "tan",
    "taupe",
    "teal",
    "turquoise",
    "violet",
    "walnut",
    "white",
    "wine",
    "yellow",
)
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "the",
        "for",
        "of",
        "with",
        "in",
        "on",
        "to",
        "by",
        "from",
        "or",
        "at",
        "as",
        "is",
        "are",
        "be",
        "this",
        "that",
        "it",
        "its",
        "your",
        "you",
        "our",
        "set",
        "pack",
        "pcs",
        "piece",
        "pieces",
        "count",
        "oz",
        "ounce",
        "ounces",
        "inch",
        "inches",
        "lb",
        "lbs",
        "ml",
        "x",
    ]
)


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z]+", text.lower()) if w not in STOPWORDS and len(w) > 1]


def normalize_color(text: str) -> str:
    """WebShop's colour normalisation: the first colour of :data:`COLOR_SET` found in ``text``, else ``text``."""
    return next((c for c in COLOR_SET if c in text), text)


def _fuzzy(a: str, b: str) -> bool:
    """thefuzz's ``token_set_ratio`` (which WebShop uses): full processing, the score rounded to an integer."""
    from rapidfuzz import fuzz, utils

    return round(fuzz.token_set_ratio(a, b, processor=utils.default_process)) > FUZZ_THRESHOLD


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


def _texts(product: Mapping[str, Any]) -> tuple[str, str, str]:
    return (
        str(product.get("name", "")).lower(),
        " ".join(map(str, product.get("features", []))).lower(),
        str(product.get("description", "")).lower(),
    )


def attribute_matches(product: Mapping[str, Any], attrs: Sequence[str]) -> int:
    texts = _texts(product)
    p_attrs = [str(a) for a in product.get("attributes", [])]
    return sum(1 for a in attrs if any(_fuzzy(p, a) for p in p_attrs) or any(a in t for t in texts))


def option_matches(product: Mapping[str, Any], chosen: Mapping[str, str], goal_options: Sequence[str]) -> int:
    """How many chosen options match the goal's, counted over the chosen ones as WebShop does."""
    goal_norm = [normalize_color(str(o)) for o in goal_options]
    texts = _texts(product)
    n = 0
    for name, value in chosen.items():
        v = normalize_color(str(value))
        matched = v in goal_norm if str(name).lower() in EXACT_MATCH_OPTS else any(_fuzzy(g, v) for g in goal_norm)
        if matched or any(v in t for t in texts):
            n += 1
    return n


def reward(product: Mapping[str, Any], chosen: Mapping[str, str], goal: Mapping[str, Any]) -> RewardParts:
    """The reward of buying ``product`` with options ``chosen`` (option name -> value) for ``goal``."""
    attrs: Sequence[str] = [str(a) for a in goal.get("attributes", [])]
    raw = goal.get("options", {})
    opts = [str(o) for o in (raw.values() if isinstance(raw, dict) else raw)]
    n_att = attribute_matches(product, attrs)
    n_opt = min(option_matches(product, chosen, opts), len(opts))
    n_price = int(goal.get("price_upper") is None or float(product.get("price", 0)) <= float(goal["price_upper"]))
    r_type = type_reward(product, goal)
    total = r_type * (n_att + n_opt + n_price) / (len(attrs) + len(opts) + 1)
    return RewardParts(r_type, n_att, n_opt, n_price, total)
