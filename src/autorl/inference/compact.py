"""The hf backend's compacting decoder (option ``decode: compact``): finished rows leave the batch and its KV
cache, with the same outputs as transformers' ``generate``."""

from __future__ import annotations

import inspect
from typing import Any

from autorl.inference.base import GenerationRequest
from autorl.inference.loading import import_torch

__all__ = ["decode_compacting", "supports_compaction"]


def decode_compacting(
    model: Any,
    tok: Any,
    input_ids: Any,
    attention_mask: Any,
    req: GenerationRequest,
    *,
    eos_ids: set[int],
    stop_mask: Any = None,
    hook: Any = None,
) -> list[tuple[list[int], str]]:
    """Greedy or sampled decoding of a left-padded batch that drops finished rows from the batch and its KV cache;
    each row's new token ids and why it ended (``eos``, ``stop``, ``length``).

    With GSM8K-like outputs most rows finish long before the longest one; ``generate`` keeps computing them
    all. Here finished rows leave the batch once they are a quarter of it. ``stop_mask`` marks the tokens that
    could complete one of ``req.stop`` (only those are decoded to look for it); ``hook`` is the hf backend's
    ``logits_processor`` option.
    """
    torch = import_torch()
    from transformers import DynamicCache

    if req.n > 1:
        input_ids = input_ids.repeat_interleave(req.n, dim=0)
        attention_mask = attention_mask.repeat_interleave(req.n, dim=0)
    total = input_ids.shape[0]
    eos = torch.tensor(sorted(eos_ids), device=input_ids.device)
    stop_mask = stop_mask.to(input_ids.device) if stop_mask is not None else None
    generator = None
    if req.temperature > 0:
        generator = torch.Generator(device=input_ids.device).manual_seed(req.seed)
    rows: list[list[int]] = [[] for _ in range(total)]
    reasons = ["length"] * total
    present = list(range(total))  # original row index of each batch row
    finished = [False] * total
    prompts = (
        [
            [t for t, m in zip(r, mk, strict=True) if m]
            for r, mk in zip(input_ids.tolist(), attention_mask.tolist(), strict=True)
        ]
        if hook
        else []
    )
    cache = DynamicCache(config=model.config)
    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    with torch.inference_mode():
        out = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{cache_arg: cache},
        )
        next_pos = positions[:, -1:] + 1
        for step in range(req.max_new_tokens):
            logits = out.logits[:, -1, :].float()
            if hook:
                logits = hook([prompts[row] for row in present], step, logits)
            if generator is None:
                tokens = logits.argmax(dim=-1)
            else:
                tokens = _sample(torch, logits, req.temperature, req.top_p, generator)
            is_eos = torch.isin(tokens, eos)
            maybe_stop = stop_mask[tokens] if stop_mask is not None else None
            token_list = tokens.tolist()
            eos_list = is_eos.tolist()
            stop_list = maybe_stop.tolist() if maybe_stop is not None else None
            for j, row in enumerate(present):
                if finished[row]:
                    continue
                if eos_list[j]:
                    finished[row], reasons[row] = True, "eos"
                    continue
                rows[row].append(token_list[j])
                if stop_list is not None and stop_list[j]:
                    tail = tok.decode(rows[row][-16:], skip_special_tokens=True)
                    if any(s in tail for s in req.stop):
                        finished[row], reasons[row] = True, "stop"
            alive = [j for j, row in enumerate(present) if not finished[row]]
            if not alive:
                break
            if len(present) - len(alive) >= max(1, len(present) // 4):
                keep = torch.tensor(alive, device=input_ids.device)
                cache.batch_select_indices(keep)
                attention_mask = attention_mask[keep]
                next_pos = next_pos[keep]
                tokens = tokens[keep]
                present = [present[j] for j in alive]
            # finished rows still in the batch are fed padding and ignored
            feed = tokens.clone()
            done_rows = torch.tensor([finished[row] for row in present], device=input_ids.device)
            feed[done_rows] = tok.pad_token_id
            attention_mask = torch.cat([attention_mask, torch.ones_like(attention_mask[:, :1])], dim=1)
            out = model(
                input_ids=feed[:, None],
                attention_mask=attention_mask,
                position_ids=next_pos,
                use_cache=True,
                **{cache_arg: cache},
            )
            next_pos = next_pos + 1
    return list(zip(rows, reasons, strict=True))


def _sample(torch: Any, logits: Any, temperature: float, top_p: float, generator: Any) -> Any:
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        cumulative = sorted_probs.cumsum(dim=-1)
        sorted_probs[cumulative - sorted_probs > top_p] = 0.0
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def supports_compaction(model: Any) -> bool:
    """Whether the model's KV cache can drop rows (decoder-only models with transformers' DynamicCache)."""
    from transformers import DynamicCache

    return hasattr(DynamicCache, "batch_select_indices") and not model.config.is_encoder_decoder
