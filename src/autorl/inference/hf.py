"""The ``hf`` backend: transformers generation on CPU or CUDA, sorted by length, OOM-safe, early-stopping.

Loading is :mod:`autorl.inference.loading`, the compacting decoder :mod:`autorl.inference.compact`, the
in-place weight swap of a warm worker :mod:`autorl.inference.weights`.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

from autorl.errors import MissingDependencyError
from autorl.inference.base import (
    Backend,
    Completion,
    GenerationRequest,
    cut_at_stop,
    is_adapter,
    prompt_token_ids,
    render_prompt,
    shape_config,
)
from autorl.inference.compact import decode_compacting, supports_compaction
from autorl.inference.loading import import_torch, load_causal_lm, load_tokenizer, tokenizer_dir
from autorl.inference.weights import load_weights_into, merge_adapter, reread_generation_config

__all__ = [
    "HFBackend",
    "PromptLogitsProcessor",
    "callable_identity",
    "load_causal_lm",
    "load_tokenizer",
    "tokenizer_dir",
]


def callable_identity(fn: Any) -> dict[str, str]:
    """What names a Python callable in a config hash: its qualified name, its code and the state it carries.

    The state (defaults, closure values, an object's attributes) enters as its ``repr``; one holding objects
    whose ``repr`` is their address gives a new hash per process, so a cached score is never reused for it.
    """
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn)
    name = f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"
    try:
        code = inspect.getsource(target)
    except (OSError, TypeError):
        raw = getattr(getattr(fn, "__code__", None), "co_code", b"")
        code = raw.hex() if raw else repr(fn)
    func = getattr(fn, "__func__", fn)
    cells = [c.cell_contents for c in (getattr(func, "__closure__", None) or ()) if _cell_filled(c)]
    state = [getattr(func, "__defaults__", None), getattr(func, "__kwdefaults__", None), cells]
    if not inspect.isfunction(fn) and not inspect.ismethod(fn):
        state.append(sorted(vars(fn).items()) if hasattr(fn, "__dict__") else repr(fn))
    if inspect.ismethod(fn):
        state.append(repr(fn.__self__))
    digest = hashlib.sha256(code.encode() + b"\0" + repr(state).encode()).hexdigest()[:16]
    return {"name": name, "hash": digest}


def _cell_filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _default_device() -> str:
    torch = import_torch()
    return "cuda" if torch.cuda.is_available() else "cpu"


class HFBackend(Backend):
    """transformers ``generate`` with length-sorted batches and a memory-derived batch size.

    Options: ``device`` (``auto``), ``dtype`` (``auto``: bf16 on CUDA, fp32 on CPU), ``batch_size``
    (default: from free GPU memory, 64 on CPU), ``max_batch_size`` (512), ``decode``: ``generate`` (the
    default: ``model.generate``) or ``compact`` (finished rows leave the batch and its KV cache; same outputs,
    but its per-step bookkeeping made it 0.9x of ``generate`` on an H200 with GSM8K-like lengths, so it only
    pays when a few completions run far longer than the rest), ``logits_processor``: a callable
    ``(prompt_ids_per_row, step, logits) -> logits`` applied before each token is chosen, in both modes; its name, code and state enter the identity
    (``callable_identity``), ``sleep_when_idle``: a warm grader worker moves the model to the CPU between
    evaluations (a GPU shared with the agent).

    Kept loaded (a warm worker), a checkpoint of the same architecture and shapes is swapped in place
    (:meth:`swap`): its tensors copied into the loaded model, a LoRA adapter merged into the base's weights
    loaded the same way; the tokenizer and generation settings are read again from its folder.
    """

    name = "hf"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.model: Any = None
        self.tokenizer: Any = None
        self.device = str(self.options.get("device", "auto"))
        #: the architecture of the loaded weights (``shape_config``): what a swap must match
        self._shape: dict[str, Any] | None = None

    @classmethod
    def available(cls) -> bool:
        try:
            import_torch()
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
            **({"logits_processor": callable_identity(hook)} if (hook := self.options.get("logits_processor")) else {}),
        }

    def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
        if self.device == "auto":
            self.device = _default_device()
        self.model, self.tokenizer = load_causal_lm(
            model_dir, base_model_dir, device=self.device, dtype=str(self.options.get("dtype", "auto"))
        )
        weights_dir = base_model_dir if is_adapter(model_dir) and base_model_dir is not None else model_dir
        self._shape = shape_config(weights_dir, with_dtype=False)

    def unload(self) -> None:
        self.model = self.tokenizer = None
        self.__dict__.pop("_stop_cache", None)
        torch = import_torch()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def swap(self, model_dir: Path, base_model_dir: Path | None = None) -> bool:
        """New weights into the loaded model (``load_state_dict``-style copies; a LoRA adapter is merged into
        the base's weights, loaded the same way), when the architecture and shapes are the model's."""
        adapter = is_adapter(model_dir)
        if adapter and base_model_dir is None:
            return False
        weights_dir = base_model_dir if adapter and base_model_dir is not None else model_dir
        wanted = shape_config(weights_dir, with_dtype=False)
        if self.model is None or wanted is None or wanted != self._shape:
            self.swap_refusal = "its architecture or shapes differ from the loaded model's"
            return False
        if not load_weights_into(self.model, weights_dir):
            self.swap_refusal = "its weights do not fit the loaded model's parameters"
            return False
        if adapter:
            self.model = merge_adapter(self.model, model_dir)
        self.model.eval()
        reread_generation_config(self.model, weights_dir)
        self.tokenizer = load_tokenizer(tokenizer_dir(model_dir, base_model_dir))
        return True

    def reset_caches(self) -> None:
        self.__dict__.pop("_stop_cache", None)  # built from the previous tokenizer

    def sleep(self) -> None:
        if self.model is not None and self.device.startswith("cuda"):
            self.model.to("cpu")
            import_torch().cuda.empty_cache()

    def wake(self) -> None:
        if self.model is not None and self.device.startswith("cuda"):
            self.model.to(self.device)

    def render(self, request: GenerationRequest) -> str:
        return render_prompt(self.tokenizer, request.prompt)

    def prompt_ids(self, requests: Sequence[GenerationRequest]) -> list[list[int]]:
        """The token ids fed to the model for each request (the same as every other backend's)."""
        return [prompt_token_ids(self.tokenizer, r.prompt) for r in requests]

    def _batch_size(self, longest: int) -> int:
        if "batch_size" in self.options:
            return int(self.options["batch_size"])
        cap = int(self.options.get("max_batch_size", 512))
        torch = import_torch()
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
        torch = import_torch()
        if self.model is None:
            raise RuntimeError("load() a model before generate()")
        prompts = self.prompt_ids(requests)
        lengths = [len(ids) for ids in prompts]
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
                    results = self._generate_batch([prompts[i] for i in chunk], requests[chunk[0]])
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

    def _generate_batch(self, prompts: list[list[int]], req: GenerationRequest) -> list[Completion]:
        tok = self.tokenizer
        enc = _left_padded(import_torch(), prompts, tok.pad_token_id, self.device)
        mode = self.options.get("decode", "generate")
        if mode == "generate" or not supports_compaction(self.model):
            rows = self._decode_with_generate(enc, req)
        else:
            rows = decode_compacting(
                self.model,
                tok,
                enc["input_ids"],
                enc["attention_mask"],
                req,
                eos_ids=self._eos_ids(),
                stop_mask=self._stop_candidates(req.stop) if req.stop else None,
                hook=self.options.get("logits_processor"),
            )
        completions = []
        for i in range(len(prompts)):
            outs, reasons, count = [], [], 0
            for ids, reason in rows[i * req.n : (i + 1) * req.n]:
                text, stopped = cut_at_stop(tok.decode(ids, skip_special_tokens=True), req.stop)
                outs.append(text)
                reasons.append("stop" if stopped else reason)
                count += len(ids)
            completions.append(Completion(outs, count, reasons))
        return completions

    def _eos_ids(self) -> set[int]:
        ids = {self.tokenizer.eos_token_id}
        extra = getattr(self.model.generation_config, "eos_token_id", None)
        ids |= set(extra) if isinstance(extra, list) else {extra}
        return {i for i in ids if i is not None}

    def _decode_with_generate(self, enc: Any, req: GenerationRequest) -> list[tuple[list[int], str]]:
        """transformers ``generate``: every row stays in the batch until the longest is done."""
        torch = import_torch()
        tok = self.tokenizer
        kwargs: GenerateKwargs = {
            "max_new_tokens": req.max_new_tokens,
            "do_sample": req.temperature > 0,
            "num_return_sequences": req.n,
            "pad_token_id": tok.pad_token_id,
            "eos_token_id": sorted(self._eos_ids()),
        }
        if req.temperature > 0:
            kwargs["temperature"], kwargs["top_p"] = req.temperature, req.top_p
            torch.manual_seed(req.seed)
        else:
            kwargs["temperature"], kwargs["top_p"], kwargs["top_k"] = None, None, None
        if req.stop:
            kwargs["stop_strings"], kwargs["tokenizer"] = list(req.stop), tok
        if self.options.get("logits_processor"):
            from transformers import LogitsProcessorList

            kwargs["logits_processor"] = LogitsProcessorList(
                [PromptLogitsProcessor(self.options["logits_processor"], tok.pad_token_id)]
            )
        with torch.inference_mode():
            generated = self.model.generate(**enc, **kwargs)
        eos = self._eos_ids()
        rows = []
        for ids in generated[:, enc["input_ids"].shape[1] :].tolist():
            cut = next((k for k, t in enumerate(ids) if t in eos), None)
            rows.append((ids[:cut], "eos") if cut is not None else (ids, "length"))
        return rows

    def _stop_candidates(self, stops: tuple[str, ...]) -> Any:
        """A mask over the vocabulary: tokens whose text could complete a stop string."""
        torch = import_torch()
        key = ("stop_mask", stops)
        cached = self.__dict__.get("_stop_cache")
        if cached is not None and cached[0] == key:
            return cached[1]
        ends = {s[-1] for s in stops if s}
        vocab = len(self.tokenizer)
        texts = self.tokenizer.convert_ids_to_tokens(list(range(vocab)))
        decoded = [self.tokenizer.convert_tokens_to_string([t]) if t is not None else "" for t in texts]
        mask = torch.tensor([any(c in d for c in ends) for d in decoded], dtype=torch.bool)
        self.__dict__["_stop_cache"] = (key, mask)
        return mask


class PromptLogitsProcessor:
    """Adapts a ``(prompt_ids_per_row, step, logits)`` callable to transformers' LogitsProcessor protocol."""

    def __init__(self, fn: Any, pad_id: int) -> None:
        self.fn, self.pad_id = fn, pad_id
        self.width: int | None = None
        self.prompts: list[list[int]] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.width is None:
            self.width = int(input_ids.shape[1])
            self.prompts = [[t for t in row if t != self.pad_id] for row in input_ids.tolist()]
        return self.fn(self.prompts, int(input_ids.shape[1]) - self.width, scores)


class GenerateKwargs(TypedDict, total=False):
    """The arguments autorl gives transformers' ``generate`` (:meth:`HFBackend._decode_with_generate`): greedy
    decoding sets the sampling settings to ``None`` (not the model's generation config's)."""

    max_new_tokens: int
    do_sample: bool
    num_return_sequences: int
    pad_token_id: int | None
    eos_token_id: list[int]
    temperature: float | None
    top_p: float | None
    top_k: None
    stop_strings: list[str]
    tokenizer: Any
    logits_processor: Any


def _left_padded(torch: Any, prompts: list[list[int]], pad_id: int, device: str) -> dict[str, Any]:
    """``input_ids`` and ``attention_mask`` for token-id prompts, padded on the left as batched generation needs."""
    width = max(len(p) for p in prompts)
    ids = [[pad_id] * (width - len(p)) + p for p in prompts]
    mask = [[0] * (width - len(p)) + [1] * len(p) for p in prompts]
    return {"input_ids": torch.tensor(ids, device=device), "attention_mask": torch.tensor(mask, device=device)}
