"""Hidden items: the installation's secret, what is drawn with it, and the grader-owned files that hold the items.

Hidden means absent and underivable: a benchmark's dev and test items live only in the grader's hidden folder
(:func:`write_hidden_items`, :func:`read_hidden_items`), chosen with a secret of this installation
(:func:`secret_rng`) that nothing installed, visible or public lets an agent recompute.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import random
import secrets
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from autorl.errors import HiddenDataError, UsageError
from autorl.jsonio import write_text_atomic
from autorl.scoring import Item

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
            raise HiddenDataError(
                f"{path} is not a {_SECRET_BYTES}-byte secret file; remove it to make a new one "
                "(the hidden items change with it)"
            )
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


def items_digest(items: Iterable[Item]) -> str:
    """A hash of items' ids and content (input and reference), in order: two item sets that differ anywhere
    hash differently."""
    h = hashlib.sha256()
    for item in items:
        row = [item.id, dict(item.input), item.reference]
        h.update(json.dumps(row, sort_keys=True, default=str).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def _items_path(hidden_dir: Path, split: str) -> Path:
    return Path(hidden_dir) / f"{split}.items.jsonl"


def _secret_tag(hidden_dir: Path) -> str:
    """Which secret is in force, as a keyed fingerprint (it reveals nothing about the secret)."""
    return hmac.new(hidden_secret(hidden_dir), b"autorl/hidden-items", hashlib.sha256).hexdigest()[:32]


def write_hidden_items(hidden_dir: Path, split: str, items: Sequence[Item]) -> None:
    """Store ``split``'s items in the grader-owned ``hidden_dir`` (one JSON object a line, mode 0600, atomic),
    with the fingerprint of the secret they were drawn with."""
    _write_private(_items_path(hidden_dir, split).with_suffix(".secret"), _secret_tag(hidden_dir) + "\n")
    _write_private(
        _items_path(hidden_dir, split),
        "".join(
            json.dumps({"id": item.id, "input": dict(item.input), "reference": item.reference}) + "\n" for item in items
        ),
    )


def _write_private(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_text_atomic(target, text, mode=0o600)


def has_hidden_items(hidden_dir: Path, split: str) -> bool:
    """Whether ``split``'s items are stored and were drawn with the secret now in force (an operator who sets
    ``AUTORL_HIDDEN_SECRET`` gets them drawn anew)."""
    path = _items_path(hidden_dir, split)
    tag = path.with_suffix(".secret")
    if not path.is_file() or path.is_symlink() or not tag.is_file() or tag.is_symlink():
        return False
    try:
        return tag.read_text().strip() == _secret_tag(hidden_dir)
    except (OSError, UnicodeDecodeError):
        return False


def read_hidden_items(benchmark: str, hidden_dir: Path, split: str) -> list[Item]:
    """The items :func:`write_hidden_items` stored; a one-line :class:`HiddenDataError` when they are not there."""
    path = _items_path(hidden_dir, split)
    missing = HiddenDataError(
        f"{benchmark}'s hidden {split} items are not in {hidden_dir}: only the grader's hidden folder "
        "holds them (the grader prepares them from the installation's secret)"
    )
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
