"""The ``hf`` backend: transformers generation on CPU or CUDA, sorted by length, OOM-safe, early-stopping."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autorl.errors import InvalidCheckpointError, MissingDependencyError
from autorl.inference.base import Backend, Completion, GenerationRequest, cut_at_stop, is_adapter


def _import_torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("the hf backend", "'autorl[hf]'") from exc
    return torch


def load_tokenizer(path: Path) -> Any:
    """Load a tokenizer exactly the way the grader does (agents are told to do the same).

    ``AutoTokenizer`` without remote code, left padding for batched generation, and a pad token
    (the EOS token) when the checkpoint has none.
    """
    _import_torch()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def _has_tokenizer(path: Path) -> bool:
    return any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json"))


def load_causal_lm(
    model_dir: Path, base_model_dir: Path | None = None, *, device: str = "cpu", dtype: str = "auto"
) -> tuple[Any, Any]:
    """(model, tokenizer) for a full checkpoint, or for a LoRA adapter merged into ``base_model_dir``."""
    torch = _import_torch()
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

    torch_dtype: Any
    if dtype == "auto":
        torch_dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    else:
        torch_dtype = getattr(torch, dtype)
    kwargs: dict[str, Any] = {"dtype": torch_dtype, "trust_remote_code": False}
    if is_adapter(model_dir):
        if base_model_dir is None:
            raise InvalidCheckpointError(f"{model_dir} is a LoRA adapter but no base model was given")
        try:
            from peft import PeftModel
        except ImportError as exc:
            raise MissingDependencyError("LoRA adapters", "peft") from exc
        base = AutoModelForCausalLM.from_pretrained(str(base_model_dir), **kwargs)
        model = PeftModel.from_pretrained(base, str(model_dir)).merge_and_unload()
        tok_dir = model_dir if _has_tokenizer(model_dir) else base_model_dir
    else:
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), **kwargs)
        tok_dir = model_dir
    model.to(device)
    model.eval()
    return model, load_tokenizer(tok_dir)


def _default_device() -> str:
    torch = _import_torch()
    return "cuda" if torch.cuda.is_available() else "cpu"


class HFBackend(Backend):
    """transformers ``generate`` with length-sorted batches and a memory-derived batch size.

    Options: ``device`` (``auto``), ``dtype`` (``auto``: bf16 on CUDA, fp32 on CPU), ``batch_size``
    (default: from free GPU memory, 64 on CPU), ``max_batch_size`` (512).
    """

    name = "hf"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.model: Any = None
        self.tokenizer: Any = None
        self.device = str(self.options.get("device", "auto"))

    @classmethod
    def available(cls) -> bool:
        try:
            _import_torch()
        except MissingDependencyError:
            return False
        return True

    def identity(self) -> dict[str, Any]:
        import torch
        import transformers

        device = _default_device() if self.device == "auto" else self.device
        dtype = str(self.options.get("dtype", "auto"))
        if dtype == "auto":
            dtype = "bfloat16" if device.startswith("cuda") else "float32"
        # the resolved device type and dtype, since the same weights score differently in bf16 and fp32
        return {
            "name": self.name,
            "torch": torch.__version__.split("+")[0],
            "transformers": transformers.__version__,
            "device_type": device.split(":")[0],
            "dtype": dtype,
        }

    def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
        if self.device == "auto":
            self.device = _default_device()
        self.model, self.tokenizer = load_causal_lm(
            model_dir, base_model_dir, device=self.device, dtype=str(self.options.get("dtype", "auto"))
        )

    def unload(self) -> None:
        self.model = self.tokenizer = None
        torch = _import_torch()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def render(self, request: GenerationRequest) -> str:
        if isinstance(request.prompt, str):
            return request.prompt
        if not getattr(self.tokenizer, "chat_template", None):
            raise InvalidCheckpointError("the benchmark asks for a chat template but the tokenizer has none")
        text: str = self.tokenizer.apply_chat_template(request.prompt, tokenize=False, add_generation_prompt=True)
        return text

    def _batch_size(self, longest: int) -> int:
        if "batch_size" in self.options:
            return int(self.options["batch_size"])
        cap = int(self.options.get("max_batch_size", 512))
        torch = _import_torch()
        if not self.device.startswith("cuda"):
            return min(64, cap)
        free, _total = torch.cuda.mem_get_info()
        cfg = self.model.config
        layers = int(getattr(cfg, "num_hidden_layers", 32))
        heads = int(getattr(cfg, "num_key_value_heads", None) or getattr(cfg, "num_attention_heads", 32) or 32)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
        elem = next(self.model.parameters()).element_size()
        kv_per_seq = 2 * layers * heads * head_dim * elem * longest
        # logits of the last step and activations take about as much again as the cache
        per_seq = 2 * kv_per_seq + cfg.vocab_size * 4 * 2
        return max(1, min(cap, int(free * 0.7 // per_seq)))

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        torch = _import_torch()
        if self.model is None:
            raise RuntimeError("load() a model before generate()")
        texts = [self.render(r) for r in requests]
        lengths = [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]
        # one group per distinct decoding setting, each sorted longest first so an OOM shows up early
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault((r.max_new_tokens, r.temperature, r.top_p, r.stop, r.n, r.seed), []).append(i)
        out: list[Completion | None] = [None] * len(requests)
        for key, idxs in groups.items():
            idxs.sort(key=lambda i: -lengths[i])
            max_new, n = key[0], key[4]
            batch = max(1, self._batch_size(lengths[idxs[0]] + max_new) // max(1, n))
            pos = 0
            while pos < len(idxs):
                chunk = idxs[pos : pos + batch]
                try:
                    results = self._generate_batch([texts[i] for i in chunk], requests[chunk[0]])
                except torch.cuda.OutOfMemoryError:
                    if batch == 1:
                        raise
                    torch.cuda.empty_cache()
                    batch = max(1, batch // 2)
                    continue
                for i, completion in zip(chunk, results, strict=True):
                    out[i] = completion
                pos += len(chunk)
        return [c for c in out if c is not None]

    def _generate_batch(self, texts: list[str], req: GenerationRequest) -> list[Completion]:
        torch = _import_torch()
        tok = self.tokenizer
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        sample = req.temperature > 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": req.max_new_tokens,
            "do_sample": sample,
            "num_return_sequences": req.n,
            "pad_token_id": tok.pad_token_id,
            "eos_token_id": tok.eos_token_id,
        }
        if sample:
            kwargs.update(temperature=req.temperature, top_p=req.top_p)
            torch.manual_seed(req.seed)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        if req.stop:
            kwargs.update(stop_strings=list(req.stop), tokenizer=tok)
        with torch.inference_mode():
            generated = self.model.generate(**enc, **kwargs)
        new = generated[:, enc["input_ids"].shape[1] :]
        eos = tok.eos_token_id
        completions = []
        for row in range(len(texts)):
            outs, reasons, count = [], [], 0
            for k in range(req.n):
                ids = new[row * req.n + k].tolist()
                if eos is not None and eos in ids:
                    ids = ids[: ids.index(eos)]
                    reason = "eos"
                else:
                    reason = "length"
                while ids and ids[-1] == tok.pad_token_id:
                    ids.pop()
                text, stopped = cut_at_stop(tok.decode(ids, skip_special_tokens=True), req.stop)
                outs.append(text)
                reasons.append("stop" if stopped else reason)
                count += len(ids)
            completions.append(Completion(outs, count, reasons))
        return completions


def naive_generate(model: Any, tokenizer: Any, prompts: list[str], max_new_tokens: int, batch_size: int) -> int:
    """The baseline the throughput benchmark compares against: fixed batches in input order, no sorting.

    Returns the number of new tokens generated (until EOS, as the hf backend counts them).
    """
    torch = _import_torch()
    total = 0
    for start in range(0, len(prompts), batch_size):
        enc = tokenizer(prompts[start : start + batch_size], return_tensors="pt", padding=True).to(model.device)
        with torch.inference_mode():
            out = model.generate(
                **enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
            )
        for row in out[:, enc["input_ids"].shape[1] :].tolist():
            eos = tokenizer.eos_token_id
            total += row.index(eos) if eos in row else len(row)
    return total


def tokens_per_second(tokens: int, seconds: float) -> float:
    return tokens / seconds if seconds > 0 else math.inf
