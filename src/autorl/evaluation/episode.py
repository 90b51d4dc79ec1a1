"""The episode evaluator: many multi-turn environments stepped in lockstep, one batched call a turn."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autorl.scoring import Evaluator, ItemResult

if TYPE_CHECKING:
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
    :class:`EpisodeEvaluator` from its ``evaluator()``)."""

    #: Turns an episode may take before it ends unfinished.
    max_steps: int = 50

    @abstractmethod
    def make_env(self, item: Item) -> Environment:
        """A fresh environment for one item."""

    @abstractmethod
    def episode_prompt(self, item: Item, history: list[tuple[str, str]], observation: str) -> str | list[dict[str, str]]:
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

    def evaluate(self, benchmark: Scorer, items: Sequence[Item], backend: Backend,
                 progress: Progress | None = None) -> list[ItemResult]:
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
