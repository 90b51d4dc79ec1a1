"""Evaluators, statistics and the one evaluation path shared by baselines and submissions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autorl.evaluation.generation import GenerationEvaluator

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.scoring import Evaluator

__all__ = ["evaluator_for"]


def evaluator_for(benchmark: Benchmark) -> Evaluator:
    """The evaluator that scores ``benchmark``: the one it names in :meth:`~autorl.benchmark.Benchmark.evaluator`,
    else the generation evaluator (prompt -> completions -> :meth:`~autorl.benchmark.Benchmark.score`)."""
    return benchmark.evaluator() or GenerationEvaluator()
