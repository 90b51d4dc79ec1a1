"""The benchmark contract: what the agent may see, what only the grader holds, and how answers score.

A plugin author subclasses :class:`Benchmark`; every public member below is something the author sets,
overrides or calls, and docs/plugins/benchmarks.md describes each. The types a benchmark hands the evaluation
engine (:class:`~autorl.scoring.Item`, :class:`~autorl.scoring.EvalConfig`) live in :mod:`autorl.scoring`, and
the hidden items' storage in :mod:`autorl.hidden`, so that this module imports neither the engine nor anything
above it.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from autorl.errors import UsageError
from autorl.hidden import items_digest, read_hidden_items
from autorl.scoring import EvalConfig, Item

#: what an option accepts: a type (``bool``, ``int``, ``float``, ``str``) or a tuple of the accepted values
OptionKind = type | tuple[Any, ...]
#: the option every benchmark takes (:meth:`Benchmark.config` applies it)
_COMMON: dict[str, OptionKind] = {"chat_template": bool}


def _accepts(kind: OptionKind, value: Any) -> bool:
    if isinstance(kind, tuple):
        return any(value == v and type(value) is type(v) for v in kind)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _describe(kind: OptionKind) -> str:
    if isinstance(kind, tuple):
        return "one of " + ", ".join(json.dumps(v) for v in kind)
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(kind, kind.__name__)


def check_options(benchmark: str, declared: Mapping[str, OptionKind] | None, options: Mapping[str, Any]) -> None:
    """Refuse (:class:`UsageError`, one line naming the option and what is accepted) an option ``benchmark``
    does not declare, or a value it does not accept."""
    known = {**(declared or {}), **_COMMON}
    for key, value in options.items():
        kind = known.get(key)
        if kind is None:
            if declared is None:
                continue
            import difflib

            close = difflib.get_close_matches(key, list(known), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UsageError(
                f"--benchmark-option {key}: {benchmark} has no such option{hint}; it takes {', '.join(sorted(known))}"
            )
        if not _accepts(kind, value):
            raise UsageError(
                f"--benchmark-option {key}={json.dumps(value)}: {benchmark} takes {_describe(kind)} for {key}"
            )


if TYPE_CHECKING:
    from autorl.scoring import Evaluator


class Benchmark(ABC):
    """Base class of every benchmark plugin.

    Set ``name`` and ``version`` (and, where the defaults do not fit, ``splits``, ``eval_config``, ``dev_public``,
    ``public_splits``); implement :meth:`prepare_train_data`, :meth:`prepare_eval_data` and :meth:`score`;
    override the other methods where the benchmark needs it. Read ``options`` (``--benchmark-option``) and
    ``hidden_dir`` (the grader's folder) in your methods.

    Data the agent may see goes through :meth:`prepare_train_data`; evaluation data only ever lives in the
    grader's ``hidden_dir``. The hidden-items contract (checked by :func:`autorl.testing.check_hidden_items_secret`):
    :meth:`prepare_eval_data` writes the items there (:func:`autorl.write_hidden_items`), choosing them with the
    installation's secret (:func:`autorl.secret_rng`), so that neither the installed package, the agent's data
    nor a public copy of the source data computes them; :meth:`load_items` only reads them back and raises
    :class:`~autorl.errors.HiddenDataError` (one line) when the folder lacks them. The config hash includes
    :meth:`hidden_items_hash`, so scores on items drawn with different secrets are never paired or pooled.
    """

    #: The unique name the benchmark is registered and run under (``autorl run --task NAME``).
    name: ClassVar[str]
    #: Bump whenever data or scoring change: part of the config hash, so old and new scores never mix.
    version: ClassVar[str] = "1"
    #: Hidden splits: ``dev`` is the feedback the agent gets from ``/submit``, ``test`` the final score. A
    #: benchmark too small to split sets ``("test",)``: dev and test are then the same items, and flagged so.
    splits: ClassVar[tuple[str, ...]] = ("dev", "test")
    #: How the grader prompts and decodes (read through :meth:`config`).
    eval_config: ClassVar[EvalConfig] = EvalConfig()
    #: True where the dev split is by nature recoverable from public data the agent may hold (GSM8K's dev
    #: slice is part of the public train set): an overlap of the agent's data with dev then proves no leak.
    dev_public: ClassVar[bool] = False
    #: Splits that are a published data set as it stands (GSM8K's official test set): the same under every
    #: secret. Every other hidden split is drawn with the secret.
    public_splits: ClassVar[tuple[str, ...]] = ()
    #: The options it takes (``--benchmark-option KEY=VALUE``): each name with what it accepts, a type (``bool``,
    #: ``int``, ``float``, ``str``) or a tuple of the accepted values. Any other name, or a value it does not
    #: accept, is refused before anything starts. ``chat_template`` (a bool) is always taken. None: not
    #: declared, any name is taken (its values unchecked, but ``chat_template``'s).
    declared_options: ClassVar[Mapping[str, OptionKind] | None] = None

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        #: The benchmark's options (``--benchmark-option KEY=VALUE``, values parsed as JSON).
        self.options: dict[str, Any] = dict(options or {})
        check_options(type(self).__dict__.get("name", type(self).__name__), self.declared_options, self.options)
        #: The grader's hidden folder for this benchmark, set by the harness before it prepares the data and
        #: before it evaluates: for training data that must leave out items drawn with the secret (GSM8K's dev
        #: slice), or for files beside the items (a catalog, a judge's cache). ``None`` until then.
        self.hidden_dir: Path | None = None

    def config(self) -> EvalConfig:
        """The evaluation config in force: ``eval_config``, with option ``chat_template`` applied. Override it
        where options change prompting or decoding; the grader, the agent's ``instructions.md`` and the config
        hash all read it, and the prompt of an item is ``config().render(item.input)``."""
        cfg = self.eval_config
        if "chat_template" in self.options:
            cfg = cfg.replace(chat_template=bool(self.options["chat_template"]))
        return cfg

    def description(self) -> str:
        """Markdown for the agent: the task, data format, metric. Written to ``description.md``."""
        return (type(self).__doc__ or self.name).strip()

    @abstractmethod
    def prepare_train_data(self, target_dir: Path) -> None:
        """Write the agent-visible training data into ``target_dir``. Idempotent."""

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        """Write the hidden evaluation data into the grader-owned ``hidden_dir``, drawn with the installation's
        secret (:func:`autorl.secret_rng`), with :func:`autorl.write_hidden_items`. Idempotent: existing items
        are kept."""

    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        """The hidden items of ``split`` (one of ``splits``), in a fixed order, read from ``hidden_dir`` only;
        :class:`~autorl.errors.HiddenDataError` when it does not hold them. By default the items
        :meth:`prepare_eval_data` stored with :func:`autorl.write_hidden_items`; override it only where the
        items are other files (ALFWorld's games)."""
        return read_hidden_items(self.name, hidden_dir, split)

    def hidden_items_hash(self, split: str, hidden_dir: Path) -> str:
        """A hash of ``split``'s hidden items (ids and content); part of the config hash. Override it where
        items name paths in the hidden folder, to hash what they point at instead."""
        return items_digest(self.load_items(split, hidden_dir))

    @abstractmethod
    def score(self, item: Item, completion: str) -> float:
        """The score of one completion for ``item``, in [0, 1]."""

    def evaluator(self) -> Evaluator | None:
        """How items become scores: an :class:`~autorl.Evaluator`, or ``None`` (the default) for the generation
        evaluator (prompt -> completions -> :meth:`score`), which the engine then picks. Interactive benchmarks
        return an ``EpisodeEvaluator``; benchmarks that score in another process or with a judge return their
        own."""
        return None

    def exposed_files(self) -> dict[str, Path]:
        """Extra files linked (read-only) into the workspace: name there -> source path."""
        return {}

    def hidden_paths(self) -> list[Path]:
        """Installed files and local mirrors (``AUTORL_DATA_DIR`` and the like) that hold evaluation data, which
        the sandbox must mask."""
        return []

    def agent_paths(self) -> list[Path]:
        """Files (or folders) of the benchmark's own that the agent's process may read, e.g. to load the
        benchmark itself for its prompt and answer checking: shown read-only in the sandbox at the same path,
        over every mask (:meth:`hidden_paths` included), so list only what holds no evaluation data."""
        return []

    def agent_env(self) -> dict[str, str]:
        """Variables the agent's process gets, e.g. where to find :meth:`agent_paths`. The harness's variables
        (the environment contract, the agent's, the operator's) win over them, and the agent's environment is
        scrubbed after (:func:`autorl.gateway.agent_env.scrub`): no credential, upstream key, hidden-item
        secret or harness ``AUTORL_*`` setting passes through them."""
        return {}

    def identity(self) -> dict[str, Any]:
        """Settings outside :class:`~autorl.EvalConfig` that move scores (episode limits, judge, data source...);
        part of the eval-config hash."""
        return {}
