"""Evaluate one checkpoint exactly as the grader would: the entry point behind ``autorl.evaluate`` and ``autorl eval``.

Names (task, backend) are resolved here through the registry, the model and the benchmark's data are
acquired through :mod:`autorl.resources`, and the evaluation engine does the rest. The module is not called
``evaluate.py``: importing a submodule of that name would replace the function ``autorl.evaluate``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.errors import UsageError

if TYPE_CHECKING:
    from autorl.evaluation.run import EvalRecord


def evaluate(
    task: str,
    model: str,
    *,
    split: str = "dev",
    limit: int | None = None,
    backend: str | None = None,
    base_model: str | None = None,
    benchmark_options: Mapping[str, Any] | None = None,
    per_item_path: str | Path | None = None,
    per_item_dir: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> EvalRecord:
    """Evaluate the checkpoint ``model`` (local dir, hub id or built-in model) on ``split`` of ``task``.

    ``backend`` defaults to :func:`autorl.plugins.registry.default_backend`; ``base_model`` is the base of a LoRA
    adapter. Per-item records go to ``per_item_path``, or, without one, to
    ``per_item_dir/<task>-<split>-<model folder>.jsonl`` when ``per_item_dir`` is given, else nowhere.
    ``progress(done, total)`` is called as items finish. Bad input is a :class:`autorl.errors.UsageError`
    (or the registry's unknown-name error).
    """
    from autorl.evaluation.run import evaluate_model
    from autorl.plugins.registry import default_backend, get_backend, get_benchmark, resolve_task
    from autorl.resources import prepare_data, resolve_model

    if limit is not None and limit <= 0:
        raise UsageError(f"limit must be positive, not {limit}")
    task = resolve_task(task)  # a name, or a local folder (an rl-smith folder, a plugin's source)
    bench = get_benchmark(task)(dict(benchmark_options or {}))
    be = get_backend(backend or default_backend())()
    resolved = resolve_model(model)
    base = resolve_model(base_model).path if base_model else None
    data = prepare_data(bench)
    items: Path | None = Path(per_item_path) if per_item_path is not None else None
    if items is None and per_item_dir is not None:
        items = per_item_dir / f"{task}-{split}-{resolved.path.name}.jsonl"
    return evaluate_model(
        bench,
        be,
        resolved.path,
        split=split,
        hidden_dir=data.hidden_dir,
        base_model_dir=base,
        limit=limit,
        per_item_path=items,
        progress=progress,
    )
