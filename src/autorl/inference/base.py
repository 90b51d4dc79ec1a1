"""The backend contract: batched generation over a full checkpoint or a LoRA adapter on the base."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt (text, or chat messages to render with the tokenizer's chat template)."""

    prompt: str | list[dict[str, str]]
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    n: int = 1
    seed: int = 0


@dataclass
class Completion:
    """The ``n`` texts generated for one request, each cut before its first stop string."""

    texts: list[str]
    output_tokens: int = 0
    finish_reasons: list[str] = field(default_factory=list)


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` before the earliest stop string; whether one was found."""
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def render_prompt(tokenizer: Any, prompt: str | list[dict[str, str]]) -> str:
    """The prompt's text: itself, or chat messages rendered by the tokenizer's chat template."""
    if isinstance(prompt, str):
        return prompt
    if not getattr(tokenizer, "chat_template", None):
        from autorl.errors import InvalidCheckpointError

        raise InvalidCheckpointError("the benchmark asks for a chat template but the tokenizer has none")
    text: str = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    return text


def prompt_token_ids(tokenizer: Any, prompt: str | list[dict[str, str]]) -> list[int]:
    """The token ids every backend feeds the model for ``prompt``: one tokenization for all of them.

    The rendered text is tokenized as it is, with no special tokens added (``add_special_tokens=False``,
    as transformers' own ``apply_chat_template`` and TRL's trainers do): a chat template writes its own BOS,
    and a tokenizer that would add one to a text prompt does not add it twice or only in some backends.
    """
    ids = tokenizer(render_prompt(tokenizer, prompt), add_special_tokens=False)["input_ids"]
    return [int(i) for i in ids]


def is_adapter(model_dir: Path) -> bool:
    return (model_dir / "adapter_config.json").is_file()


class Backend(ABC):
    """Base class of inference backends. Load a model, generate batches, unload.

    ``trust_remote_code`` is never enabled by any backend.
    """

    name: ClassVar[str]

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options: dict[str, Any] = dict(options or {})
        #: the checkpoint being evaluated (set by the evaluation path), for evaluators that need the files
        self.model_dir: Path | None = None

    @classmethod
    def available(cls) -> bool:
        """Whether this backend can run here (its libraries import, its hardware is present)."""
        return True

    @abstractmethod
    def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
        """Load ``model_dir``; when it is a LoRA adapter, apply it to ``base_model_dir``."""

    @abstractmethod
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """One completion per request, in request order."""

    def unload(self) -> None:
        """Free the model."""

    def identity(self) -> dict[str, Any]:
        """What about this backend can change scores (library versions, dtype); enters the config hash."""
        return {"name": self.name}
