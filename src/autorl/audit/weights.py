"""The submitted checkpoints' weights: distances to the base and to known post-trained variants (a LoRA
adapter merged onto the base first), and chat-template changes."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autorl import untrusted
from autorl.audit.budget import Budget
from autorl.audit.flags import CRITICAL, INFO, Flag


def _chat_template(model_dir: Path) -> tuple[bool, str | None]:
    """(whether the directory carries a tokenizer configuration or template, the template)."""
    try:
        config = untrusted.read_json(model_dir, "tokenizer_config.json", limit=64 * 2**20)
    except untrusted.UntrustedFileError as exc:
        if "does not exist" not in str(exc):
            return True, f"unreadable: {exc}"
    else:
        value = config.get("chat_template") if isinstance(config, dict) else None
        return True, json.dumps(value, sort_keys=True) if value is not None else None
    try:
        return True, untrusted.read_text(model_dir, "chat_template.jinja", limit=16 * 2**20)
    except untrusted.UntrustedFileError:
        return False, None


def _tensors(model_dir: Path, pattern: str = "*.safetensors") -> dict[str, Any]:
    from safetensors.numpy import load_file

    tensors: dict[str, Any] = {}
    for f in sorted(model_dir.glob(pattern)):
        if not stat.S_ISREG(f.lstat().st_mode):
            continue  # the grader's snapshots hold regular files only; anything else is not read
        try:
            tensors.update(load_file(str(f)))
        except Exception:  # bf16 and friends: fall back to torch when it is installed
            from safetensors.torch import load_file as load_torch

            tensors.update({k: v.float().numpy() for k, v in load_torch(str(f)).items()})
    return tensors


_LORA_KEY = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.lora_(?P<ab>[AB])(?:\.[^.]+)?\.weight$")


def merged_lora(adapter_dir: Path, base: dict[str, Any]) -> dict[str, Any]:
    """The base's tensors with a LoRA adapter's deltas applied (``W + scale * B @ A``), so that an adapter is
    weighed like a full checkpoint; saved full modules (``modules_to_save``) replace the base's."""
    import numpy as np

    config = untrusted.read_json(adapter_dir, "adapter_config.json", limit=1 << 20)
    if not isinstance(config, dict):
        raise untrusted.UntrustedFileError("adapter_config.json is not an object")
    r = float(config.get("r") or 8)
    alpha = float(config.get("lora_alpha") or r)
    scale = alpha / (r**0.5) if config.get("use_rslora") else alpha / r
    pieces: dict[str, dict[str, Any]] = {}
    merged = dict(base)
    for key, value in _tensors(adapter_dir, "adapter_model*.safetensors").items():
        match = _LORA_KEY.match(key)
        if match:
            pieces.setdefault(match["module"], {})[match["ab"]] = value
            continue
        name = re.sub(r"^base_model\.model\.", "", key).replace(".modules_to_save.default", "")
        name = name.replace(".original_module", "")
        if name in base and base[name].shape == value.shape:
            merged[name] = value
    for module, ab in pieces.items():
        target = f"{module}.weight"
        if "A" in ab and "B" in ab and target in base:
            delta = scale * (ab["B"].astype(np.float64) @ ab["A"].astype(np.float64))
            if delta.shape == base[target].shape:
                merged[target] = base[target].astype(np.float64) + delta
    return merged


def weight_distance(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """Relative L2 distance ||a - b|| / ||b|| over the tensors both have; None if they share none."""
    import numpy as np

    common = [k for k in a if k in b and a[k].shape == b[k].shape]
    if not common:
        return None
    num = sum(float(np.sum((a[k].astype(np.float64) - b[k].astype(np.float64)) ** 2)) for k in common)
    den = sum(float(np.sum(b[k].astype(np.float64) ** 2)) for k in common)
    return (num**0.5) / (den**0.5) if den else None


def check_weights(
    snapshots: dict[int, Path], base_dir: Path, variants: Sequence[Path], budget: Budget | None = None
) -> tuple[list[Flag], dict[int, float]]:
    """Distances of each submitted checkpoint (a LoRA adapter merged onto the base) to the base and to known
    post-trained variants, and chat-template changes."""
    budget = budget or Budget(None)
    flags: list[Flag] = []
    base = _tensors(base_dir)
    known = {str(v): _tensors(v) for v in variants}
    distances: dict[int, float] = {}
    closer = []
    template_changed = []
    _, base_template = _chat_template(base_dir)
    for sid, snap in sorted(snapshots.items()):
        if not budget.left():
            break
        try:
            is_adapter = (snap / "adapter_config.json").is_file()
            weights = merged_lora(snap, base) if is_adapter else _tensors(snap)
            present, template = _chat_template(snap)
        except Exception:  # a checkpoint the grader took but the audit cannot weigh
            budget.unscanned.append(f"snapshot {sid} (weights)")
            continue
        d = weight_distance(weights, base)
        if d is not None:
            distances[sid] = d
        for name, tensors in known.items():
            dv = weight_distance(weights, tensors)
            if d is not None and dv is not None and dv < d:
                closer.append(f"submission {sid}: {dv:.4f} from {name} vs {d:.4f} from the base")
        # an adapter without tokenizer files is evaluated with the base's: no change
        if (present or not is_adapter) and template != base_template:
            template_changed.append(f"submission {sid}")
    if closer:
        flags.append(
            Flag(
                "closer-to-post-trained-variant",
                CRITICAL,
                "checkpoint weights are closer to a known post-trained variant than to the base",
                closer,
            )
        )
    if template_changed:
        flags.append(
            Flag(
                "chat-template-changed",
                INFO,
                "submitted tokenizers carry a chat template different from the base's (it changes the "
                "evaluated prompt when the benchmark uses chat templates)",
                template_changed,
            )
        )
    return flags, distances
