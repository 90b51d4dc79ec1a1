"""The episode evaluator: many multi-turn environments stepped in lockstep, one batched call a turn."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from autorl.scoring import EvalConfig, Evaluator, ItemResult

if TYPE_CHECKING:
    from collections.abc import Mapping

    from autorl.benchmark import OptionKind
    from autorl.inference.base import Backend
    from autorl.scoring import Item, Progress, Scorer


@dataclass
class StepResult:
    """What one action led to: the next observation, the reward so far (1.0 once won), whether the episode ended."""

    observation: str
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


class Environment(ABC):
    """One episode of an interactive benchmark."""

    @abstractmethod
    def reset(self) -> str:
        """Start the episode; the first observation."""

    @abstractmethod
    def step(self, action: str) -> StepResult:
        """Apply the model's action."""

    def close(self) -> None:
        """Release the episode's resources."""


def episode_steps(history: list[tuple[str, str]], observation: str) -> list[tuple[str, str]]:
    """(action, the observation it led to) for each turn so far: the evaluator's history holds (observation
    before, action) pairs, and ``observation`` is what followed the last action."""
    after = [h[0] for h in history[1:]] + ([observation] if history else [])
    return list(zip([a for _, a in history], after, strict=True))


class EpisodeBenchmark(ABC):
    """What a benchmark provides to be evaluated episode by episode (mix into a Benchmark, and return an
    :class:`EpisodeEvaluator` from its ``evaluator()``).

    The options every episode benchmark takes are :attr:`EPISODE_OPTIONS`: declare them among its own, read
    them with :meth:`read_episode_options` in ``__init__`` and return :meth:`episode_config` from ``config()``.
    """

    #: ``max_steps`` and ``examples`` (read into :attr:`max_steps` and :attr:`n_examples` by
    #: :meth:`read_episode_options`), ``chat`` and ``max_new_tokens`` (applied by :meth:`episode_config`):
    #: ``declared_options = {**EpisodeBenchmark.EPISODE_OPTIONS, ...the benchmark's own}``.
    EPISODE_OPTIONS: ClassVar[Mapping[str, OptionKind]] = MappingProxyType(
        {"chat": bool, "max_new_tokens": int, "max_steps": int, "examples": int}
    )
    #: Turns an episode may take before it ends unfinished (option ``max_steps``; this is its default).
    max_steps: int = 50
    #: Solved examples in each prompt (option ``examples``; this is its default).
    n_examples: int = 0
    # a Benchmark's, which an episode benchmark also is: what the two helpers below read
    options: dict[str, Any]
    eval_config: ClassVar[EvalConfig]

    def read_episode_options(self) -> None:
        """Set :attr:`max_steps` and :attr:`n_examples` from options ``max_steps`` and ``examples`` (the class's
        values are the defaults)."""
        self.max_steps = int(self.options.get("max_steps", self.max_steps))
        self.n_examples = int(self.options.get("examples", self.n_examples))

    def episode_config(self) -> EvalConfig:
        """``eval_config`` with the chat template as option ``chat`` (or the harness's ``chat_template``) says
        (default: not applied) and option ``max_new_tokens`` (default: ``eval_config``'s)."""
        chat = bool(self.options.get("chat_template", self.options.get("chat", False)))
        tokens = int(self.options.get("max_new_tokens", self.eval_config.max_new_tokens))
        return self.eval_config.replace(chat_template=chat, max_new_tokens=tokens)

    @abstractmethod
    def make_env(self, item: Item) -> Environment:
        """A fresh environment for one item."""

    @abstractmethod
    def episode_prompt(
        self, item: Item, history: list[tuple[str, str]], observation: str
    ) -> str | list[dict[str, str]]:
        """The prompt for the next action, given (observation, action) history and the new observation:
        text, or chat messages when the benchmark's config uses the chat template."""

    def parse_action(self, completion: str) -> str:
        """The action in the model's completion (by default the completion, stripped)."""
        return completion.strip()


@dataclass
class _Episode:
    item: Item
    env: Environment
    observation: str
    history: list[tuple[str, str]] = field(default_factory=list)
    reward: float = 0.0
    done: bool = False
    error: str | None = None


class EpisodeEvaluator(Evaluator):
    """Steps every unfinished episode once per turn, batching all of their model calls together."""

    def evaluate(
        self, benchmark: Scorer, items: Sequence[Item], backend: Backend, progress: Progress | None = None
    ) -> list[ItemResult]:
        if not isinstance(benchmark, EpisodeBenchmark):
            raise TypeError(f"{benchmark.name} does not implement EpisodeBenchmark")
        cfg = benchmark.config()
        episodes: list[_Episode] = []
        for item in items:
            try:
                env = benchmark.make_env(item)
                episodes.append(_Episode(item, env, env.reset()))
            except Exception as exc:
                episodes.append(_Episode(item, _NullEnv(), "", done=True, error=f"{type(exc).__name__}: {exc}"))
        for _turn in range(benchmark.max_steps):
            live = [e for e in episodes if not e.done]
            if not live:
                break
            requests = [cfg.request(benchmark.episode_prompt(e.item, e.history, e.observation)) for e in live]
            for episode, completion in zip(live, backend.generate(requests), strict=True):
                action = benchmark.parse_action(completion.texts[0] if completion.texts else "")
                try:
                    result = episode.env.step(action)
                except Exception as exc:
                    episode.done, episode.error = True, f"{type(exc).__name__}: {exc}"
                    continue
                episode.history.append((episode.observation, action))
                episode.observation = result.observation
                episode.reward = float(result.reward)
                episode.done = result.done
        out = []
        for e in episodes:
            e.env.close()
            out.append(
                ItemResult(
                    e.item.id,
                    min(max(e.reward, 0.0), 1.0) if e.error is None else 0.0,
                    [a for _, a in e.history],
                    e.error,
                    {"steps": len(e.history), "trajectory": [{"observation": o, "action": a} for o, a in e.history]},
                )
            )
        if progress:
            progress(len(items))
        return out


class _NullEnv(Environment):
    def reset(self) -> str:
        return ""

    def step(self, action: str) -> StepResult:
        return StepResult("", 0.0, True)
