"""What a running vllm engine fixed when it started, and whether another checkpoint may take its place by a reload.

An engine reads a model folder's config and its side files (tokenizer, chat templates, generation settings) once;
a reload (``collective_rpc("reload_weights")``) replaces the weights alone. A checkpoint may go into a running
engine when its architecture, shapes and dtype are the engine's, its generation settings mean the same, and its
tokenizer decodes alike (the engine detokenizes what it generates with the one it started with; prompts arrive as
token ids). What a trainer's ``save_pretrained`` writes again (other bytes, keys, nulls as empty strings, even
another class name) must not cost a fresh engine: the comparison is of what the engine reads, not of bytes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from autorl.inference.base import shape_config
from autorl.inference.weights import side_files

__all__ = [
    "decoding_difference",
    "engine_key",
    "keep_side_files",
    "key_difference",
    "side_file_view",
    "side_files_digest",
    "side_views",
]


#: keys of the side files that a running engine never reads to decode or to stop (written by the saving library,
#: or used only to pad and truncate a batch), by file name; ``model_max_length`` is not one (vllm caps the
#: engine's context at it)
_INERT_SIDE_KEYS = {
    "tokenizer_config.json": frozenset(
        {
            "padding_side",
            "truncation_side",
            "local_files_only",
            "is_local",
            "pad_token_type_id",
            "max_length",
            "pad_to_multiple_of",
            "name_or_path",
            "_commit_hash",
            "stride",
            "truncation_strategy",
        }
    ),
    "tokenizer.json": frozenset({"padding", "truncation"}),
    "generation_config.json": frozenset({"transformers_version", "_from_model_config"}),
}
#: BPE's "no prefix" and "no suffix", written as null by one version of tokenizers and as "" by another
_EMPTY_AS_NONE = frozenset({"continuing_subword_prefix", "end_of_word_suffix"})


def _meaningful(value: Any, inert: frozenset[str] = frozenset()) -> Any:
    if isinstance(value, dict):
        return {
            k: _meaningful(v)
            for k, v in value.items()
            if k not in inert and v is not None and not (k in _EMPTY_AS_NONE and v == "")
        }
    if isinstance(value, list):
        return [_meaningful(v) for v in value]
    return value


def side_file_view(path: Path) -> bytes:
    """What an engine reads of one side file: a JSON file's content less its inert keys and null values, in one
    canonical form (the tokenizer that ``save_pretrained`` writes back, with other spellings of the same
    settings, is the same tokenizer); any other file's bytes."""
    data = path.read_bytes()
    if not path.name.endswith(".json"):
        return data
    try:
        parsed = json.loads(data)
    except ValueError:
        return data
    view = _meaningful(parsed, _INERT_SIDE_KEYS.get(path.name, frozenset()))
    return json.dumps(view, sort_keys=True, separators=(",", ":")).encode()


def side_views(model_dir: Path) -> tuple[tuple[str, str], ...]:
    """Each side file's name and the digest of its :func:`side_file_view`: every file besides the weights and
    ``config.json`` that the engine reads once at start (tokenizer, chat templates, generation settings:
    :func:`~autorl.inference.weights.side_files`). A reload into a running engine needs them to mean the same,
    since it keeps the ones it started with."""
    return tuple(
        (path.relative_to(model_dir).as_posix(), hashlib.sha256(side_file_view(path)).hexdigest())
        for path in side_files(model_dir)
    )


def side_files_digest(model_dir: Path) -> str:
    """One digest of :func:`side_views`."""
    h = hashlib.sha256()
    for name, digest in side_views(model_dir):
        h.update(name.encode() + b"\0" + digest.encode())
    return h.hexdigest()


#: side files the engine reads only to decode what it generates (and to render chat templates, which it never
#: does here: prompts arrive as token ids); a difference in them is judged by what the two tokenizers decode
_DECODING_PREFIXES = ("tokenizer", "vocab", "merges", "special_tokens", "added_tokens", "chat_template")


def _decoding_file(name: str) -> bool:
    return name.startswith(_DECODING_PREFIXES) or name.endswith((".model", ".spm", ".tiktoken", ".jinja"))


def decoding_difference(old_dir: Path, new_dir: Path, probes: int = 400) -> str | None:
    """How the tokenizer of ``new_dir`` decodes otherwise than that of ``old_dir`` (each loaded as vllm loads it:
    ``AutoTokenizer``, no remote code), or ``None`` when it decodes alike: the same vocabulary size, special ids,
    end and padding ids and space clean-up, every single token the same text with and without its special
    tokens, and ``probes`` seeded random sequences too. A trainer that saves its tokenizer again writes other
    bytes, keys and even another class name for the same decoding; a running engine keeps the one it started
    with, which is then as good."""
    import random

    from transformers import AutoTokenizer

    try:
        a = AutoTokenizer.from_pretrained(str(old_dir), trust_remote_code=False)
        b = AutoTokenizer.from_pretrained(str(new_dir), trust_remote_code=False)
    except Exception as exc:  # a tokenizer that does not load decodes nothing alike
        return f"its tokenizer does not load ({type(exc).__name__})"
    for what in (
        "__len__",
        "all_special_ids",
        "eos_token_id",
        "pad_token_id",
        "bos_token_id",
        "clean_up_tokenization_spaces",
    ):
        mine = len(a) if what == "__len__" else getattr(a, what, None)
        theirs = len(b) if what == "__len__" else getattr(b, what, None)
        if (sorted(mine) if isinstance(mine, list) else mine) != (
            sorted(theirs) if isinstance(theirs, list) else theirs
        ):
            return f"its tokenizer differs in {what.strip('_')}"
    state = _decoder_state(a)
    if state is not None and state == _decoder_state(b):
        return None  # the same vocabulary, added tokens and decoder in the backend each class built
    size = len(a)
    rng = random.Random(0)
    seqs = [[i] for i in range(size)] + [
        [rng.randrange(size) for _ in range(rng.randint(2, 24))] for _ in range(probes)
    ]
    for skip in (True, False):
        if a.batch_decode(seqs, skip_special_tokens=skip) != b.batch_decode(seqs, skip_special_tokens=skip):
            return "its tokenizer decodes some tokens otherwise"
    return None


def _decoder_state(tok: Any) -> Any:
    """What a fast tokenizer's backend decodes with (its model's vocabulary and merges, added tokens, decoder), as
    the class that loaded it built it; ``None`` for a tokenizer without such a backend."""
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        return None
    try:
        state = json.loads(backend.to_str())
    except (AttributeError, ValueError, TypeError):
        return None
    return _meaningful([state.get(k) for k in ("model", "added_tokens", "decoder")])


def key_difference(old: tuple[Any, ...] | None, new: tuple[Any, ...] | None) -> str:
    """Why a checkpoint's :meth:`VLLMBackend._engine_key` keeps it out of a running engine, in words."""
    if old is None or new is None:
        return "its config.json cannot be read"
    if old[0] != new[0]:
        return "its architecture, shapes or dtype differ from the running engine's"
    mine, theirs = dict(old[1]), dict(new[1])
    names = sorted(n for n in set(mine) | set(theirs) if mine.get(n) != theirs.get(n))
    return f"its tokenizer or generation settings differ ({', '.join(names)})"


def keep_side_files(source: Path, target: Path) -> None:
    """A copy of ``source``'s :func:`~autorl.inference.weights.side_files` and ``config.json`` in ``target``
    (replaced): what a tokenizer is loaded from."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for path in [*side_files(source), source / "config.json"]:
        if path.is_file() and not path.is_symlink():
            dest = target / path.relative_to(source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)


def engine_key(weights: Path) -> tuple[Any, ...] | None:
    """Everything of a full checkpoint that a running engine fixed at start (its config less what cannot change
    outputs, and each side file's :func:`side_file_view` digest); ``None`` when unreadable."""
    config = shape_config(weights, with_dtype=True)
    if config is None:
        return None
    return (json.dumps(config, sort_keys=True), side_views(weights))


def decoding_only(old: tuple[Any, ...], new: tuple[Any, ...]) -> bool:
    """Whether two engine keys differ only in files the engine decodes with (then :func:`decoding_difference`
    decides)."""
    if old[0] != new[0]:
        return False
    mine, theirs = dict(old[1]), dict(new[1])
    return all(_decoding_file(n) for n in set(mine) | set(theirs) if mine.get(n) != theirs.get(n))
