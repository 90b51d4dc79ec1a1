"""The backend contract: batched generation over a full checkpoint or a LoRA adapter on the base.

A backend may also be kept loaded between evaluations (a warm grader worker): :meth:`Backend.acquire` makes a
model the loaded one, reusing the engine when it holds that model already, swapping the weights in place when
the backend knows how (:meth:`Backend.swap`), else unloading and loading afresh; every cache computed with
the previous weights is dropped first (:meth:`Backend.reset_caches`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

if TYPE_CHECKING:  # typing has it from Python 3.11; annotations are never evaluated here (``from __future__``)
    from typing import NotRequired


@dataclass(frozen=True, kw_only=True)
class Decoding:
    """How completions are decoded (keyword-only), defined once for a benchmark's setting
    (:class:`~autorl.scoring.EvalConfig`, which copies it into each request) and one backend call
    (:class:`GenerationRequest`); here, so that the backend contract stays free of the benchmark's types."""

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int = 0


@dataclass(frozen=True)
class GenerationRequest(Decoding):
    """One prompt (text, or chat messages to render with the tokenizer's chat template), decoded ``n`` times."""

    prompt: str | list[dict[str, str]]
    _: KW_ONLY
    n: int = 1


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


#: the file that makes a checkpoint folder a (peft) adapter on a base model
ADAPTER_CONFIG = "adapter_config.json"


def is_adapter(model_dir: Path) -> bool:
    """Whether ``model_dir`` holds an adapter (to apply to a base model) rather than a full model."""
    return (model_dir / ADAPTER_CONFIG).is_file()


#: How an evaluation got its model: a new engine, the engine that already held these weights, or new weights
#: swapped into the running engine.
FRESH, REUSED, RELOADED = "fresh", "reused", "reloaded"

#: config.json keys that never change what a model computes (written by the saving library, or speed only)
_INERT_CONFIG_KEYS = frozenset({"_name_or_path", "transformers_version", "use_cache", "torch_dtype", "dtype"})


def shape_config(model_dir: Path, *, with_dtype: bool) -> dict[str, Any] | None:
    """``config.json`` less the keys that cannot change outputs: equal for two checkpoints whose weights may be
    swapped into one engine (architecture, shapes, vocabulary size, rope, norms). ``None`` when unreadable.

    The dtype counts where the engine takes it from the checkpoint (``with_dtype``); the hf backend casts to
    the dtype of its options whatever the file says.
    """
    try:
        raw = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    config = {k: v for k, v in raw.items() if k not in _INERT_CONFIG_KEYS}
    if with_dtype:
        config["dtype"] = raw.get("dtype", raw.get("torch_dtype"))
    return config


def fingerprint(model_dir: Path, base_model_dir: Path | None = None) -> tuple[Any, ...]:
    """What tells that the same files are loaded again: the resolved paths and each file's size, mtime and
    inode. Grader snapshots are never modified, so an equal fingerprint means equal bytes without hashing them."""

    def files(folder: Path | None) -> tuple[Any, ...]:
        if folder is None:
            return ()
        rows = []
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if entry.is_file():
                st = entry.stat()
                rows.append((entry.name, st.st_size, st.st_mtime_ns, st.st_ino))
        return (str(folder.resolve()), tuple(rows))

    return files(model_dir), files(base_model_dir if is_adapter(model_dir) else None)


class GpuTurn(TypedDict):
    """What an engine start's turn on its GPUs was (:func:`autorl.inference.gpu_share.engine_start`)."""

    #: the GPUs locked (none: a process without a GPU)
    gpus: list[str]
    #: seconds waited for the locks
    wait_s: float
    #: why a lock file could not be opened (the start went on unserialised)
    unlocked: NotRequired[str]


class StartLock(GpuTurn):
    """A backend's last turn on its GPUs (:attr:`Backend.last_start_lock`), in an evaluation record's ``extra``
    as ``gpu_turn``."""

    #: ``start`` or ``wake``
    what: str


class EngineRestart(Exception):
    """This process already had an engine and the backend starts at most one per process
    (:meth:`Backend.engine_per_process`): the evaluation must run in a fresh worker process."""


class Backend(ABC):
    """Base class of inference backends. Load a model, generate batches, unload.

    ``trust_remote_code`` is never enabled by any backend.
    """

    name: ClassVar[str]
    # class-level defaults too, for backends whose ``__init__`` does not call this one
    scratch_dir: Path | None = None
    _loaded: tuple[Any, ...] | None = None
    _asleep: bool = False
    _engines_started: int = 0
    #: seconds the last :meth:`wake` (in :meth:`acquire`) and the last :meth:`sleep` (in :meth:`idle`) took
    last_wake_s: float | None = None
    last_sleep_s: float | None = None
    #: the last engine start's or wake's wait for its GPUs (:func:`autorl.inference.gpu_share.engine_start`)
    last_start_lock: StartLock | None = None
    #: takes the GPU's turn around an engine start or wake, given a note (the evaluation layer sets
    #: :func:`autorl.inference.gpu_share.gpu_turn`); None: starts as they come
    gpu_turn: Callable[[str], AbstractContextManager[GpuTurn]] | None = None
    #: why the last :meth:`swap` refused (set by the backend's swap), and why the last :meth:`acquire` started a
    #: fresh engine though one was loaded
    swap_refusal: str | None = None
    last_fresh_reason: str | None = None

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options: dict[str, Any] = dict(options or {})
        #: the checkpoint being evaluated (set by the evaluation path), for evaluators that need the files
        self.model_dir: Path | None = None
        #: a private folder the backend may keep files in between evaluations (a warm grader worker sets it)
        self.scratch_dir: Path | None = None
        self._loaded: tuple[Any, ...] | None = None
        self._asleep = False

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

    def swap(self, model_dir: Path, base_model_dir: Path | None = None) -> bool:
        """Put ``model_dir``'s weights into the engine already loaded, in place, and re-read its tokenizer and
        generation settings. ``False`` (the default) when this backend cannot, or when the checkpoint differs
        in architecture, shapes, vocabulary or dtype: then it is unloaded and loaded afresh. Called only after
        :meth:`load`; must leave the engine as it was, or report failure by raising."""
        return False

    def reset_caches(self) -> None:
        """Drop every cache computed with earlier weights or tokenizers (prefix/KV caches, token masks)."""

    def sleep(self) -> None:
        """Give accelerator memory back while idle between evaluations (only when the options ask for it)."""

    def wake(self) -> None:
        """Undo :meth:`sleep` before the next evaluation."""

    def engine_per_process(self) -> bool:
        """Whether this backend starts at most one engine per process: one whose library does not give all of
        an engine's memory back when it is unloaded. :meth:`acquire` then raises :class:`EngineRestart` instead
        of a second :meth:`load`, and a warm worker ends once its engine is freed. Option ``process_per_engine``."""
        return bool(self.options.get("process_per_engine", False))

    def holds_engine(self) -> bool:
        """Whether an engine is loaded (awake or asleep): the next :meth:`acquire` reuses it or swaps weights in."""
        return self._loaded is not None

    def spent(self) -> bool:
        """Whether this process may start no more engines for this backend (:meth:`engine_per_process`)."""
        return self.engine_per_process() and self._engines_started > 0 and self._loaded is None

    def keeps_engine(self) -> bool:
        """Whether :meth:`acquire` may keep the engine for the next model (reuse it, or :meth:`swap` weights in).
        ``False``: every evaluation gets a fresh engine, and :meth:`idle` frees it between evaluations. Option
        ``warm_engine`` (on)."""
        return bool(self.options.get("warm_engine", True))

    def acquire(self, model_dir: Path, base_model_dir: Path | None = None) -> str:
        """Make ``model_dir`` the loaded model, keeping the engine where possible; how: ``fresh``, ``reused`` or
        ``reloaded``. Caches are reset in every case, so nothing computed for one evaluation serves another."""
        key = fingerprint(model_dir, base_model_dir)
        self.last_wake_s = None
        self.last_fresh_reason = None  # this evaluation's own: an engine reused after a fresh start has none
        if self._loaded is not None and not self.keeps_engine():
            self.release()
        self.last_start_lock = None
        if self._loaded is not None:
            if self._asleep:
                with self._gpu_turn("wake"):
                    started = time.monotonic()
                    self.wake()
                self._asleep = False
                self.last_wake_s = time.monotonic() - started
            if key == self._loaded:
                self.reset_caches()
                return REUSED
            self._loaded = None
            self.swap_refusal = None
            if self.swap(model_dir, base_model_dir):
                self._loaded = key
                self.reset_caches()
                return RELOADED
            self.last_fresh_reason = self.swap_refusal or f"the {self.name} backend cannot swap these weights in"
            self.release()
        if self.spent():
            why = f": {self.last_fresh_reason}" if self.last_fresh_reason else ""
            raise EngineRestart(f"the {self.name} backend starts one engine per process{why}")
        self._engines_started += 1
        self.start(model_dir, base_model_dir)
        self._loaded = key
        self.reset_caches()
        return FRESH

    def start(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
        """:meth:`load`, in this GPU's turn: one engine starts (loads, measures memory, allocates its cache) at a
        time on each GPU, however many runs share it (:func:`autorl.inference.gpu_share.engine_start`)."""
        with self._gpu_turn("start"):
            self.load(model_dir, base_model_dir)

    @contextlib.contextmanager
    def _gpu_turn(self, what: str) -> Iterator[None]:
        if self.gpu_turn is None:
            yield
            return
        with self.gpu_turn(f"{self.name} {what} in pid {os.getpid()}") as info:
            if info["gpus"]:
                self.last_start_lock = {"what": what, **info}
            yield

    def idle(self) -> None:
        """Between evaluations of a warm worker: free an engine that is not kept (:meth:`keeps_engine`), or put
        it to sleep if the options ask for it (``sleep_when_idle``)."""
        if self._loaded is not None and not self.keeps_engine():
            self.release()
        elif self._loaded is not None and not self._asleep and self.options.get("sleep_when_idle"):
            started = time.monotonic()
            self.sleep()
            self._asleep = True
            self.last_sleep_s = time.monotonic() - started

    def release(self) -> None:
        """Unload, and forget what was loaded (the next :meth:`acquire` loads afresh)."""
        self._loaded = None
        self._asleep = False
        self.unload()

    def identity(self) -> dict[str, Any]:
        """What about this backend can change scores (library versions, dtype); enters the config hash."""
        return {"name": self.name}
