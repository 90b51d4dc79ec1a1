"""Checks a submission before anything runs: the path, the files, and that the checkpoint is safe to load."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autorl.errors import InvalidCheckpointError, UsageError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")


class PathRefused(UsageError):
    """The path is not inside the run's output directory (HTTP 400)."""


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 64 * 2**30
    max_files: int = 2000


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    kind: str  # "full" or "lora"
    files: tuple[Path, ...]
    total_bytes: int


def resolve_submission_path(raw: Any, workspace: Path, output_dir: Path) -> Path:
    """The real directory a submission names; it must resolve (symlinks followed) inside ``output_dir``."""
    if not isinstance(raw, str) or not raw.strip():
        raise UsageError("model_path must be a non-empty string")
    if "\x00" in raw:
        raise UsageError("model_path contains a NUL byte")
    candidate = Path(raw)
    if not candidate.is_absolute():
        candidate = workspace / candidate
    root = output_dir.resolve()
    try:
        real = candidate.resolve(strict=True)
    except (FileNotFoundError, RuntimeError, OSError):
        raise UsageError(f"model_path {raw!r} does not exist") from None
    if real != root and root not in real.parents:
        raise PathRefused(f"model_path must be inside the output directory {output_dir}; {raw!r} is not")
    if real == root:
        raise PathRefused("model_path must be a folder inside the output directory, not the directory itself")
    if not real.is_dir():
        raise UsageError(f"model_path {raw!r} is not a directory")
    return real


def _walk(root: Path, output_root: Path, limits: Limits) -> tuple[list[Path], int]:
    files: list[Path] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                target = path.resolve()
                if output_root != target and output_root not in target.parents:
                    raise PathRefused(f"{path.relative_to(root)} is a link that leaves the output directory")
                if target.is_dir():
                    raise InvalidCheckpointError(f"{path.relative_to(root)} links to a directory; copy it instead")
        for name in filenames:
            path = Path(dirpath) / name
            if not path.resolve().is_file():
                raise InvalidCheckpointError(f"{path.relative_to(root)} is not a regular file")
            files.append(path)
            if len(files) > limits.max_files:
                raise InvalidCheckpointError(f"checkpoint has more than {limits.max_files} files")
            total += path.stat().st_size
            if total > limits.max_bytes:
                raise InvalidCheckpointError(f"checkpoint is larger than {limits.max_bytes} bytes")
    return files, total


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
            if not 0 <= start <= stop:
                raise ValueError(f"tensor {key} has bad offsets")
            end = max(end, stop)
        if end != size - 8 - n:
            raise ValueError("tensor data does not match the file size (truncated or padded)")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise InvalidCheckpointError(f"{path.name} is not a valid safetensors file: {exc}") from None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidCheckpointError(f"{path.name} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidCheckpointError(f"{path.name} must hold a JSON object")
    return data


def _refuse_remote_code(path: Path) -> None:
    data = _read_json(path)
    if "auto_map" in data:
        raise InvalidCheckpointError(f"{path.name} declares auto_map (custom code); remote code is never run")


def validate_checkpoint(root: Path, output_dir: Path, limits: Limits = Limits()) -> Checkpoint:
    """A full checkpoint (config, safetensors weights, tokenizer) or a LoRA adapter; anything else refused."""
    files, total = _walk(root, output_dir.resolve(), limits)
    if not files:
        raise InvalidCheckpointError("the checkpoint directory is empty")
    names = {p.relative_to(root).as_posix() for p in files}
    weights = sorted(p for p in files if p.name.endswith(".safetensors"))
    for p in files:
        if p.name.endswith(".py"):
            raise InvalidCheckpointError(f"{p.name}: checkpoints may not contain Python code")
    for name in ("tokenizer_config.json", "config.json", "adapter_config.json"):
        if name in names:
            _refuse_remote_code(root / name)
    if "adapter_config.json" in names:
        cfg = _read_json(root / "adapter_config.json")
        if cfg.get("peft_type", "LORA") != "LORA":
            raise InvalidCheckpointError(f"adapter type {cfg.get('peft_type')!r} is not supported; use LoRA")
        if "adapter_model.safetensors" not in names:
            raise InvalidCheckpointError("a LoRA adapter needs adapter_model.safetensors")
        kind = "lora"
    else:
        if "config.json" not in names:
            raise InvalidCheckpointError("no config.json: not a model checkpoint or LoRA adapter")
        if "model_type" not in _read_json(root / "config.json"):
            raise InvalidCheckpointError("config.json has no model_type")
        if not weights:
            pickled = [p.name for p in files if p.name.endswith(PICKLE_SUFFIXES)]
            hint = " (pickle weights are refused: save with safe_serialization=True)" if pickled else ""
            raise InvalidCheckpointError(f"no .safetensors weights{hint}")
        if not any(t in names for t in TOKENIZER_FILES):
            raise InvalidCheckpointError("no tokenizer files (save the tokenizer next to the model)")
        index = root / "model.safetensors.index.json"
        if index.is_file():
            shards = set(_read_json(index).get("weight_map", {}).values())
            missing = sorted(shards - names)
            if missing:
                raise InvalidCheckpointError(f"shards listed in the index are missing: {', '.join(missing)}")
        kind = "full"
    for w in weights:
        check_safetensors(w)
    return Checkpoint(root, kind, tuple(files), total)
