"""The baseline the throughput benchmarks compare the hf backend against: a plain ``model.generate`` loop.

Imported by ``eval_throughput.py`` and ``vllm_vs_hf.py`` (run as ``python bench/<script>.py``, so this folder
is on ``sys.path``). It is a measuring stick, not part of the harness: the backend never calls it.
"""

from __future__ import annotations

from typing import Any


def naive_generate(
    model: Any, tokenizer: Any, prompts: list[str], max_new_tokens: int, batch_size: int, logits_processor: Any = None
) -> int:
    """Greedy generation in fixed batches in input order, no sorting by length.

    ``logits_processor`` (a per-prompt processor, as the backend's requests carry) is applied through the
    backend's own :class:`~autorl.inference.hf.PromptLogitsProcessor`, so both paths generate the same tokens.
    Returns the number of new tokens generated (until EOS, as the hf backend counts them).
    """
    import torch
    from transformers import LogitsProcessorList

    from autorl.inference.hf import PromptLogitsProcessor

    total = 0
    for start in range(0, len(prompts), batch_size):
        enc = tokenizer(prompts[start : start + batch_size], return_tensors="pt", padding=True).to(model.device)
        extra: dict[str, Any] = {}
        if logits_processor is not None:
            extra["logits_processor"] = LogitsProcessorList([PromptLogitsProcessor(logits_processor, tokenizer.pad_token_id)])
        with torch.inference_mode():
            out = model.generate(
                **enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id, **extra
            )
        for row in out[:, enc["input_ids"].shape[1] :].tolist():
            eos = tokenizer.eos_token_id
            total += row.index(eos) if eos in row else len(row)
    return total
