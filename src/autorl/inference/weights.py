"""New weights into a loaded transformers model, in place: what the hf backend's warm path (``swap``) uses.

The result must be the model ``from_pretrained`` would have built from the same folder, bit for bit, or the
swap is refused (and the caller loads afresh): every tensor of the model's state dict has its counterpart in
the checkpoint's safetensors files with the same shape, except parameters tied to one that is there (the
output embedding of ``tie_word_embeddings`` models), and the files hold nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def weight_files(model_dir: Path) -> list[Path] | None:
    """The safetensors files a fresh load reads, in transformers' order: ``model.safetensors`` alone when it
    exists, else the shards the index names; ``None`` otherwise. Never a glob: a file a fresh load would not
    read must not reach the warm engine either (the swap then declines and the slot loads afresh)."""
    single = model_dir / "model.safetensors"
    if single.is_file():
        return [single]
    index = model_dir / "model.safetensors.index.json"
    if not index.is_file():
        return None
    try:
        weight_map = json.loads(index.read_text()).get("weight_map", {})
    except (OSError, ValueError, AttributeError):
        return None
    names = sorted({str(v) for v in weight_map.values()}) if isinstance(weight_map, dict) else []
    if any(Path(n).name != n for n in names):
        return None
    files = [model_dir / n for n in names]
    return files if files and all(f.is_file() for f in files) else None


def load_weights_into(model: Any, model_dir: Path) -> bool:
    """Copy ``model_dir``'s weights into ``model`` (cast to its dtype, on its device); ``False``, with the model
    untouched, when the checkpoint's tensors do not match the model's one for one."""
    import torch
    from safetensors import safe_open

    files = weight_files(model_dir)
    if files is None:
        return False
    state = model.state_dict()
    where: dict[str, Path] = {}
    for f in files:
        with safe_open(str(f), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 (a safe_open handle is not a mapping)
                if key in where or key not in state:
                    return False
                if tuple(handle.get_slice(key).get_shape()) != tuple(state[key].shape):
                    return False
                where[key] = f
    present = {state[k].data_ptr() for k in where}
    for key, tensor in state.items():
        if key not in where and tensor.data_ptr() not in present:
            return False  # a tensor the checkpoint does not give and that is not tied to one it gives
    # two tied names both in the file: which one from_pretrained keeps is its business; load afresh
    if len(present) != len(where):
        return False
    with torch.no_grad():
        for f in files:
            with safe_open(str(f), framework="pt", device="cpu") as handle:
                for key in handle.keys():  # noqa: SIM118
                    if where[key] == f:
                        state[key].copy_(handle.get_tensor(key))
    return True


def merge_adapter(model: Any, adapter_dir: Path) -> Any:
    """``model`` with the LoRA adapter in ``adapter_dir`` merged into its weights (as ``load_causal_lm`` does)."""
    from peft import PeftModel

    return PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()


def reread_generation_config(model: Any, model_dir: Path) -> None:
    """The generation settings ``from_pretrained`` would give the model for ``model_dir``."""
    from transformers import GenerationConfig

    if (model_dir / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(str(model_dir))
    else:
        model.generation_config = GenerationConfig.from_model_config(model.config)
