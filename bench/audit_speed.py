"""How long the audit takes on a workspace of many files (default 10,000) against GSM8K-sized hidden splits.

    python bench/audit_speed.py [--files 10000] [--before REV] [--rounds 2]

With ``--before REV`` the overlap check of ``src/autorl/audit.py`` as it was at that git revision runs on the
same workspace in the same process, rounds alternating, and the ratio of the two is printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=1819, help="hidden items (GSM8K: 500 dev + 1319 test)")
    parser.add_argument("--before", help="a git revision whose audit.py to time side by side")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    old = _audit_at(args.before) if args.before else None

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
        timings: dict[str, list[float]] = {"now": [], "before": []}
        pair = [("now", check_overlap), ("before", old.check_overlap if old else None)]
        for k in range(args.rounds):
            for name, check in pair if k % 2 == 0 else pair[::-1]:  # alternating which goes first
                if check is None:
                    continue
                t = time.perf_counter()
                flags = check(ws, hidden)
                timings[name].append(time.perf_counter() - t)
                assert [f.name for f in flags] == ["dev-items-in-workspace"], flags
    now = min(timings["now"])
    print(f"{args.files} files, {size / 2**20:.1f} MiB, {args.items} hidden items: {now:.1f} s "
          f"(rounds {', '.join(f'{x:.1f}' for x in timings['now'])}); flags: {[f.name for f in flags]}")
    if old is not None:
        before = min(timings["before"])
        print(f"before ({args.before}): {before:.1f} s (rounds {', '.join(f'{x:.1f}' for x in timings['before'])}); "
              f"now / before = {now / before:.2f}")


def _audit_at(rev: str) -> object:
    """``autorl.audit`` as it was at git revision ``rev``, loaded beside today's."""
    root = Path(__file__).resolve().parent.parent
    source = subprocess.run(["git", "show", f"{rev}:src/autorl/audit.py"], cwd=root, capture_output=True,
                            text=True, check=True).stdout
    spec = importlib.util.spec_from_loader("audit_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["audit_before"] = module
    exec(compile(source, f"audit.py@{rev}", "exec"), module.__dict__)
    return module


if __name__ == "__main__":
    main()
