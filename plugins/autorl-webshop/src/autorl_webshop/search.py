"""Product search: BM25 (rank_bm25's Okapi BM25) over each product's title, category, query and attributes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

TOP_K = 50


def tokenize(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


class SearchEngine:
    def __init__(self, products: Sequence[dict[str, Any]]) -> None:
        from rank_bm25 import BM25Okapi

        self.products = list(products)
        docs = [
            tokenize(" ".join([p["name"], p["category"], p["query"], *p["attributes"], *p.get("features", [])]))
            for p in self.products
        ]
        self.bm25 = BM25Okapi(docs)

    def search(self, query: str, k: int = TOP_K) -> list[dict[str, Any]]:
        """The ``k`` best matches, best first (ties in catalog order); nothing for an empty query."""
        words = tokenize(query)
        if not words:
            return []
        scores = self.bm25.get_scores(words)
        ranked = sorted(range(len(self.products)), key=lambda i: (-scores[i], i))
        return [self.products[i] for i in ranked[:k] if scores[i] > 0]
