"""What a submission may be: the path it names, the names and bytes of its files, and a checkpoint that is
safe to load. The path rules run before anything is opened; the content rules run on the grader's own
snapshot (see :mod:`autorl.grader.snapshot`), never on the agent's live directory."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autorl.errors import CheckpointTooLarge, InvalidCheckpointError, PathRefused, UsageError
from autorl.inference.base import ADAPTER_CONFIG

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
#: the refusal kind the audit flags: a path that names (or links to) something outside the output directory
OUTSIDE_OUTPUT = PathRefused.kind
MAX_PATH_CHARS = 4096
MAX_JSON_DEPTH = 64
#: keys whose value is a provenance note, never opened by the loaders the grader uses
_NAME_ONLY_KEYS = frozenset({"_name_or_path", "name_or_path", "base_model_name_or_path"})
_FILE_KEY_SUFFIXES = ("_file", "_files", "_path", "_dir")


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 64 * 2**30
    max_files: int = 2000
    max_depth: int = 32
    max_json_bytes: int = 64 * 2**20


#: what a checkpoint may be: a full model, or a LoRA adapter on the run's base model
FULL, LORA = "full", "lora"


@dataclass(frozen=True)
class Checkpoint:
    """What validation found a snapshot to be: its kind (:data:`FULL` or :data:`LORA`), its files, their size."""

    kind: str
    files: tuple[str, ...]
    total_bytes: int


def refusal_kind(exc: Exception) -> str:
    """The structured kind recorded with a refused submission."""
    if isinstance(exc, PathRefused):
        return OUTSIDE_OUTPUT
    if isinstance(exc, CheckpointTooLarge):
        return "too_large"
    if isinstance(exc, InvalidCheckpointError):
        return "invalid_checkpoint"
    return "bad_request"


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def submission_parts(raw: Any, workspace: str, output_aliases: Iterable[str]) -> tuple[str, ...]:
    """The components of ``raw`` below the output directory, decided on the text alone (nothing is opened).

    ``raw`` is ``$OUTPUT_DIR/v1`` (any spelling in ``output_aliases``) or relative to the workspace
    (``output/v1``). ``..`` is refused rather than interpreted: the file system could give it another meaning.
    """
    if not isinstance(raw, str) or not raw.strip():
        raise UsageError("model_path must be a non-empty string")
    if "\x00" in raw:
        raise UsageError("model_path contains a NUL byte")
    if len(raw) > MAX_PATH_CHARS:
        raise UsageError(f"model_path is longer than {MAX_PATH_CHARS} characters")
    parts = _parts(raw if raw.startswith("/") else f"{workspace}/{raw}")
    if ".." in parts:
        raise PathRefused(f"model_path may not contain '..'; {_shown(raw)} is refused")
    aliases = list(output_aliases)
    for alias in aliases:
        prefix = _parts(alias)
        if parts[: len(prefix)] == prefix:
            rest = tuple(parts[len(prefix) :])
            if not rest:
                raise UsageError("model_path must be a folder inside the output directory, not the directory itself")
            for i, part in enumerate(rest):
                try:
                    check_name(part, "/".join(rest[: i + 1]))
                except InvalidCheckpointError as exc:
                    raise UsageError(f"model_path: {exc}") from None
            return rest
    raise PathRefused(f"model_path must be inside the output directory {aliases[0]}; {_shown(raw)} is not")


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= 200 else raw[:200] + "...")


def check_name(name: str, rel: str) -> None:
    """File names the loaders and the record can carry: valid UTF-8, printable, no backslash."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidCheckpointError(
            f"{rel.encode('utf-8', 'backslashreplace').decode()!r}: file names must be valid UTF-8"
        ) from None
    if not name.isprintable() or "\\" in name:
        raise InvalidCheckpointError(f"{rel!r}: file names may not hold control characters or backslashes")


def refuse_by_name(rel: str) -> None:
    """Files that are code or pickles, whatever else the checkpoint holds."""
    lower = rel.lower()
    if lower.endswith(".py") or lower.endswith(".pyc"):
        raise InvalidCheckpointError(f"{rel}: checkpoints may not contain Python code")
    if lower.endswith(PICKLE_SUFFIXES):
        raise InvalidCheckpointError(
            f"{rel}: pickle files are refused, even next to safetensors weights (save with safe_serialization=True "
            "and remove the file)"
        )


def refuse_by_magic(rel: str, head: bytes) -> None:
    """Pickle content under any name: a pickle stream (protocol 2+) or a zip archive (torch.save's format)."""
    if rel.endswith(".safetensors"):
        return  # starts with a header length; its structure is checked in full
    if (len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5) or head.startswith(b"PK\x03\x04"):
        raise InvalidCheckpointError(f"{rel} holds pickle data (or a torch.save archive); only safetensors is accepted")


def check_safetensors(path: Path) -> None:
    """A safetensors file whose header parses and whose tensors exactly fill the file."""
    size = path.stat().st_size
    try:
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ValueError("shorter than its header length")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > 100 * 2**20:
                raise ValueError("header length exceeds the file")
            header = json.loads(f.read(n))
        if not isinstance(header, dict):
            raise ValueError("header is not an object")
        end = 0
        for key, value in header.items():
            if key == "__metadata__":
                continue
            start, stop = value["data_offsets"]
            if not isinstance(start, int) or not isinstance(stop, int) or not 0 <= start <= stop:
                raise ValueError(f"tensor {key} has bad offsets")
            end = max(end, stop)
        if end != size - 8 - n:
            raise ValueError("tensor data does not match the file size (truncated or padded)")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidCheckpointError(f"{path.name} is not a valid safetensors file: {str(exc)[:200]}") from None


def read_json_object(path: Path, shown: str) -> dict[str, Any]:
    """A JSON object from a snapshot file; nesting deeper than MAX_JSON_DEPTH and parse errors are refused."""
    try:
        data = json.loads(path.read_bytes())
    except RecursionError:
        raise InvalidCheckpointError(f"{shown} is nested too deeply") from None
    except (OSError, ValueError) as exc:
        raise InvalidCheckpointError(f"{shown} is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise InvalidCheckpointError(f"{shown} must hold a JSON object")
    return data


def _check_references(data: dict[str, Any], shown: str, names: set[str]) -> None:
    """No remote code, and every value that names a file names one inside the snapshot."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, key, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise InvalidCheckpointError(f"{shown} is nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(value, dict):
            for k, v in value.items():
                if k == "auto_map":
                    raise InvalidCheckpointError(f"{shown} declares auto_map (custom code); remote code is never run")
                if k == "trust_remote_code" and v:
                    raise InvalidCheckpointError(f"{shown} asks for trust_remote_code; remote code is never run")
                if k not in _NAME_ONLY_KEYS:
                    stack.append((v, str(k), depth + 1))
        elif isinstance(value, list):
            stack.extend((v, key, depth + 1) for v in value)
        elif isinstance(value, str):
            _check_reference(value, key, shown, names)


def _check_reference(value: str, key: str, shown: str, names: set[str]) -> None:
    """Refuse a value that reads as a path leaving the snapshot: absolute, home-relative, or through '..'.

    Text that is not a path (a chat template, a special token such as "/") passes: the rule looks at
    values without white space, and at every value of a key that names a file (``tokenizer_file``, ...).
    """
    names_a_file = key.endswith(_FILE_KEY_SUFFIXES)
    if not names_a_file and (len(value) < 2 or any(c.isspace() for c in value)):
        return
    parts = value.replace("\\", "/").split("/")
    leaves = (
        value.startswith(("/", "~", "\\"))
        or (".." in parts and (names_a_file or len(parts) > 1))
        or (len(value) > 2 and value[1] == ":" and value[0].isalpha() and value[2] in "/\\")
    )
    if leaves:
        raise InvalidCheckpointError(
            f"{shown}: {key or 'a value'} = {value[:100]!r} points outside the checkpoint "
            "(name files relative to the checkpoint directory)"
        )


def validate_checkpoint(root: Path, files: Mapping[str, int] | None = None) -> Checkpoint:
    """Check a snapshot: a full checkpoint (config, safetensors weights, tokenizer) or a LoRA adapter.

    ``root`` is a grader-owned copy holding only directories and regular files; ``files`` maps each
    relative name to its size (as the snapshot recorded them). Anything else is refused.
    """
    if files is None:
        files = {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*") if p.is_file()}
        files.pop(".autorl_manifest.json", None)
    if not files:
        raise InvalidCheckpointError("the checkpoint directory is empty")
    names = set(files)
    for name in names:
        refuse_by_name(name)
    for name in sorted(names):
        if name.endswith(".json") and name not in ("tokenizer.json", "vocab.json"):
            _check_references(read_json_object(root / name, name), name, names)
    weights = sorted(n for n in names if n.endswith(".safetensors"))
    if ADAPTER_CONFIG in names:
        cfg = read_json_object(root / ADAPTER_CONFIG, ADAPTER_CONFIG)
        if cfg.get("peft_type", "LORA") != "LORA":
            raise InvalidCheckpointError(f"adapter type {str(cfg.get('peft_type'))[:50]!r} is not supported; use LoRA")
        if "adapter_model.safetensors" not in names:
            raise InvalidCheckpointError("a LoRA adapter needs adapter_model.safetensors")
        _check_adapter(cfg)
        kind = LORA
    else:
        if "config.json" not in names:
            raise InvalidCheckpointError("no config.json: not a model checkpoint or LoRA adapter")
        config = read_json_object(root / "config.json", "config.json")
        if "model_type" not in config:
            raise InvalidCheckpointError("config.json has no model_type")
        _check_layers(config)
        if not weights:
            raise InvalidCheckpointError("no .safetensors weights")
        if not any(t in names for t in TOKENIZER_FILES):
            raise InvalidCheckpointError("no tokenizer files (save the tokenizer next to the model)")
        if "model.safetensors.index.json" in names:
            weight_map = read_json_object(root / "model.safetensors.index.json", "model.safetensors.index.json").get(
                "weight_map", {}
            )
            shards = {str(v) for v in weight_map.values()} if isinstance(weight_map, dict) else set()
            missing = sorted(shards - names)
            if missing:
                raise InvalidCheckpointError(f"shards listed in the index are missing: {', '.join(missing)[:300]}")
        kind = FULL
    for w in weights:
        check_safetensors(root / w)
    return Checkpoint(kind, tuple(sorted(names)), sum(files.values()))


def _check_adapter(cfg: dict[str, Any]) -> None:
    """LoRA settings the grader's engines cannot run, named by their field: an adapter is merged into the run's
    base model, whose shape it must keep."""
    replication = cfg.get("layer_replication")
    if replication:
        spans = (
            [r for r in replication if isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r)]
            if isinstance(replication, list)
            else []
        )
        layers = sum(max(0, b - a) for a, b in spans)
        stacked = (
            f" (layers {', '.join(f'{a}-{b - 1}' for a, b in spans[:8])} stacked: {layers} layers)" if spans else ""
        )
        raise InvalidCheckpointError(
            f"{ADAPTER_CONFIG}: layer_replication{stacked} is not supported: it makes a model of another depth than "
            "the base, which the grader merges adapters into; submit the full model instead, its config.json's "
            "num_hidden_layers (and layer_types) matching its layers"
        )


def _check_layers(config: dict[str, Any]) -> None:
    """A config whose per-layer list and layer count disagree (what a model grown by stacking layers keeps when
    only one was changed) cannot run: say so by its fields, not by the IndexError it raises mid-evaluation."""
    count, types = config.get("num_hidden_layers"), config.get("layer_types")
    if isinstance(count, int) and isinstance(types, list) and len(types) != count:
        raise InvalidCheckpointError(
            f"config.json: layer_types lists {len(types)} layers but num_hidden_layers is {count}; make them agree"
        )


def describe(root: Path) -> str:
    """What a (validated) checkpoint folder is, in its own terms, for a message about it: a LoRA adapter's rank,
    target modules and base, or a full model's type and shape; what cannot be read is left out."""

    def read(name: str) -> dict[str, Any]:
        try:
            return read_json_object(root / name, name) if (root / name).is_file() else {}
        except InvalidCheckpointError:
            return {}

    def short(value: Any) -> str:
        return json.dumps(value)[:80]

    adapter = read(ADAPTER_CONFIG)
    if adapter:
        fields = [
            f"{k} {short(adapter[k])}"
            for k in ("r", "target_modules", "layer_replication", "modules_to_save", "use_dora")
            if adapter.get(k) not in (None, False, [], {})
        ]
        return "the LoRA adapter (" + ", ".join(fields) + ")"
    config = read("config.json")
    fields = [
        f"{k} {short(config[k])}"
        for k in ("model_type", "architectures", "num_hidden_layers", "hidden_size", "vocab_size")
        if k in config
    ]
    return "the checkpoint (" + ", ".join(fields) + ")" if fields else "the checkpoint"
