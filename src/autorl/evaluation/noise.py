"""The noise floor of an evaluation: one checkpoint scored N times through the grader's evaluation path (the
engine kept warm between repeats), each repeat with its own sampling seed, and the spread of the N scores.

A greedy evaluation (temperature 0, one sample) should give N equal scores: the record says whether they
were (``deterministic``). Where the evaluation samples (or a judge does), the spread is the floor under which
an improvement is not told apart from a second look at the same model. The record is kept under
``AUTORL_HOME/noise/`` (:func:`noise_path`), where a study report finds the floor of its task and model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypedDict

from autorl.errors import UsageError
from autorl.jsonio import write_json_atomic

__all__ = ["MAX_REPEATS", "NoiseFloor", "NoiseRecord", "Spread", "noise_floor", "noise_path", "read_floor", "spread"]

#: the most repeats one command runs
MAX_REPEATS = 1000


class Spread(TypedDict):
    """The spread of N scores (:func:`spread`); ``None`` where N is too small for the figure."""

    n: int
    mean: float | None
    #: the sample standard deviation: the floor
    sd: float | None
    min: float | None
    max: float | None
    range: float | None


class NoiseRecord(Spread):
    """One checkpoint scored N times (:func:`noise_floor`), as kept under ``AUTORL_HOME/noise/``."""

    task: str
    model: str
    split: str
    limit: int | None
    backend: str
    repeats: int
    #: temperature 0 and one sample: the scores should be equal
    greedy: bool
    seeds: list[int]
    scores: list[float]
    #: equal scores item by item in every repeat
    deterministic: bool
    config_hash: str


class NoiseFloor(TypedDict):
    """What a study report shows of a kept floor (:func:`read_floor`): ``None`` where the file lacks a figure."""

    sd: float | None
    range: float | None
    repeats: int | None
    deterministic: bool | None
    greedy: bool | None
    mean: float | None
    config_hash: str | None


def spread(scores: list[float]) -> Spread:
    """The spread of ``scores``: mean, sample standard deviation (the floor), min, max and range."""
    n = len(scores)
    mean = sum(scores) / n if n else None
    sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1)) if n > 1 and mean is not None else None
    return {
        "n": n,
        "mean": mean,
        "sd": sd,
        "min": min(scores, default=None),
        "max": max(scores, default=None),
        "range": (max(scores) - min(scores)) if scores else None,
    }


def noise_path(home: Path, task: str, model: str, split: str) -> Path:
    """Where the floor of ``model`` on ``task``'s ``split`` is kept (one file per task, model and split)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._")[:120] or "model"
    return home / "noise" / f"{re.sub(r'[^A-Za-z0-9._-]+', '_', task)}--{safe}--{split}.json"


def noise_floor(
    task: str,
    model: str,
    repeats: int,
    *,
    home: Path,
    split: str = "dev",
    limit: int | None = None,
    backend: str | None = None,
    benchmark_options: Mapping[str, Any] | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> NoiseRecord:
    """Score ``model`` on ``task`` ``repeats`` times (repeat i with sampling seed ``seed + i``), keep the record
    under ``home/noise/`` and return it."""
    from autorl.evaluation.run import evaluate_model
    from autorl.plugins.registry import default_backend, get_backend, get_benchmark, resolve_task
    from autorl.resources import prepare_data, resolve_model

    if not 2 <= repeats <= MAX_REPEATS:
        raise UsageError(f"--repeats must be between 2 and {MAX_REPEATS}, not {repeats}")
    if limit is not None and limit <= 0:
        raise UsageError(f"--limit must be positive, not {limit}")
    task = resolve_task(task)  # a name, or a local folder (an rl-smith folder, a plugin's source)
    bench = get_benchmark(task)(dict(benchmark_options or {}))
    be = get_backend(backend or default_backend())()
    resolved = resolve_model(model)
    data = prepare_data(bench)
    base_cfg = bench.config()
    records = []
    try:
        for i in range(repeats):
            bench.eval_config = base_cfg.replace(seed=base_cfg.seed + i)  # type: ignore[misc]
            rec = evaluate_model(
                bench, be, resolved.path, split=split, hidden_dir=data.hidden_dir, limit=limit, keep_loaded=True
            )
            say(f"repeat {i + 1}/{repeats}: {rec.score:.2f}")
            records.append(rec)
    finally:
        be.release()
    scores = [float(r.score) for r in records]
    greedy = base_cfg.temperature == 0 and base_cfg.num_samples == 1
    out: NoiseRecord = {
        "task": task,
        "model": model,
        "split": split,
        "limit": limit,
        "backend": be.name,
        "repeats": repeats,
        "greedy": greedy,
        "seeds": [base_cfg.seed + i for i in range(repeats)],
        "scores": scores,
        # equal scores item by item, not only on average
        "deterministic": all(r.item_scores == records[0].item_scores for r in records),
        **spread(scores),
        "config_hash": records[0].config_hash,
    }
    write_json_atomic(noise_path(home, task, model, split), out, mode=0o644)
    return out


def read_floor(home: Path, task: str, model: str, split: str = "dev") -> NoiseFloor | None:
    """The kept floor of ``model`` on ``task`` (``sd``, ``range``, ``repeats``, ``deterministic``), or None."""
    import json

    try:
        data = json.loads(noise_path(home, task, model, split).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    # the figures as the file holds them (written by noise_floor; None where one is missing)
    return {
        "sd": data.get("sd"),
        "range": data.get("range"),
        "repeats": data.get("repeats"),
        "deterministic": data.get("deterministic"),
        "greedy": data.get("greedy"),
        "mean": data.get("mean"),
        "config_hash": data.get("config_hash"),
    }
