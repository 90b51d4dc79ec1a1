"""Whose fault a failed evaluation is: the harness's (the GPU's memory taken by others, an engine that died, a
full disk) or the checkpoint's (it does not load, its shapes are wrong, its tokenizer is broken).

Only the first kind may be retried and, failing that, recorded as an infrastructure failure; a run whose only
failures are the harness's is not the agent's result. A checkpoint can make an engine run out of memory by
being larger than the base model, so a memory failure is the harness's only for a model of the base model's
shape (:func:`same_shape`), which the harness chose and sized its engines for.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

__all__ = ["harness_cause", "harness_failure", "same_shape"]

#: (what it means, a pattern of the error's text); the first that matches names the cause. Errors a checkpoint's
#: content can cause on its own (a device-side assert from token ids past the vocabulary, a shape mismatch) are
#: deliberately absent.
_CAUSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (meaning, re.compile(pattern, re.IGNORECASE))
    for meaning, pattern in (
        ("the engine found no GPU memory for its KV cache", r"No available memory for the cache blocks"),
        ("another process changed the GPU's memory while the engine measured it", r"Error in memory profiling"),
        (
            "too little free GPU memory when the engine started",
            r"Free memory on device .* is less than desired GPU memory",
        ),
        (
            "the GPU ran out of memory",
            r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation"
            r"|CUDA error: out of memory",
        ),
        ("the engine died", r"EngineDeadError|Engine core initiali[sz]ation failed|engine core .*(died|dead)"),
        ("the host ran out of memory", r"^MemoryError\b|\bMemoryError:"),
        ("the disk is full", r"No space left on device|\[Errno 28\]"),
    )
)


def harness_cause(text: str) -> str | None:
    """What in ``text`` (an error message or traceback) is a failure of the machine rather than of the model."""
    for meaning, pattern in _CAUSES:
        if pattern.search(text):
            return meaning
    return None


def harness_failure(exc: BaseException) -> str | None:
    """:func:`harness_cause` of an exception, its chain of causes included."""
    return harness_cause("".join(traceback.format_exception(exc)))


def same_shape(model_dir: Path | None, base_model_dir: Path | None) -> bool:
    """Whether ``model_dir`` is the base model, or a checkpoint (or LoRA adapter) of the base model's architecture
    and shapes: what the harness sized its engines for. ``False`` when either cannot be read."""
    from autorl.inference.base import is_adapter, shape_config

    if model_dir is None:
        return True
    if base_model_dir is None:
        return False
    try:
        if is_adapter(model_dir):
            return True  # merged into the base: the engine holds the base's shapes
    except OSError:
        return False
    mine, base = shape_config(model_dir, with_dtype=False), shape_config(base_model_dir, with_dtype=False)
    return mine is not None and mine == base
