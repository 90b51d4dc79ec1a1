"""The evaluator contract and the records it produces."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark, Item
    from autorl.inference.base import Backend

Progress = Callable[[int], None]


@dataclass
class ItemResult:
    """The outcome of one item. A scoring error is recorded here with a score of 0, never raised."""

    id: str
    score: float
    completions: list[str] = field(default_factory=list)
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Evaluator(ABC):
    """Turns items into per-item results with a backend that already holds the model."""

    @abstractmethod
    def evaluate(
        self,
        benchmark: Benchmark,
        items: Sequence[Item],
        backend: Backend,
        progress: Progress | None = None,
    ) -> list[ItemResult]:
        """Evaluate ``items`` in order; call ``progress(k)`` as k more items finish."""

    def summary(self, results: Sequence[ItemResult]) -> dict[str, Any]:
        """Figures over all items besides the mean score (e.g. a success rate), kept in the record's ``extra``."""
        return {}


def safe_score(benchmark: Benchmark, item: Item, completions: Sequence[str]) -> tuple[float, str | None]:
    """Mean score over the completions; an exception becomes a recorded error and a score of 0."""
    try:
        scores = [float(benchmark.score(item, c)) for c in completions]
        value = sum(scores) / len(scores) if scores else 0.0
        if not 0.0 <= value <= 1.0:
            return 0.0, f"score {value!r} outside [0, 1]"
        return value, None
    except Exception as exc:
        return 0.0, f"{type(exc).__name__}: {exc}"
