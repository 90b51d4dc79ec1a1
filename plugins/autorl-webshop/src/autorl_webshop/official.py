"""WebShop's published data, when present: the product catalog and the human instructions, read the way
WebShop's own code reads them (``web_agent_site/engine/engine.py::load_products`` and
``goal.py::get_human_goals``).

WebShop distributes (see its ``setup.sh``) ``items_shuffle.json`` (or the 1,000-product
``items_shuffle_1000.json``), ``items_ins_v2.json`` (``..._1000``) and ``items_human_ins.json``. Put them in
``$WEBSHOP_DATA`` (default ``~/.cache/webshop``); they are converted here to this plugin's product and goal
records:

- products: ids longer than 10 characters, ``nan`` and repeats are skipped; ``pricing`` (``"$12.99"`` or a
  range ``"$10.99 - $15.99"``) gives the price (a range: a draw between its ends, with a fixed seed; none:
  100 dollars); option names and values are lower-cased, ``/`` in a value becomes `` | ``; a product without
  attributes in ``items_ins_v2`` has WebShop's ``DUMMY_ATTR``;
- goals: ``items_human_ins.json`` maps an asin to its instructions (``instruction``, ``instruction_attributes``,
  ``instruction_options``, besides ``asin``, ``attributes``, ``options`` and the annotators' ``assignment_id`` /
  ``worker_id``; no price field: the bound is drawn, as WebShop draws it); goals follow the catalog's
  order, an instruction without attributes is skipped, and the price bound is drawn by
  :func:`autorl_webshop.catalog.price_bound` and written into the instruction (``... , and price lower than 40.00
  dollars``);
- the split is WebShop's: the goals shuffled as ``random.seed(233); random.shuffle(goals)``, then the first 500
  are its test goals, the next 1,000 its eval goals, the rest its training goals.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

from autorl_webshop.catalog import price_bound

N_TEST, N_EVAL = 500, 1000
SHUFFLE_SEED = 233
PRICE_SEED = 0  # draws in a price range: the catalog is the agent's too, nothing hidden
DEFAULT_PRICE = 100.0


def data_dir() -> Path:
    return Path(os.environ.get("WEBSHOP_DATA", Path.home() / ".cache" / "webshop")).expanduser()


def available(root: Path | None = None) -> bool:
    root = root or data_dir()
    return _find(root, "items_shuffle") is not None and (root / "items_human_ins.json").is_file()


def _find(root: Path, stem: str) -> Path | None:
    for name in (f"{stem}.json", f"{stem}_1000.json"):
        if (root / name).is_file():
            return root / name
    return None


def fingerprint(root: Path | None = None) -> dict[str, int]:
    """The published files in use, name -> size: a different copy prepares the data again."""
    root = root or data_dir()
    paths = [_find(root, "items_shuffle"), _find(root, "items_ins_v2"), root / "items_human_ins.json"]
    return {p.name: p.stat().st_size for p in paths if p is not None and p.is_file()}


def _pricing(raw: Any) -> list[float]:
    """WebShop's parse of ``pricing``: every ``$``-separated number; none gives [100.0]."""
    if isinstance(raw, (int, float)):
        return [float(raw)]
    if not raw:
        return [DEFAULT_PRICE]
    out = []
    for part in str(raw).split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", part)
        try:
            out.append(float(digits))
        except ValueError:
            continue
    return out[:2] or [DEFAULT_PRICE]


def load_products(root: Path | None = None) -> list[dict[str, Any]]:
    """The catalog in this plugin's product shape, in the file's order."""
    root = root or data_dir()
    items_path = _find(root, "items_shuffle")
    if items_path is None:
        raise FileNotFoundError(f"no items_shuffle.json in {root}")
    attrs_path = _find(root, "items_ins_v2")
    attributes = json.loads(attrs_path.read_text()) if attrs_path else {}
    rng = random.Random(PRICE_SEED)
    products, seen = [], set()
    for raw in json.loads(items_path.read_text()):
        asin = str(raw.get("asin", ""))
        if not asin or asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        pricing = _pricing(raw.get("pricing"))
        price = pricing[0] if len(pricing) == 1 else rng.uniform(*pricing[:2])
        options = {
            str(k).lower(): [
                str(v["value"] if isinstance(v, dict) else v).strip().replace("/", " | ").lower() for v in vs
            ]
            for k, vs in (raw.get("customization_options") or {}).items()
            if vs is not None
        }
        small = raw.get("small_description")
        features = small if isinstance(small, list) else [small] if small else []
        products.append(
            {
                "asin": asin.upper(),
                "name": str(raw.get("name", "")),
                "category": str(raw.get("product_category", "")),
                "query": str(raw.get("query", "")).lower().strip(),
                "price": round(price, 2),
                "attributes": [str(a) for a in (attributes.get(asin) or {}).get("attributes") or ["DUMMY_ATTR"]],
                "options": options,
                "features": [str(f) for f in features],
                "description": str(raw.get("full_description", "") or ""),
            }
        )
    return products


def human_goals(products: list[dict[str, Any]], root: Path | None = None) -> list[dict[str, Any]]:
    """The human instructions as goals, in WebShop's order (the catalog's), without a price bound yet
    (:func:`with_price_bound` adds it); those without attributes are skipped, as WebShop does."""
    root = root or data_dir()
    human = json.loads((root / "items_human_ins.json").read_text())
    goals = []
    for product in products:
        entries = human.get(product["asin"]) or human.get(product["asin"].lower()) or []
        for e in entries:
            attributes = [str(a) for a in e.get("instruction_attributes") or []]
            if not attributes or not e.get("instruction"):
                continue
            goals.append(
                {
                    "instruction": str(e["instruction"]).strip("."),
                    "asin": product["asin"],
                    "name": product["name"],
                    "query": product["query"],
                    "category": product["category"],
                    "attributes": attributes,
                    "options": {str(i): str(o) for i, o in enumerate(e.get("instruction_options") or [])},
                    "price": product["price"],
                }
            )
    return goals


def with_price_bound(goal: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    upper, text = price_bound(float(goal["price"]), rng)
    out = {k: v for k, v in goal.items() if k != "price"}
    return {**out, "instruction": goal["instruction"] + text, "price_upper": upper}


def webshop_split(goals: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """WebShop's split of its goals: shuffled with seed 233, then test [:500], eval [500:1500], train [1500:]."""
    order = list(goals)
    random.Random(SHUFFLE_SEED).shuffle(order)
    return {"test": order[:N_TEST], "eval": order[N_TEST : N_TEST + N_EVAL], "train": order[N_TEST + N_EVAL :]}
