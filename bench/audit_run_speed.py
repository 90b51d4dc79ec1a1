"""How long the whole deterministic audit (``audit_run``) takes on a realistic workspace, and the same audit at
another source tree side by side (rounds alternating): the cost of what a change added to every run's audit.

    python bench/audit_run_speed.py [--before-src DIR] [--rounds 3] [--data-mib 50]

The workspace: 2,000 scripts and logs, a training file of ``--data-mib`` MiB of question/answer lines, a 20 MiB
trajectory, a notebook holding a 2 MiB base64 image; GSM8K-sized hidden splits (500 dev + 1,319 test items).
``--before-src``: a ``src`` folder of another revision (``git archive REV src | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["the", "a", "farmer", "baker", "sheep", "loaves", "market", "sells", "buys", "gives", "each", "day", "week", "how", "many", "are", "left", "in", "total", "train", "model", "loss", "step", "batch", "learning", "rate", "epoch", "answer", "question", "data"]


def build(ws: Path, data_mib: int) -> None:
    rng = random.Random(0)

    def sentence(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n)) + f" {rng.randint(1, 999)}"

    for k in range(2000):
        sub = ws / "code" / f"d{k % 50}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{k}.py").write_text("\n".join(f"# {sentence(12)}\nx_{i} = {i}" for i in range(rng.randint(5, 400))))
    line = json.dumps({"q": sentence(40), "a": "12"}) + "\n"
    with (ws / "data.jsonl").open("w") as f:
        for _ in range(data_mib * 2**20 // len(line)):
            f.write(json.dumps({"q": sentence(40), "a": str(rng.randint(1, 999))}) + "\n")
    with (ws / "trajectory.jsonl").open("w") as f:
        for i in range(20 * 2**20 // 400):
            f.write(json.dumps({"role": "assistant", "content": f"step {i}: {sentence(50)}"}) + "\n")
    image = base64.b64encode(rng.randbytes(3 * 2**19)).decode()
    (ws / "explore.ipynb").write_text(json.dumps({"cells": [{"outputs": [{"data": {"image/png": image}}]}]}))


def one(src: str, ws: Path) -> float:
    """Seconds of one audit_run of ``ws`` with autorl from ``src``, in a fresh process."""
    code = f"""
import sys, time, random
sys.path.insert(0, {src!r})
from pathlib import Path
from autorl import Benchmark, EvalConfig, Item
from autorl.audit import audit_run
rng = random.Random(1)
words = {list(WORDS)!r}
items = [Item(f"i{{k}}", {{"question": " ".join(rng.choice(words) for _ in range(40))}}, "1") for k in range(1819)]
class B(Benchmark):
    name = "b"
    eval_config = EvalConfig()
    def prepare_train_data(self, d): pass
    def load_items(self, split, hidden_dir): return items[:500] if split == "dev" else items[500:]
    def score(self, item, completion): return 0.0
run = {{"row": {{"workspace": {str(ws)!r}, "task": "b", "base_model": "m"}}, "meta": {{"hidden_dir": "/nonexistent"}},
       "submissions": []}}
t = time.perf_counter()
flags = audit_run(run, benchmark=B(), budget_s=None)
print(time.perf_counter() - t, [f.name for f in flags])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(" ", 1)
    return float(out[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before-src", help="a src folder of another revision to time side by side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-mib", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        t = time.perf_counter()
        build(ws, args.data_mib)
        size = sum(p.stat().st_size for p in ws.rglob("*") if p.is_file())
        print(f"workspace: {size / 2**20:.0f} MiB in {sum(1 for _ in ws.rglob('*'))} entries "
              f"(built in {time.perf_counter() - t:.0f} s)")
        pair = [("now", str(ROOT / "src"))] + ([("before", args.before_src)] if args.before_src else [])
        times: dict[str, list[float]] = {name: [] for name, _ in pair}
        for k in range(args.rounds):
            for name, src in pair if k % 2 == 0 else pair[::-1]:
                times[name].append(one(src, ws))
    for name, values in times.items():
        print(f"{name}: median {sorted(values)[len(values) // 2]:.1f} s (rounds {', '.join(f'{v:.1f}' for v in values)})")
    if args.before_src:
        now, before = (sorted(times[n])[len(times[n]) // 2] for n in ("now", "before"))
        print(f"now / before = {now / before:.2f}")


if __name__ == "__main__":
    main()
