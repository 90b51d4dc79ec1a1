"""How long the audit takes to tell copies of a decoy from data of the agent's own, by the decoy's length.

    python bench/decoy_copies.py [--lines 40,400,2000] [--repeat 3] [--before-only]

A decoy of answers in JSON lines whose lines all start alike (``{"id": "<canary>-0001", ...}``: the worst case
for the index of its lines) is quoted whole in an ``os.walk`` index, and :class:`autorl.decoys.CanaryFinder`
reads the index; every occurrence is a copy. ``--before-only`` indexes the lines by the characters before the
canary alone, as the finder did before (each occurrence then compared with every line that starts alike).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

CANARY = "9f2c4e1a7b3d5f60aa"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", default="40,400,2000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before-only", action="store_true")
    args = parser.parse_args()
    import autorl.decoys._copies as copies
    from autorl.decoys import CanaryFinder

    if args.before_only:
        copies._AFTER = 1 << 30  # every line then reads as ending soon after the canary: all compared
    for n in (int(x) for x in args.lines.split(",")):
        lines = [json.dumps({"id": f"{CANARY}-{k:04d}", "answer": str(k * 7 % 1000)}) for k in range(n)]
        text = "\n".join(lines) + "\n"
        meta = {
            "planted": [
                {
                    "name": "test-answers",
                    "rel": "a.jsonl",
                    "canary": CANARY,
                    "lines": lines,
                    "all_lines": True,
                    "sha256": hashlib.sha256(text.encode()).hexdigest(),
                }
            ]
        }
        index = json.dumps({"./a.jsonl": {"bytes": len(text), "text": text}})
        finder = CanaryFinder(meta)
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            found = finder.find(index, "code/index.json")
            times.append(time.perf_counter() - started)
        assert found == [], found
        best = min(times)
        print(
            json.dumps(
                {
                    "lines": n,
                    "before_only": args.before_only,
                    "ms": round(best * 1000, 2),
                    "us_per_occurrence": round(best / n * 1e6, 2),
                }
            )
        )


if __name__ == "__main__":
    main()
