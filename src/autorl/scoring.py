"""What scoring is made of, below both the benchmark and the evaluation engine.

A benchmark hands an evaluator its items (:class:`Item`), its eval config (:class:`EvalConfig`) and its scoring
(:class:`Scorer`, which every :class:`autorl.Benchmark` is); an :class:`Evaluator` hands back one
:class:`ItemResult` an item. :mod:`autorl.benchmark` and :mod:`autorl.evaluation` both import these from here,
so that a benchmark names its evaluator without importing the engine.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from autorl.inference.base import Decoding, GenerationRequest

if TYPE_CHECKING:
    from autorl.inference.base import Backend

#: ``progress(k)``: k more items are done.
Progress = Callable[[int], None]


@dataclass(frozen=True)
class Item:
    """One evaluation item: a stable id, the fields the prompt template uses, and the reference answer."""

    id: str
    input: Mapping[str, Any]
    reference: Any = None


@dataclass(frozen=True)
class EvalConfig(Decoding):
    """How the grader prompts and decodes; part of the config hash, and told to the agent verbatim.

    ``few_shot`` holds (prompt, answer) pairs already in the template's shape. In completion mode the
    prompt is ``prompt + answer + few_shot_separator`` for each example, then the item's prompt; in chat
    mode each example becomes a user/assistant turn. The decoding settings (``max_new_tokens``,
    ``temperature``, ``top_p``, ``stop``, ``seed``) are :class:`~autorl.inference.base.Decoding`'s, and
    ``num_samples`` completions are scored per item; those are keyword-only.
    """

    prompt_template: str = "{question}"
    few_shot: tuple[tuple[str, str], ...] = ()
    few_shot_separator: str = "\n\n"
    chat_template: bool = False
    system_prompt: str | None = None
    _: KW_ONLY
    num_samples: int = 1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> EvalConfig:
        return dataclasses.replace(self, **changes)

    def render(self, fields: Mapping[str, Any]) -> str | list[dict[str, str]]:
        """The exact prompt for one item (``fields``: its ``input``): a string, or chat messages when
        ``chat_template`` is set. The grader prompts with it and ``instructions.md`` shows it to the agent."""
        text = self.prompt_template.format_map(fields)
        if not self.chat_template:
            shots = "".join(p + a + self.few_shot_separator for p, a in self.few_shot)
            return (self.system_prompt + "\n\n" if self.system_prompt else "") + shots + text
        messages: list[dict[str, str]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        for p, a in self.few_shot:
            messages += [{"role": "user", "content": p.strip()}, {"role": "assistant", "content": a.strip()}]
        messages.append({"role": "user", "content": text.strip()})
        return messages

    def request(self, prompt: str | list[dict[str, str]], n: int = 1) -> GenerationRequest:
        """The backend request for ``prompt`` (from :meth:`render`, or an episode's turn) with these decoding
        settings and ``n`` completions."""
        decoding = {f.name: getattr(self, f.name) for f in dataclasses.fields(Decoding)}
        return GenerationRequest(prompt, n=n, **decoding)


class Scorer(Protocol):
    """What an evaluator uses of a benchmark: its name, the eval config in force and its scoring.

    Every :class:`autorl.Benchmark` is one; an evaluator that needs more (an interactive benchmark's
    environments) checks for it with ``isinstance``.
    """

    @property
    def name(self) -> str: ...

    def config(self) -> EvalConfig: ...

    def score(self, item: Item, completion: str) -> float: ...


@dataclass
class ItemResult:
    """The outcome of one item. A scoring error is recorded here with a score of 0, never raised."""

    id: str
    score: float
    completions: list[str] = field(default_factory=list)
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Evaluator(ABC):
    """Turns items into per-item results with a backend that already holds the model."""

    @abstractmethod
    def evaluate(
        self, benchmark: Scorer, items: Sequence[Item], backend: Backend, progress: Progress | None = None
    ) -> list[ItemResult]:
        """Evaluate ``items`` in order; call ``progress(k)`` as k more items finish."""

    def summary(self, results: Sequence[ItemResult]) -> dict[str, Any]:
        """Figures over all items besides the mean score (e.g. a success rate), kept in the record's ``extra``."""
        return {}
