"""WebShop data: a product catalog and shopping goals (instructions with the attributes, options and price
bound they ask for), in the shape of WebShop's own records. The catalog and the training goals are generated
with fixed seeds (the agent gets them anyway); the hidden goals with a generator the caller seeds from the
installation's secret. The price bound is drawn as WebShop's ``goal.py`` draws it (:func:`price_bound`)."""

from __future__ import annotations

import random
from typing import Any

#: product type -> (category path, query, attributes, {option name: values})
TYPES: dict[str, tuple[str, str, list[str], dict[str, list[str]]]] = {
    "shampoo": (
        "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
        "sulfate free shampoo",
        ["sulfate free", "paraben free", "for dry hair", "natural ingredients", "long lasting", "cruelty free"],
        {"size": ["8 fl oz", "16 fl oz", "32 fl oz"], "scent": ["lavender", "coconut", "unscented", "mint"]},
    ),
    "running shoes": (
        "Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running",
        "men's running shoes",
        ["non slip", "rubber sole", "lightweight", "breathable mesh", "arch support"],
        {"size": ["7", "8", "9", "10", "11", "12"], "color": ["black", "white", "navy blue", "grey"]},
    ),
    "t-shirt": (
        "Clothing, Shoes & Jewelry › Women › Clothing › Tops, Tees & Blouses › T-Shirts",
        "women's t-shirt",
        ["cotton", "short sleeve", "machine wash", "relaxed fit", "moisture wicking"],
        {"size": ["small", "medium", "large", "x-large"], "color": ["red", "black", "heather grey", "white"]},
    ),
    "phone case": (
        "Electronics › Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases",
        "phone case",
        ["shockproof", "wireless charging compatible", "slim fit", "kickstand", "scratch resistant"],
        {"color": ["clear", "black", "pink", "midnight green"], "model": ["iphone 13", "iphone 14", "galaxy s22"]},
    ),
    "headphones": (
        "Electronics › Headphones, Earbuds & Accessories › Headphones › Over-Ear Headphones",
        "bluetooth headphones",
        ["noise cancelling", "bluetooth", "long battery life", "foldable", "built-in microphone"],
        {"color": ["black", "silver", "rose gold", "blue"]},
    ),
    "coffee": (
        "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Coffee › Ground Coffee",
        "ground coffee",
        ["gluten free", "organic", "dark roast", "low acid", "fair trade"],
        {"size": ["12 ounce", "2 pound"], "flavor": ["vanilla", "hazelnut", "original", "mocha"]},
    ),
    "protein bars": (
        "Grocery & Gourmet Food › Snack Foods › Bars › Protein Bars",
        "protein bars",
        ["high protein", "low sugar", "keto friendly", "gluten free", "non gmo"],
        {"size": ["12 count", "24 count"], "flavor": ["chocolate chip", "peanut butter", "cookie dough"]},
    ),
    "desk lamp": (
        "Tools & Home Improvement › Lighting & Ceiling Fans › Lamps & Shades › Desk Lamps",
        "led desk lamp",
        ["dimmable", "usb charging port", "eye caring", "touch control", "energy efficient"],
        {"color": ["white", "black", "silver"]},
    ),
    "pillow covers": (
        "Home & Kitchen › Bedding › Decorative Pillows, Inserts & Covers › Throw Pillow Covers",
        "throw pillow covers",
        ["machine washable", "hidden zipper", "super soft", "double sided"],
        {"size": ["18 x 18 inch", "20 x 20 inch", "24 x 24 inch"], "color": ["beige", "navy", "sage green", "mustard"]},
    ),
    "dog food": (
        "Pet Supplies › Dogs › Food › Dry",
        "dry dog food",
        ["grain free", "high protein", "natural", "for small breeds", "no artificial preservatives"],
        {"size": ["5 pound", "15 pound", "30 pound"], "flavor": ["chicken", "salmon", "beef"]},
    ),
}
BRANDS = [
    "Luxe",
    "Northwind",
    "Evergreen",
    "Apex",
    "Blue Harbor",
    "Solace",
    "Kindred",
    "Vantage",
    "Maple & Co",
    "Orbit",
    "Nimbus",
    "Trailhead",
    "Cobalt",
    "Wildroot",
    "Silverline",
    "Harbor House",
]


def make_catalog(seed: int = 0, per_type: int = 10) -> list[dict[str, Any]]:
    """Products with WebShop's fields: asin, name, category, query, price, attributes, options, features."""
    rng = random.Random(seed)
    products = []
    for type_name, (category, query, attrs, options) in TYPES.items():
        for _ in range(per_type):
            mine = sorted(rng.sample(attrs, k=rng.randint(2, min(4, len(attrs)))), key=attrs.index)
            opts = {
                k: sorted(rng.sample(v, k=rng.randint(min(2, len(v)), len(v))), key=v.index) for k, v in options.items()
            }
            brand = rng.choice(BRANDS)
            name = f"{brand} {' '.join(w.title() for w in mine[:2])} {type_name.title()}"
            asin = "B0" + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(8))
            products.append(
                {
                    "asin": asin,
                    "name": name,
                    "category": category,
                    "query": query,
                    "price": round(rng.uniform(5, 80), 2),
                    "attributes": mine,
                    "options": opts,
                    "features": [f"{a.capitalize()}: made for everyday use." for a in mine]
                    + [f"Brand: {brand}", f"Type: {type_name}"],
                    "description": f"The {name} from {brand}. " + " ".join(f"{a.capitalize()}." for a in mine),
                }
            )
    return products


#: WebShop's price bounds: multiples of 10 dollars up to 990
PRICE_RANGE = [10.0 * i for i in range(1, 100)]
NO_BOUND = 1_000_000.0


def price_bound(price: float, rng: random.Random) -> tuple[float, str]:
    """WebShop's bound (``get_human_goals``): of the first four multiples of 10 above the price, two drawn at
    random, the larger kept and written into the instruction; no bound (and no text) above 980 dollars."""
    above = [p for p in PRICE_RANGE if p > price][:4]
    if len(above) < 2:
        return NO_BOUND, ""
    upper = max(rng.sample(above, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def make_goal(product: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """An instruction that the product (with the right options, under the price bound) satisfies."""
    type_name = next(t for t, spec in TYPES.items() if spec[0] == product["category"])
    attrs = sorted(rng.sample(product["attributes"], k=rng.randint(1, min(2, len(product["attributes"])))))
    options = {k: rng.choice(v) for k, v in product["options"].items()}
    price_upper, price_text = price_bound(float(product["price"]), rng)
    opt_text = " and ".join(f"{v} {k}" for k, v in options.items())
    lead = rng.choice(["i need", "i am looking for", "find me", "i want to buy"])
    instruction = f"{lead} {' '.join(attrs)} {type_name} with {opt_text}{price_text}"
    return {
        "instruction": instruction,
        "asin": product["asin"],
        "name": product["name"],
        "query": product["query"],
        "category": product["category"],
        "attributes": attrs,
        "options": options,
        "price_upper": price_upper,
    }


def make_goals(
    products: list[dict[str, Any]], n: int, seed: int | random.Random, exclude: set[str] | None = None
) -> list[dict[str, Any]]:
    """``n`` distinct goals (by instruction), none of whose instructions is in ``exclude``; ``seed`` is a fixed
    seed (public data) or a generator (hidden data: one seeded from the installation's secret)."""
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    seen = set(exclude or ())
    goals: list[dict[str, Any]] = []
    attempts = 0
    while len(goals) < n:
        attempts += 1
        if attempts > 50 * n:
            raise RuntimeError("could not make enough distinct WebShop goals")
        goal = make_goal(rng.choice(products), rng)
        if goal["instruction"] not in seen:
            seen.add(goal["instruction"])
            goals.append(goal)
    return goals
