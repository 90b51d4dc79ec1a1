"""How long the audit takes on a workspace of many files (default 10,000) against GSM8K-sized hidden splits.

    python bench/audit_speed.py [--files 10000]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=1819, help="hidden items (GSM8K: 500 dev + 1319 test)")
    args = parser.parse_args()

    from autorl import Item
    from autorl.audit import check_overlap

    rng = random.Random(0)
    words = ["the", "a", "farmer", "baker", "sheep", "loaves", "market", "sells", "buys", "gives", "each", "day", "week", "how", "many", "are", "left", "in", "total"]

    def sentence(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n)) + f" {rng.randint(1, 999)}"

    items = [Item(f"i{k}", {"question": sentence(40)}, "1") for k in range(args.items)]
    hidden = {"dev": items[:500], "test": items[500:]}
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        for k in range(args.files):
            sub = ws / "code" / f"d{k % 100}"
            sub.mkdir(parents=True, exist_ok=True)
            (sub / f"f{k}.txt").write_text("\n".join(sentence(30) for _ in range(20)))
        (ws / "code" / "leak.jsonl").write_text(items[3].input["question"])
        size = sum(p.stat().st_size for p in ws.rglob("*") if p.is_file())
        t = time.perf_counter()
        flags = check_overlap(ws, hidden)
        seconds = time.perf_counter() - t
    print(f"{args.files} files, {size / 2**20:.1f} MiB, {args.items} hidden items: {seconds:.1f} s; "
          f"flags: {[f.name for f in flags]}")


if __name__ == "__main__":
    main()
