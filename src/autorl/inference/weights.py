"""New weights into a loaded transformers model, in place: what the hf backend's warm path (``swap``) uses.

The result must be the model ``from_pretrained`` would have built from the same folder, bit for bit, or the
swap is refused (and the caller loads afresh): every tensor of the model's state dict has its counterpart in
the checkpoint's safetensors files with the same shape, except parameters tied to one that is there (the
output embedding of ``tie_word_embeddings`` models), and the files hold nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.inference.loading import load_causal_lm, tokenizer_dir

if TYPE_CHECKING:
    from torch import Tensor


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


#: names at the top of a checkpoint folder that a tokenizer, a chat template or generation settings may be read
#: from (by prefix or by suffix; ``tokenizer.5.0.0.json``, named by ``fast_tokenizer_files``, included), and the
#: chat-template folder; ``config.json`` is compared apart (``shape_config``)
_SIDE_PREFIXES = (
    "tokenizer",
    "vocab",
    "merges",
    "special_tokens",
    "added_tokens",
    "chat_template",
    "generation_config",
    "spiece",
    "sentencepiece",
    "bpe",
    "preprocessor_config",
    "processor_config",
)
_SIDE_SUFFIXES = (".model", ".spm", ".tiktoken", ".jinja")
SIDE_DIRS = ("additional_chat_templates",)
GENERATION_CONFIG = "generation_config.json"


def _regular_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def side_files(folder: Path) -> list[Path]:
    """The regular files of ``folder`` (no link followed) a tokenizer, a chat template or generation settings
    may be read from, in a stable order: what must be byte-identical for an engine to keep the ones it started
    with, and what goes with an adapter's merge."""
    found: list[Path] = []
    if not folder.is_dir():
        return found
    for entry in sorted(folder.iterdir()):
        if _regular_file(entry) and (entry.name.startswith(_SIDE_PREFIXES) or entry.name.endswith(_SIDE_SUFFIXES)):
            found.append(entry)
        elif entry.name in SIDE_DIRS and entry.is_dir() and not entry.is_symlink():
            found.extend(p for p in sorted(entry.iterdir()) if _regular_file(p))
    return found


def _copy_side_files(source: Path, target: Path, *, generation_config: bool) -> None:
    import shutil

    for f in side_files(source):
        if f.name == GENERATION_CONFIG and f.parent == source and not generation_config:
            continue
        dest = target / f.relative_to(source)
        dest.parent.mkdir(exist_ok=True)
        shutil.copy2(f, dest)


def _drop_tokenizer_files(folder: Path) -> None:
    """Remove from ``folder`` every side file but its generation settings."""
    import shutil

    for f in side_files(folder):
        if not (f.name == GENERATION_CONFIG and f.parent == folder):
            f.unlink()
    for name in SIDE_DIRS:
        shutil.rmtree(folder / name, ignore_errors=True)


def _architecture_keys(model_dir: Path) -> set[str]:
    """The state-dict names of ``model_dir``'s architecture as transformers builds it (on the meta device: no
    memory, no weights read)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(model_dir), trust_remote_code=False)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=False)  # type: ignore[no-untyped-call]
    return set(model.state_dict())


def _base_layout(state: dict[str, Tensor], files: list[Path]) -> dict[Path, dict[str, Tensor]] | None:
    """``state``'s tensors arranged as the base checkpoint's files hold them (each in the file's dtype), or
    ``None`` when they do not fit that layout one for one (a merge that added or resized a tensor)."""
    import torch
    from safetensors import safe_open

    dtypes = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
    layout: dict[Path, dict[str, Tensor]] = {}
    given: set[int] = set()
    seen: set[int] = set()
    for f in files:
        tensors: dict[str, Tensor] = {}
        with safe_open(str(f), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 (a safe_open handle is not a mapping)
                like = handle.get_slice(key)
                if key not in state or tuple(like.get_shape()) != tuple(state[key].shape):
                    return None
                if like.get_dtype() not in dtypes:
                    return None
                value = state[key].detach()
                given.add(value.data_ptr())
                value = value.to(dtypes[like.get_dtype()]).contiguous()
                if value.data_ptr() in seen:  # tied names both in the file: safetensors wants two tensors
                    value = value.clone()
                seen.add(value.data_ptr())
                tensors[key] = value
        layout[f] = tensors
    if any(t.data_ptr() not in given for t in state.values()):
        return None  # a tensor the base's files do not hold and that is tied to none of theirs
    return layout


def merged_checkpoint(adapter_dir: Path, base_dir: Path, target: Path) -> Path:
    """Write to ``target`` a full checkpoint: the LoRA adapter in ``adapter_dir`` merged into ``base_dir``'s
    weights by peft's ``merge_and_unload`` (as :func:`autorl.inference.loading.load_causal_lm` does), on the CPU, in
    the base's own dtype, with the tokenizer the hf backend would use (the adapter's, when it ships one).

    Where the merged tensors fit the base's layout (the usual case: LoRA changes values, not shapes), they are
    written under the base's file names, tensor names and dtypes, and its config and other files are copied
    byte for byte: an engine holding the base (or another merge into it) takes the result by a reload.
    Otherwise the merged model is saved by ``save_pretrained``. Atomic: a temp folder renamed at the end.
    """
    import shutil

    from safetensors import safe_open
    from safetensors.torch import save_file
    from transformers import AutoConfig

    from autorl.errors import InvalidCheckpointError

    try:
        raw = json.loads((base_dir / "config.json").read_text())
    except (OSError, ValueError):
        raw = {}
    dtype = raw.get("dtype", raw.get("torch_dtype")) if isinstance(raw, dict) else None
    model, _ = load_causal_lm(
        adapter_dir, base_dir, device="cpu", dtype=dtype if dtype in ("float32", "bfloat16", "float16") else "float32"
    )
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    files = weight_files(base_dir)
    state = model.state_dict()
    layout = _base_layout(state, files) if files is not None else None
    if layout is not None and set(state) != _architecture_keys(base_dir):
        layout = None  # the merge changed the architecture (layer_replication adds layers sharing tensors)
    if layout is not None:
        for f, tensors in layout.items():
            with safe_open(str(f), framework="pt") as handle:
                metadata = handle.metadata() or {"format": "pt"}
            save_file(tensors, str(tmp / f.name), metadata=metadata)
        side = set(side_files(base_dir))  # copied below, in either case
        for entry in sorted(base_dir.iterdir()):
            if _regular_file(entry) and entry not in layout and entry not in side:
                shutil.copy2(entry, tmp / entry.name)
    else:
        try:  # what the engine will read: a merge that does not save, or whose config does not load, is refused
            model.save_pretrained(str(tmp), safe_serialization=True)
            AutoConfig.from_pretrained(str(tmp), trust_remote_code=False)
        except Exception as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise InvalidCheckpointError(
                f"{adapter_dir}: merged into the base, this adapter does not make a loadable checkpoint "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); submit the merged model"
            ) from None
    _copy_side_files(base_dir, tmp, generation_config=True)  # byte for byte, the chat-template folder too
    source = tokenizer_dir(adapter_dir, base_dir)
    if source != base_dir:  # the adapter's own tokenizer, whole, as the hf backend reads it; never its
        _drop_tokenizer_files(tmp)  # generation settings (an adapter runs with the base's)
        _copy_side_files(source, tmp, generation_config=False)
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)
    return target
