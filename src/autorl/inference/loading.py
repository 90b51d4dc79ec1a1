"""A checkpoint into transformers, exactly as the grader loads it: the tokenizer (:func:`load_tokenizer`, what
agents are told to use too) and the model, a LoRA adapter merged into its base (:func:`load_causal_lm`).

The hf backend loads through these, the vllm and openai backends read their tokenizer through them, and a
merged adapter (:func:`autorl.inference.weights.merged_checkpoint`) is built with them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autorl.errors import InvalidCheckpointError, MissingDependencyError, extra_install
from autorl.inference.base import is_adapter

__all__ = ["import_torch", "load_causal_lm", "load_tokenizer", "tokenizer_dir"]


def import_torch() -> Any:
    """torch, once transformers imports too; else the one-line error naming the extra to install."""
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("the hf backend", extra_install("hf")) from exc
    return torch


def load_tokenizer(path: Path) -> Any:
    """Load a tokenizer exactly the way the grader does (agents are told to do the same).

    ``AutoTokenizer`` without remote code, left padding for batched generation, and a pad token
    (the EOS token) when the checkpoint has none.
    """
    import_torch()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def _has_tokenizer(path: Path) -> bool:
    return any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json"))


def tokenizer_dir(model_dir: Path, base_model_dir: Path | None = None) -> Path:
    """Where a checkpoint's tokenizer is read from: its own folder, or the base model's for an adapter without one."""
    if is_adapter(model_dir) and not _has_tokenizer(model_dir) and base_model_dir is not None:
        return base_model_dir
    return model_dir


def load_causal_lm(
    model_dir: Path, base_model_dir: Path | None = None, *, device: str = "cpu", dtype: str = "auto"
) -> tuple[Any, Any]:
    """(model, tokenizer) for a full checkpoint, or for a LoRA adapter merged into ``base_model_dir``."""
    torch = import_torch()
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

    torch_dtype: Any
    if dtype == "auto":
        torch_dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    else:
        torch_dtype = getattr(torch, dtype)
    if is_adapter(model_dir):
        if base_model_dir is None:
            raise InvalidCheckpointError(f"{model_dir} is a LoRA adapter but no base model was given")
        try:
            from peft import PeftModel
        except ImportError as exc:
            raise MissingDependencyError("LoRA adapters", "peft") from exc
        base = AutoModelForCausalLM.from_pretrained(str(base_model_dir), dtype=torch_dtype, trust_remote_code=False)
        model = PeftModel.from_pretrained(base, str(model_dir)).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch_dtype, trust_remote_code=False)
    model.to(device)
    model.eval()
    return model, load_tokenizer(tokenizer_dir(model_dir, base_model_dir))
