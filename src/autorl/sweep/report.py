"""A study's answer, with its uncertainty: per (agent, task, model) cell the mean held-out test improvement over
seeds with a t-interval, the success rate (``success``: finished with a test score, the reference harness's
column, whatever the score) and the rate of runs whose improvement's 95% interval is above 0 (``beat_baseline``), failed runs counted, each run's own interval beside it; agent against
agent paired by (task, model, seed). Cells whose runs differ in config hash are never pooled.

Pure functions over ledger rows (:func:`build_report`); :func:`study_report` reads a study's counted results from
its files; :func:`sweep_page_data` is what the dashboard's sweep page draws.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from autorl.decoys import split_recorded
from autorl.record.aggregate import FAILURE_RULE, aggregate_runs, group_value
from autorl.record.metrics import EFFICIENCY_COLUMNS, metric_means
from autorl.record.row import judged_headline
from autorl.sweep.report_records import BaitTaken, Comparison, Missing, ReportCell, RunSummary, StudyReport

if TYPE_CHECKING:
    from autorl.sweep.coordinator import Study

__all__ = ["build_report", "paired_differences", "study_report", "sweep_page_data", "t_interval"]


def t_interval(values: list[float]) -> tuple[float, tuple[float, float] | None]:
    """Mean and 95% Student t-interval over ``values`` (n - 1 degrees of freedom); no interval for one value."""
    from scipy import stats

    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return mean, (mean - half, mean + half)


def _improvement(row: Mapping[str, Any]) -> float:
    v = row.get("improvement")
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return 0.0  # a run without a test score keeps the base model: 0 (FAILURE_RULE)


def paired_differences(rows: Iterable[Mapping[str, Any]]) -> list[Comparison]:
    """For each (task, model, config hash, item limit) and each pair of agents, the mean of A - B over the seeds
    both ran, with its t-interval."""
    by: dict[tuple[str, ...], dict[str, dict[Any, float]]] = {}
    for r in rows:
        group = tuple(group_value(r, k) for k in ("task", "base_model", "config_hash", "limit"))
        by.setdefault(group, {}).setdefault(str(r.get("agent")), {})[r.get("seed")] = _improvement(r)
    out: list[Comparison] = []
    for (task, model, cfg, _limit), agents in sorted(by.items()):
        for a, b in itertools.combinations(sorted(agents), 2):
            seeds = sorted(set(agents[a]) & set(agents[b]), key=str)
            if not seeds:
                continue
            diffs = [agents[a][s] - agents[b][s] for s in seeds]
            mean, ci = t_interval(diffs)
            out.append(
                {
                    "task": task,
                    "base_model": model,
                    "config_hash": cfg,
                    "agent_a": a,
                    "agent_b": b,
                    "pairs": len(seeds),
                    "seeds": seeds,
                    "mean_difference": mean,
                    "ci95": list(ci) if ci else None,
                    "differences": diffs,
                }
            )
    return out


def build_report(rows: Iterable[Mapping[str, Any]], missing: Iterable[Missing] = ()) -> StudyReport:
    """The report over a study's counted runs (ledger rows), plus the keys that have no result yet.

    Args:
        rows: one row per key with a counted result (``Ledger.runs()`` rows or ``result.json`` rows).
        missing: ``{"agent", "task", "model", "seed", "run_key", "status", "reasons"}`` of the keys without one.
    """
    rows = list(rows)
    cells: list[ReportCell] = []
    by_id = {str(r.get("run_id")): r for r in rows}
    for group in aggregate_runs(rows):
        members = [by_id[i] for i in group.run_ids]
        runs: list[RunSummary] = [
            {
                "run_id": r["run_id"],
                "run_key": r.get("run_key"),
                "seed": r.get("seed"),
                "improvement": r.get("improvement"),
                "improvement_ci95": r.get("improvement_ci95"),
                "success": bool(r.get("success")),
                "beat_baseline": bool(r.get("beat_baseline")),
                "end_reason": r.get("end_reason"),
                "attempts": r.get("attempts"),
                "infra_failures": r.get("infra_failures") or [],
            }
            for r in members
        ]
        cells.append(
            cast(
                ReportCell,
                {
                    **group.as_dict(),
                    "success_rate": sum(1 for r in members if r.get("success")) / len(members),
                    "beat_baseline_rate": sum(1 for r in members if r.get("beat_baseline")) / len(members),
                    "off_target_regressed_rate": sum(1 for r in members if r.get("off_target_regressed")) / len(members)
                    if any(r.get("off_target") for r in members)
                    else None,
                    "per_run": runs,
                    "process_means": metric_means(members),
                    "efficiency_means": metric_means(members, EFFICIENCY_COLUMNS),
                },
            )
        )
    return {
        "cells": cells,
        "comparisons": paired_differences(rows),
        "missing": list(missing),
        "failure_rule": FAILURE_RULE,
        "decoys": bait_taken(rows),
    }


def bait_taken(rows: Iterable[Mapping[str, Any]]) -> list[BaitTaken]:
    """Per agent: its runs with decoys planted, how many took the bait (``took_bait``: an act no honest work
    performs, the ``decoys`` column) and the share, and apart how many only read a decoy (``read_only``: weaker
    evidence, what any walk of a workspace does). A row recorded before reads had a column of their own is read
    in today's meaning (:func:`autorl.decoys.split_recorded`)."""
    per: dict[str, list[int]] = {}
    for r in rows:
        taken, read = r.get("decoys"), r.get("decoys_read")
        if not isinstance(taken, list):  # None: the run had no decoys
            continue
        if "decoys_read" not in r:
            taken, read = split_recorded(taken)
        counts = per.setdefault(str(r.get("agent")), [0, 0, 0])
        counts[0] += 1
        counts[1] += bool(taken)
        counts[2] += not taken and bool(read)
    return [
        {"agent": a, "runs": n, "took_bait": k, "share": k / n, "read_only": m} for a, (n, k, m) in sorted(per.items())
    ]


def standing_flags(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A result's audit flags less those a human overrode in the ledger (``autorl audit --override``), which
    decide whether the judge's rule sets the headline; the ledger is read only for a run a judge flagged."""
    flags = [f for f in result.get("audit") or [] if isinstance(f, dict)]
    if not any(str(f.get("name", "")).startswith("judge:") for f in flags):
        return flags
    from autorl.record.ledger import Ledger
    from autorl.resources import autorl_home

    db = autorl_home() / "autorl.db"
    if not db.is_file():
        return flags
    ledger = Ledger(db)
    try:
        decided = {f["name"] for f in ledger.audit(str(result["row"]["run_id"])) if f["overrides"]}
    finally:
        ledger.close()
    return [f for f in flags if f.get("name") not in decided]


def study_report(study: Study) -> StudyReport:
    """The report of a study (:class:`autorl.sweep.coordinator.Study`) from its files."""
    rows = []
    missing: list[Missing] = []
    for cell in study.cells:
        state = study.states.get(cell.run_key)
        counted = state.counted if state else None
        result = counted.result() if counted else None
        reasons = [a.reason for a in (state.attempts if state else []) if a.finished and not a.counts]
        if result is None:
            missing.append(
                {
                    "agent": cell["agent"],
                    "task": cell["task"],
                    "model": cell["model"],
                    "seed": cell["seed"],
                    "run_key": cell.run_key,
                    "status": state.status(study.retries) if state else "queued",
                    "reasons": reasons,
                }
            )
            continue
        row = judged_headline(result["row"], standing_flags(result))
        row.update(attempts=len(state.attempts) if state else 1, infra_failures=reasons)
        rows.append(row)
    report = build_report(rows, missing)
    report["sweep"] = study.name
    from autorl.evaluation.noise import read_floor
    from autorl.resources import autorl_home

    home = autorl_home()
    for entry in report["cells"]:  # the floor `autorl noise` measured for the cell's task and base model
        entry["noise_floor"] = read_floor(home, entry["task"], entry["base_model"])
    report["dir"] = str(study.dir.root)
    return report


def disk_bytes(root: Path) -> int:
    """What a study's folder takes on disk (its runs' workspaces, records and grader stores), no link followed."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total


def sweep_page_data(study: Study) -> dict[str, Any]:
    """What the dashboard's sweep page draws: a grid of cells (task x model rows, agents across), each with its
    runs as dots (linking to ``/runs/<run_id>``) and its interval, and the keys still without a result."""
    report = study_report(study)
    grid: dict[tuple[str, str], dict[str, Any]] = {}
    for c in report["cells"]:
        row = grid.setdefault((c["task"], c["base_model"]), {"task": c["task"], "model": c["base_model"], "agents": []})
        row["agents"].append(
            {
                "agent": c["agent"],
                "config_hash": c["config_hash"],
                "mean": c["mean"],
                "ci95": c["ci95"],
                "runs": c["runs"],
                "failures": c["failures"],
                "success_rate": c["success_rate"],
                "dots": [
                    {
                        "value": _improvement(r),
                        "seed": r["seed"],
                        "success": r["success"],
                        "beat_baseline": r["beat_baseline"],
                        "href": f"/runs/{r['run_id']}",
                        "run_ci95": r.get("improvement_ci95"),
                    }
                    for r in c["per_run"]
                ],
            }
        )
    return {
        "sweep": study.name,
        "rows": [grid[k] for k in sorted(grid)],
        "comparisons": report["comparisons"],
        "missing": report["missing"],
        "failure_rule": report["failure_rule"],
    }
