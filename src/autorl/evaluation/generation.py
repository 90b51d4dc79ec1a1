"""The generation evaluator: prompt -> completions -> the benchmark's scoring."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from autorl.evaluation.base import Evaluator, ItemResult, Progress, safe_score
from autorl.inference.base import GenerationRequest

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark, Item
    from autorl.inference.base import Backend


class GenerationEvaluator(Evaluator):
    """Single-turn evaluation: every item's prompt goes to the backend in one batched call per chunk."""

    def __init__(self, chunk_size: int = 1024) -> None:
        self.chunk_size = chunk_size

    def evaluate(
        self,
        benchmark: Benchmark,
        items: Sequence[Item],
        backend: Backend,
        progress: Progress | None = None,
    ) -> list[ItemResult]:
        cfg = benchmark.config()
        results: list[ItemResult] = []
        for start in range(0, len(items), self.chunk_size):
            chunk = items[start : start + self.chunk_size]
            requests = [
                GenerationRequest(
                    prompt=benchmark.prompt(item),
                    max_new_tokens=cfg.max_new_tokens,
                    temperature=cfg.temperature,
                    top_p=cfg.top_p,
                    stop=cfg.stop,
                    n=cfg.num_samples,
                    seed=cfg.seed,
                )
                for item in chunk
            ]
            completions = backend.generate(requests)
            for item, completion in zip(chunk, completions, strict=True):
                score, error = safe_score(benchmark, item, completion.texts)
                results.append(
                    ItemResult(
                        item.id,
                        score,
                        completion.texts,
                        error,
                        {"output_tokens": completion.output_tokens},
                    )
                )
            if progress:
                progress(len(chunk))
        return results
