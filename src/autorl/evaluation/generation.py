"""The generation evaluator: prompt -> completions -> the benchmark's scoring; and which evaluator scores a benchmark."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from autorl.scoring import Evaluator, ItemResult

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.inference.base import Backend
    from autorl.scoring import Item, Progress, Scorer


def safe_score(benchmark: Scorer, item: Item, completions: Sequence[str]) -> tuple[float, str | None]:
    """Mean score over the completions; an exception becomes a recorded error and a score of 0."""
    try:
        scores = [float(benchmark.score(item, c)) for c in completions]
        value = sum(scores) / len(scores) if scores else 0.0
        if not 0.0 <= value <= 1.0:
            return 0.0, f"score {value!r} outside [0, 1]"
        return value, None
    except Exception as exc:
        return 0.0, f"{type(exc).__name__}: {exc}"


class GenerationEvaluator(Evaluator):
    """Single-turn evaluation: every item's prompt goes to the backend in one batched call per chunk."""

    def __init__(self, chunk_size: int = 1024) -> None:
        self.chunk_size = chunk_size

    def evaluate(
        self, benchmark: Scorer, items: Sequence[Item], backend: Backend, progress: Progress | None = None
    ) -> list[ItemResult]:
        cfg = benchmark.config()
        results: list[ItemResult] = []
        for start in range(0, len(items), self.chunk_size):
            chunk = items[start : start + self.chunk_size]
            requests = [cfg.request(cfg.render(item.input), cfg.num_samples) for item in chunk]
            for item, completion in zip(chunk, backend.generate(requests), strict=True):
                score, error = safe_score(benchmark, item, completion.texts)
                results.append(
                    ItemResult(item.id, score, completion.texts, error, {"output_tokens": completion.output_tokens})
                )
            if progress:
                progress(len(chunk))
        return results


def evaluator_for(benchmark: Benchmark) -> Evaluator:
    """The evaluator that scores ``benchmark``: the one it names in :meth:`~autorl.benchmark.Benchmark.evaluator`,
    else the generation evaluator (prompt -> completions -> :meth:`~autorl.benchmark.Benchmark.score`)."""
    return benchmark.evaluator() or GenerationEvaluator()
