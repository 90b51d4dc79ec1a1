"""How long one page of a run's items takes on the dashboard, and ``autorl.items()``, for a split of N items
(default 10,000) whose answers are ``--answer-chars`` long (default 400, a GSM8K-like chain of thought).

    python bench/items_page.py [--items 10000] [--answer-chars 400] [--rounds 5]

The first page request reads both per-item files of the run's store and pairs them; later pages of the same
run reuse that while the files are unchanged and render 50 rows. The figures are the median over rounds (each
round reads afresh), measured through a real uvicorn server on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--answer-chars", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import httpx

    import autorl
    from autorl.grader.items import per_item_path
    import autorl.ui as ui_module
    import autorl.ui.items
    from autorl.ui import create_app
    from tests.scripted_llm import serve_in_thread
    from tests.test_ui import fixture_result, make_ledger

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        store = home / "store"
        filler = "step " * (args.answer_chars // 5)
        for tag, right in (("baseline", 3), ("sub1", 2)):
            path = per_item_path(store, tag, "test")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps({
                "id": f"i{k}", "score": float(k % right == 0), "completions": [f"{filler} {k}"], "error": None,
                "extra": {"output_tokens": args.answer_chars // 4}, "prompt": f"question {k} " + filler[:200],
                "reference": str(k)}) + "\n" for k in range(args.items)))
        make_ledger(home / "autorl.db", [fixture_result("20261101T100000", "gsm8k", "a", "m", "2026-11-01", [40.0],
                                                        test=50.0, store_dir=store)])
        size = sum(per_item_path(store, t, "test").stat().st_size for t in ("baseline", "sub1"))
        timings: dict[str, list[float]] = {"first page (reads, pairs)": [], "another page": [],
                                           "api page (flipped)": [], "autorl.items()": []}
        for _ in range(args.rounds):
            ui_module.items._RECENT.entries.clear()  # each round reads the files afresh
            with serve_in_thread(create_app(home / "autorl.db")) as port, \
                    httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120, trust_env=False) as ui:
                for name, path, params in (("first page (reads, pairs)", "/runs/20261101T100000", {}),
                                           ("another page", "/runs/20261101T100000", {"items_page": "150"}),
                                           ("api page (flipped)", "/api/runs/20261101T100000/items",
                                            {"flipped": "1", "page": "3"})):
                    started = time.perf_counter()
                    assert ui.get(path, params=params).status_code == 200
                    timings[name].append(time.perf_counter() - started)
            started = time.perf_counter()
            frame = autorl.items("20261101T100000", home=home)
            timings["autorl.items()"].append(time.perf_counter() - started)
        assert len(frame) == args.items
    print(f"{args.items} items, per-item files {size / 2**20:.1f} MiB; median of {args.rounds} rounds")
    for name, values in timings.items():
        print(f"  {name:<24} {1000 * statistics.median(values):7.0f} ms")


if __name__ == "__main__":
    main()
