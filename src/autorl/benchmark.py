"""The benchmark contract: what the agent may see, what only the grader holds, and how answers score."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from autorl.evaluation.base import Evaluator



@dataclass(frozen=True)
class Item:
    """One evaluation item: a stable id, the fields the prompt template uses, and the reference answer."""

    id: str
    input: Mapping[str, Any]
    reference: Any = None


@dataclass(frozen=True)
class EvalConfig:
    """How the grader prompts and decodes; part of the config hash, and told to the agent verbatim.

    ``few_shot`` holds (prompt, answer) pairs already in the template's shape. In completion mode the
    prompt is ``prompt + answer + few_shot_separator`` for each example, then the item's prompt; in chat
    mode each example becomes a user/assistant turn.
    """

    prompt_template: str = "{question}"
    few_shot: tuple[tuple[str, str], ...] = ()
    few_shot_separator: str = "\n\n"
    chat_template: bool = False
    system_prompt: str | None = None
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    num_samples: int = 1
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> EvalConfig:
        return dataclasses.replace(self, **changes)

    def render(self, fields: Mapping[str, Any]) -> str | list[dict[str, str]]:
        """The exact prompt for one item: a string, or chat messages when ``chat_template`` is set."""
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


@dataclass
class BenchmarkInfo:
    """What ``GET /-/benchmarks`` and ``autorl list benchmarks`` show."""

    name: str
    version: str
    splits: tuple[str, ...]
    summary: str
    extra: dict[str, Any] = field(default_factory=dict)


class Benchmark(ABC):
    """Base class of every benchmark plugin.

    Subclasses set ``name`` and ``version`` and implement the data and scoring methods. Data the agent
    may see goes through :meth:`prepare_train_data`; evaluation data only ever lives in the grader's
    ``hidden_dir`` and is read through :meth:`load_items`.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    #: Hidden splits: ``dev`` is the feedback the agent gets from ``/submit``, ``test`` the final score.
    splits: ClassVar[tuple[str, ...]] = ("dev", "test")
    eval_config: ClassVar[EvalConfig] = EvalConfig()

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options: dict[str, Any] = dict(options or {})

    @property
    def single_split(self) -> bool:
        """A benchmark too small to split scores dev and test on the same items, and says so."""
        return len(self.splits) == 1

    def config(self) -> EvalConfig:
        """The evaluation config in force (options such as ``chat_template`` may change it)."""
        cfg = self.eval_config
        if "chat_template" in self.options:
            cfg = cfg.replace(chat_template=bool(self.options["chat_template"]))
        return cfg

    def description(self) -> str:
        """Markdown for the agent: the task, data format, metric. Written to ``description.md``."""
        return (type(self).__doc__ or self.name).strip()

    def summary(self) -> str:
        return self.description().strip().splitlines()[0].lstrip("# ")

    def info(self) -> BenchmarkInfo:
        return BenchmarkInfo(self.name, self.version, self.splits, self.summary())

    @abstractmethod
    def prepare_train_data(self, target_dir: Path) -> None:
        """Write the agent-visible training data into ``target_dir``. Idempotent."""

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        """Write the hidden evaluation data into the grader-owned ``hidden_dir``. Idempotent."""

    @abstractmethod
    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        """The hidden items of ``split`` (one of ``splits``), in a fixed order."""

    def prompt(self, item: Item) -> str | list[dict[str, str]]:
        """The exact prompt the grader sends for ``item``."""
        return self.config().render(item.input)

    @abstractmethod
    def score(self, item: Item, completion: str) -> float:
        """The score of one completion for ``item``, in [0, 1]."""

    def evaluator(self) -> Evaluator:
        """How items become scores; the generation evaluator unless the benchmark is interactive."""
        from autorl.evaluation.generation import GenerationEvaluator

        return GenerationEvaluator()

    def exposed_files(self) -> dict[str, Path]:
        """Extra files linked (read-only) into the workspace: name there -> source path."""
        return {}

    def hidden_paths(self) -> list[Path]:
        """Installed files that hold evaluation data, which the sandbox must mask."""
        return []

    def identity(self) -> dict[str, Any]:
        """Settings outside :class:`EvalConfig` that move scores (episode limits, judge, data source...);
        part of the eval-config hash."""
        return {}
