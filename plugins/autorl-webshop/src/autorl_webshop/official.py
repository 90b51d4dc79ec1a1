"""WebShop's published data, when present: the product catalog and the human instructions.

WebShop distributes (see its ``setup.sh``) ``items_shuffle.json`` (or the 1,000-product
``items_shuffle_1000.json``), ``items_ins_v2.json`` (``..._1000``) and ``items_human_ins.json``. Put them in
``$WEBSHOP_DATA`` (default ``~/.cache/webshop``); they are converted here to this plugin's product and goal
records. Goals come from the human instructions, in the order of the file; the first 500 are the hidden
evaluation goals (WebShop's test goals), split into dev and test with a fixed seed; the rest are training goals.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

N_EVAL = 500


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


def _price(raw: Any) -> float | None:
    if isinstance(raw, (int, float)):
        return float(raw)
    numbers = re.findall(r"\d+(?:\.\d+)?", str(raw or "").replace(",", ""))
    return float(numbers[0]) if numbers else None


def load(root: Path | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(products, goals) in this plugin's record shapes."""
    root = root or data_dir()
    items_path = _find(root, "items_shuffle")
    if items_path is None:
        raise FileNotFoundError(f"no items_shuffle.json in {root}")
    attrs_path = _find(root, "items_ins_v2")
    attributes = json.loads(attrs_path.read_text()) if attrs_path else {}
    products = []
    for raw in json.loads(items_path.read_text()):
        asin = str(raw.get("asin", "")).upper()
        price = _price(raw.get("pricing"))
        if not asin or price is None:
            continue
        options = {str(k): [str(v.get("value", v)) if isinstance(v, dict) else str(v) for v in vs]
                   for k, vs in (raw.get("customization_options") or {}).items()}
        products.append({
            "asin": asin, "name": str(raw.get("name", "")), "category": str(raw.get("product_category", "")),
            "query": str(raw.get("query", "")), "price": price,
            "attributes": [str(a) for a in (attributes.get(asin) or {}).get("attributes", [])],
            "options": options, "features": [str(f) for f in raw.get("small_description") or []],
            "description": str(raw.get("full_description", "")),
        })
    by_asin = {p["asin"]: p for p in products}
    goals = []
    for asin, entries in json.loads((root / "items_human_ins.json").read_text()).items():
        product = by_asin.get(str(asin).upper())
        if product is None:
            continue
        for e in entries:
            if not e.get("instruction"):
                continue
            goals.append({
                "instruction": str(e["instruction"]), "asin": product["asin"], "name": product["name"],
                "query": product["query"], "category": product["category"],
                "attributes": [str(a) for a in e.get("instruction_attributes", [])],
                "options": {str(i): str(o) for i, o in enumerate(e.get("instruction_options", []))},
                "price_upper": _price(e.get("price_upper")) or 1_000_000.0,
            })
    return products, goals
