"""Off-target regression: did the trained model get worse elsewhere? After the run (its grader stopped), the
checkpoint the grader selected and the base model are scored on each off-target benchmark's test split, paired
item by item; a change whose 95% interval lies below 0 is flagged.

The selected checkpoint is the grader's own validated copy of it (its snapshot), never the agent's folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autorl.errors import AutorlError
from autorl.grader.records import compare
from autorl.grader.store import Store
from autorl.record.schema import OffTargetRecord

__all__ = ["check_tasks", "score_off_target", "selected_snapshot"]


def check_tasks(tasks: Sequence[str]) -> list[str]:
    """The off-target task names, each known to the registry (an unknown one: its one-line error, before the
    run starts), without repeats."""
    from autorl.plugins.registry import get_benchmark

    out: list[str] = []
    for task in tasks:
        get_benchmark(task)
        if task not in out:
            out.append(task)
    return out


def selected_snapshot(store_dir: Path, submission_id: int) -> tuple[Path, str] | None:
    """The grader's copy of a submission (its folder and kind), from its store; None when it has none."""
    try:
        store = Store.read_only(store_dir / "grader.db")
    except Exception:
        return None
    try:
        row = store.get(submission_id)
    finally:
        store.close()
    if not row or not row.get("snapshot"):
        return None
    return Path(str(row["snapshot"])), str(row.get("kind") or "full")


def score_off_target(
    tasks: Sequence[str],
    *,
    base_dir: Path,
    selected: tuple[Path, str] | None,
    backend: str,
    backend_options: Mapping[str, Any],
    home: Path,
    limit: int | None,
) -> list[OffTargetRecord]:
    """Each task's base and selected scores on its test split with the paired change; an evaluation that fails
    is recorded with its error (it never stops the run from being recorded)."""
    from autorl.evaluation.run import evaluate_model
    from autorl.plugins.registry import get_backend, get_benchmark
    from autorl.resources import prepare_data

    out: list[OffTargetRecord] = []
    for task in tasks:
        entry: OffTargetRecord = {
            "task": task,
            "base": None,
            "selected": None,
            "change": None,
            "ci95": None,
            "p_value": None,
            "regressed": False,
            "error": None,
        }
        if selected is None:
            entry["error"] = "no selected checkpoint"
            out.append(entry)
            continue
        try:
            bench = get_benchmark(task)({})
            data = prepare_data(bench, home)
            be = get_backend(backend)(dict(backend_options))
            split = "test" if "test" in bench.splits else bench.splits[-1]
            base = evaluate_model(bench, be, base_dir, split=split, hidden_dir=data.hidden_dir, limit=limit)
            path, kind = selected
            cand = evaluate_model(
                bench,
                be,
                path,
                split=split,
                hidden_dir=data.hidden_dir,
                limit=limit,
                base_model_dir=base_dir if kind == "lora" else None,
            )
        except (AutorlError, OSError, RuntimeError, ValueError) as exc:
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            out.append(entry)
            continue
        comp = compare(base.to_dict(), cand.to_dict())
        ci = comp["ci95"] if comp else None
        entry["split"], entry["base"], entry["selected"] = split, base.score, cand.score
        entry["change"], entry["ci95"] = comp["difference"] if comp else None, ci
        entry["p_value"], entry["regressed"] = comp["p_value"] if comp else None, bool(ci and ci[1] < 0)
        out.append(entry)
    return out
