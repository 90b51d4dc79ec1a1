"""The sweep coordinator's own cost, with a no-op run (an executor plugin that records a result at once):

1. a 1,000-cell study: spec expansion, run keys, scheduling, ingest into the ledger (target < 50 ms per cell);
2. resuming it when 990 of the 1,000 keys are done (target < 2 s);
3. the report over a synthetic ledger of 10,000 runs (target < 1 s).

    python bench/sweep_overhead.py [--cells 1000] [--runs 10000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

from autorl.hookspecs import hookimpl
from autorl.sweep import Executor, Launch


class Instant(Executor):
    """Records each attempt's result as soon as it is placed: the run costs nothing, the coordinator all."""

    name: ClassVar[str] = "instant"

    def start(self, launches: list[Launch]) -> list[dict[str, Any] | None]:
        from autorl.sweep.store import read_json, write_json

        jobs: list[dict[str, Any] | None] = []
        for launch in launches:
            p = read_json(launch.attempt_dir / "payload.json")
            seed = p["options"]["seed"]
            imp = random.Random(seed).gauss(3.0, 4.0)
            row = {"run_id": f"{p['run_key']}-a{p['attempt']}", "timestamp": "2026-01-01 00:00:00", "task": "arith",
                   "agent": "example", "base_model": "stub", "success": True, "improvement": imp, "seed": seed,
                   "config_hash": "c", "run_key": p["run_key"], "sweep": p["sweep"], "end_reason": "agent finished"}
            write_json(launch.attempt_dir / "result.json", {"row": row, "submissions": [], "meta": {}})
            write_json(launch.attempt_dir / "outcome.json", {"kind": "result", "success": True, "reason": "",
                                                             "improvement": imp})
            jobs.append({"executor": self.name})
        return jobs

    def poll(self, job: dict[str, Any]) -> str | None:
        return "finished"

    def capacity(self) -> int | None:
        return 100


class Plugin:
    @hookimpl
    def register_executors(self, register: Any) -> None:
        register(Instant)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="autorl-sweep-bench-"))
    os.environ["AUTORL_HOME"] = str(tmp / "home")
    from autorl.plugins.loader import create_plugin_manager, set_plugin_manager

    pm = create_plugin_manager(entry_points=False)
    pm.register(Plugin(), name="bench")
    set_plugin_manager(pm)
    from autorl.record.ledger import Ledger
    from autorl.sweep.coordinator import open_study, run_sweep
    from autorl.sweep.report import build_report, study_report

    model = tmp / "stub-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    spec = {"name": "bench", "agent": "example", "task": "arith", "model": str(model), "timeout": 60,
            "seed": list(range(args.cells))}
    run_sweep(spec, executor="instant")  # data preparation and imports out of the way
    shutil.rmtree(tmp / "home" / "sweeps")
    (tmp / "home" / "autorl.db").unlink()

    t = time.perf_counter()
    run_sweep(spec, executor="instant")
    full = time.perf_counter() - t
    keys = sorted((tmp / "home" / "sweeps" / "bench" / "keys").iterdir())
    for k in keys[:10]:
        shutil.rmtree(k)
    t = time.perf_counter()
    study = run_sweep(spec, executor="instant")
    resume = time.perf_counter() - t
    study.refresh()
    assert len(study_report(open_study(study.dir.root))["cells"][0]["per_run"]) == args.cells

    ledger = Ledger(tmp / "synthetic.db")
    rng = random.Random(0)
    for i in range(args.runs):
        agent, task, seed = f"agent{i % 4}", f"task{(i // 4) % 5}", i // 20
        ledger.ingest({"row": {"run_id": f"r{i}", "timestamp": "2026-01-01 00:00:00", "task": task, "agent": agent,
                               "base_model": f"model{i % 2}", "success": rng.random() > 0.2, "seed": seed,
                               "improvement": rng.gauss(2, 5), "improvement_ci95": [0.0, 1.0],
                               "config_hash": "c", "sweep": "syn", "run_key": f"k{i}"}, "submissions": []})
    t = time.perf_counter()
    rows = [r["row"] for r in ledger.runs() if r["row"].get("sweep") == "syn"]
    report = build_report(rows)
    report_s = time.perf_counter() - t
    ledger.close()
    out = {
        "cells": args.cells, "full_s": round(full, 3), "per_cell_ms": round(1000 * full / args.cells, 2),
        "per_cell_target_ms": 50, "per_cell_ratio_to_target": round(1000 * full / args.cells / 50, 3),
        "resume_990_done_s": round(resume, 3), "resume_target_s": 2, "resume_ratio_to_target": round(resume / 2, 3),
        "report_runs": args.runs, "report_s": round(report_s, 3), "report_target_s": 1,
        "report_ratio_to_target": round(report_s, 3), "report_cells": len(report["cells"]),
        "python": sys.version.split()[0], "cpus": os.cpu_count(),
    }
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
