"""The benchmark contract: what the agent may see, what only the grader holds, and how answers score.

A little over 300 lines because the hidden-items storage (the secret, ``write_hidden_items``,
``read_hidden_items``) is part of the contract every benchmark plugin imports from here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import os
import random
import secrets
import stat
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from autorl.errors import HiddenDataError, UsageError
from autorl.jsonio import write_text_atomic

if TYPE_CHECKING:
    from autorl.evaluation.base import Evaluator

#: An operator's hex secret that replaces every hidden folder's own (to rebuild a study's hidden items elsewhere).
HIDDEN_SECRET_ENV = "AUTORL_HIDDEN_SECRET"
_SECRET_BYTES = 32
_MAX_ITEMS_FILE = 1 << 30


def _read_secret_file(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise HiddenDataError(f"cannot read the hidden-data secret {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size != _SECRET_BYTES:
            raise HiddenDataError(f"{path} is not a {_SECRET_BYTES}-byte secret file; remove it to make a new one "
                                  "(the hidden items change with it)")
        return f.read()


def hidden_secret(hidden_dir: Path) -> bytes:
    """The installation's secret for this benchmark's hidden folder: ``AUTORL_HIDDEN_SECRET`` (hex, given by an
    operator to reproduce a study elsewhere) if set, else ``hidden_dir/secret`` (created at first use from
    ``secrets.token_bytes(32)``, mode 0600, atomically, race-safe)."""
    raw = os.environ.get(HIDDEN_SECRET_ENV, "").strip()
    if raw:
        try:
            given = bytes.fromhex(raw)
        except ValueError:
            raise UsageError(f"{HIDDEN_SECRET_ENV} must be hexadecimal (e.g. 64 hex digits)") from None
        if len(given) < 16:
            raise UsageError(f"{HIDDEN_SECRET_ENV} must hold at least 16 bytes (32 hex digits)")
        return given
    path = Path(hidden_dir) / "secret"
    try:
        return _read_secret_file(path)
    except FileNotFoundError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".secret.{os.getpid()}.{secrets.token_hex(8)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(_SECRET_BYTES))
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)  # atomic and never overwrites: a concurrent first use keeps the winner's
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        raise HiddenDataError(f"cannot create the hidden-data secret in {path.parent}: {exc.strerror or exc}") from None
    try:
        return _read_secret_file(path)
    except FileNotFoundError:
        raise HiddenDataError(f"the hidden-data secret {path} vanished while it was created") from None


def secret_rng(hidden_dir: Path, purpose: str) -> random.Random:
    """A ``random.Random`` seeded by HMAC-SHA256(secret, purpose): never computable without the secret."""
    digest = hmac.new(hidden_secret(hidden_dir), purpose.encode(), hashlib.sha256).digest()
    return random.Random(int.from_bytes(digest, "big"))



@dataclass(frozen=True)
class Item:
    """One evaluation item: a stable id, the fields the prompt template uses, and the reference answer."""

    id: str
    input: Mapping[str, Any]
    reference: Any = None


def items_digest(items: Iterable[Item]) -> str:
    """A hash of items' ids and content (input and reference), in order: two item sets that differ anywhere
    hash differently."""
    h = hashlib.sha256()
    for item in items:
        row = [item.id, dict(item.input), item.reference]
        h.update(json.dumps(row, sort_keys=True, default=str).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def hidden_items_path(hidden_dir: Path, split: str) -> Path:
    return Path(hidden_dir) / f"{split}.items.jsonl"


def _secret_tag(hidden_dir: Path) -> str:
    """Which secret is in force, as a keyed fingerprint (it reveals nothing about the secret)."""
    return hmac.new(hidden_secret(hidden_dir), b"autorl/hidden-items", hashlib.sha256).hexdigest()[:32]


def write_hidden_items(hidden_dir: Path, split: str, items: Sequence[Item]) -> None:
    """Store ``split``'s items in the grader-owned ``hidden_dir`` (one JSON object a line, mode 0600, atomic),
    with the fingerprint of the secret they were drawn with."""
    _write_private(hidden_items_path(hidden_dir, split).with_suffix(".secret"), _secret_tag(hidden_dir) + "\n")
    _write_private(hidden_items_path(hidden_dir, split), "".join(
        json.dumps({"id": item.id, "input": dict(item.input), "reference": item.reference}) + "\n"
        for item in items))


def _write_private(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_text_atomic(target, text, mode=0o600)


def has_hidden_items(hidden_dir: Path, split: str) -> bool:
    """Whether ``split``'s items are stored and were drawn with the secret now in force (an operator who sets
    ``AUTORL_HIDDEN_SECRET`` gets them drawn anew)."""
    path = hidden_items_path(hidden_dir, split)
    tag = path.with_suffix(".secret")
    if not path.is_file() or path.is_symlink() or not tag.is_file() or tag.is_symlink():
        return False
    try:
        return tag.read_text().strip() == _secret_tag(hidden_dir)
    except (OSError, UnicodeDecodeError):
        return False


def read_hidden_items(benchmark: str, hidden_dir: Path, split: str) -> list[Item]:
    """The items :func:`write_hidden_items` stored; a one-line :class:`HiddenDataError` when they are not there."""
    path = hidden_items_path(hidden_dir, split)
    missing = HiddenDataError(
        f"{benchmark}'s hidden {split} items are not in {hidden_dir}: only the grader's hidden folder "
        "holds them (the grader prepares them from the installation's secret)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        raise missing from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_ITEMS_FILE:
            raise missing
        text = f.read().decode("utf-8", errors="replace")
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            items.append(Item(str(row["id"]), dict(row["input"]), row.get("reference")))
        except (ValueError, KeyError, TypeError):
            raise HiddenDataError(f"{path}: line {n} is not a stored item; remove the file and prepare again") from None
    return items


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


class Benchmark(ABC):
    """Base class of every benchmark plugin.

    Subclasses set ``name`` and ``version`` and implement the data and scoring methods. Data the agent
    may see goes through :meth:`prepare_train_data`; evaluation data only ever lives in the grader's
    ``hidden_dir`` and is read through :meth:`load_items`.

    The hidden-items contract (checked by :func:`autorl.testing.check_hidden_items_secret`): hidden items exist
    only in grader-owned storage. :meth:`prepare_eval_data` writes them into ``hidden_dir``, choosing them with
    the installation's secret (:func:`secret_rng`), so that neither the installed package, the agent's data nor
    a public copy of the source data computes them; :meth:`load_items` only reads them back from there and
    raises :class:`~autorl.errors.HiddenDataError` (one line) when the folder lacks them. The config hash
    includes :meth:`hidden_items_hash`, so scores on items drawn with different secrets are never paired or
    pooled.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    #: Hidden splits: ``dev`` is the feedback the agent gets from ``/submit``, ``test`` the final score.
    splits: ClassVar[tuple[str, ...]] = ("dev", "test")
    eval_config: ClassVar[EvalConfig] = EvalConfig()
    #: True where the dev split is by nature recoverable from public data the agent may hold (GSM8K's dev
    #: slice is part of the public train set): an overlap of the agent's data with dev then proves no leak.
    dev_public: ClassVar[bool] = False
    #: Splits that are a published data set as it stands (GSM8K's official test set): the same under every
    #: secret. Every other hidden split is drawn with the secret.
    public_splits: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options: dict[str, Any] = dict(options or {})
        #: The grader's hidden folder, set by :func:`autorl.resources.prepare_data` before it prepares the
        #: data: for training data that must leave out items drawn with the secret (GSM8K's dev slice).
        self.hidden_dir: Path | None = None

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

    @abstractmethod
    def prepare_train_data(self, target_dir: Path) -> None:
        """Write the agent-visible training data into ``target_dir``. Idempotent."""

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        """Write the hidden evaluation data into the grader-owned ``hidden_dir``, drawn with the installation's
        secret (:func:`secret_rng`). Idempotent: existing items are kept."""

    @abstractmethod
    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        """The hidden items of ``split`` (one of ``splits``), in a fixed order, read from ``hidden_dir`` only;
        :class:`~autorl.errors.HiddenDataError` when it does not hold them."""

    def hidden_items_hash(self, split: str, hidden_dir: Path) -> str:
        """A hash of ``split``'s hidden items (ids and content); part of the config hash."""
        return items_digest(self.load_items(split, hidden_dir))

    def prompt(self, item: Item) -> str | list[dict[str, str]]:
        """The exact prompt the grader sends for ``item``."""
        return self.config().render(item.input)

    @abstractmethod
    def score(self, item: Item, completion: str) -> float:
        """The score of one completion for ``item``, in [0, 1]."""

    def evaluator(self) -> Evaluator | None:
        """How items become scores: an :class:`~autorl.evaluation.base.Evaluator`, or ``None`` (the default) for
        the generation evaluator, which :func:`autorl.evaluation.evaluator_for` then picks. Interactive
        benchmarks return an ``EpisodeEvaluator``; benchmarks that score in another process or with a judge
        return their own."""
        return None

    def exposed_files(self) -> dict[str, Path]:
        """Extra files linked (read-only) into the workspace: name there -> source path."""
        return {}

    def hidden_paths(self) -> list[Path]:
        """Installed files and local mirrors (``AUTORL_DATA_DIR`` and the like) that hold evaluation data, which
        the sandbox must mask."""
        return []

    def identity(self) -> dict[str, Any]:
        """Settings outside :class:`EvalConfig` that move scores (episode limits, judge, data source...);
        part of the eval-config hash."""
        return {}
