"""The grader's per-submission overhead (validation + snapshot), before and after submissions were taken by
descriptor and validated on the snapshot, measured side by side in one process.

    python bench/submission_overhead.py [--before REV] [--big-gb 3] [--reps-tiny 20] [--reps-big 3]

"Before" is the path-based code (``resolve_submission_path`` + ``validate_checkpoint`` on the live directory +
``take_snapshot`` re-reading the files) loaded from git revision REV; "after" is the working tree
(``submission_parts`` + ``open_submission`` + ``take_snapshot`` by descriptor + ``validate_checkpoint`` on the
copy). Both copy, fsync and hash every byte. Two checkpoints: the built-in ``autorl:tiny`` model, and a
safetensors checkpoint of ``--big-gb`` GB built in a temporary directory on local disk (deleted at the end).
Step times vary on shared machines, so the figure that matters is the ratio, after / before, per rep.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: the last revision whose grader validated the live directory and re-read it to copy
BEFORE = "5dfc5f1"


def load_before(rev: str, tmp: Path) -> tuple[ModuleType, ModuleType]:
    """The old validation and snapshot modules from git, importable side by side with today's."""
    mods = []
    for name in ("validation", "snapshot"):
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:src/autorl/grader/{name}.py"],
                              check=True, capture_output=True, text=True).stdout
        text = text.replace("from autorl.grader.validation import", "from before_validation import")
        path = tmp / f"before_{name}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(f"before_{name}", path)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[f"before_{name}"] = mod
        spec.loader.exec_module(mod)
        mods.append(mod)
    return mods[0], mods[1]


def big_checkpoint(path: Path, gb: float) -> Path:
    """config.json, tokenizer.json and one safetensors file of ``gb`` GB of non-zero bytes."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    (path / "tokenizer.json").write_text("{}")
    n = int(gb * 1e9)
    header = json.dumps({"w": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
    header += b" " * (-len(header) % 8)
    block = os.urandom(64 << 20)
    with open(path / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        left = n
        while left:
            k = min(left, len(block))
            f.write(block[:k])
            left -= k
    return path


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure(ckpt_name: str, ws: Path, before: tuple[ModuleType, ModuleType], reps: int, store: Path) -> dict[str, Any]:
    from autorl.grader.snapshot import PinnedDir, open_submission, take_snapshot
    from autorl.grader.validation import Limits, submission_parts, validate_checkpoint

    old_val, old_snap = before
    output = ws / "output"
    pinned = PinnedDir(output)  # once per run, when the grader starts
    raw = f"{output}/{ckpt_name}"

    def run_before(target: Path) -> None:
        path = old_val.resolve_submission_path(raw, ws, output)
        ckpt = old_val.validate_checkpoint(path, output, old_val.Limits())
        old_snap.take_snapshot(ckpt, target)

    def run_after(target: Path) -> None:
        fd = open_submission(pinned, submission_parts(raw, str(ws), pinned.aliases))
        try:
            snap = take_snapshot(fd, target, Limits())
        finally:
            os.close(fd)
        validate_checkpoint(snap.path, snap.files)

    rows = []
    try:
        for rep in range(reps):
            pair = {}
            # alternate which one goes first, so neither always meets a warmer cache
            order = [("before", run_before), ("after", run_after)]
            if rep % 2:
                order.reverse()
            for label, fn in order:
                target = store / f"{label}-{rep}"
                pair[label] = timed(lambda fn=fn, target=target: fn(target))  # type: ignore[misc]
                shutil.rmtree(target)
            rows.append(pair)
    finally:
        pinned.close()
    ratios = [r["after"] / r["before"] for r in rows]
    return {
        "reps": reps,
        "before_s_median": statistics.median(r["before"] for r in rows),
        "after_s_median": statistics.median(r["after"] for r in rows),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help="git revision of the old grader code")
    parser.add_argument("--big-gb", type=float, default=3.0)
    parser.add_argument("--reps-tiny", type=int, default=20)
    parser.add_argument("--reps-big", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to build the checkpoints (local disk; default: a temp dir)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from autorl.resources import resolve_model

    tiny = resolve_model("autorl:tiny").path
    tmp = Path(tempfile.mkdtemp(prefix="autorl-overhead-", dir=args.dir))
    try:
        need = args.big_gb * 1e9 * 2 + 2e9  # the checkpoint and one snapshot of it at a time
        free = shutil.disk_usage(tmp).free
        if free < need:
            raise SystemExit(f"{tmp}: {free / 1e9:.1f} GB free, {need / 1e9:.1f} GB needed")
        before = load_before(args.before, tmp)
        ws = tmp / "ws"
        (ws / "output").mkdir(parents=True)
        store = tmp / "store"
        store.mkdir()
        shutil.copytree(tiny, ws / "output" / "tiny")
        t = time.perf_counter()
        big_checkpoint(ws / "output" / "big", args.big_gb)
        built = time.perf_counter() - t
        tiny_bytes = sum(p.stat().st_size for p in (ws / "output" / "tiny").rglob("*") if p.is_file())
        results = {
            "before_rev": args.before,
            "tiny": {"bytes": tiny_bytes, **measure("tiny", ws, before, args.reps_tiny, store)},
            "big": {"bytes": int(args.big_gb * 1e9), "build_s": built,
                    **measure("big", ws, before, args.reps_big, store)},
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"before = {results['before_rev']} (validate the live directory, then copy it)")
        for name in ("tiny", "big"):
            r = results[name]
            print(f"{name:5} {r['bytes'] / 1e6:9.1f} MB  before {r['before_s_median']:.3f} s  after "
                  f"{r['after_s_median']:.3f} s  after/before {r['ratio_median']:.2f} "
                  f"(range {r['ratio_min']:.2f}-{r['ratio_max']:.2f}, {r['reps']} reps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
