"""The ``hf`` backend: transformers generation on CPU or CUDA, sorted by length, OOM-safe, early-stopping.

Over 300 lines for a reason: one backend class with its two decoding loops (``generate`` and the compacting
one), its loading, and the in-place weight swap of a warm worker (helpers in :mod:`autorl.inference.weights`).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autorl.errors import InvalidCheckpointError, MissingDependencyError
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


def tokenizer_dir(model_dir: Path, base_model_dir: Path | None = None) -> Path:
    """Where a checkpoint's tokenizer is read from: its own folder, or the base model's for an adapter without one."""
    if is_adapter(model_dir) and not _has_tokenizer(model_dir) and base_model_dir is not None:
        return base_model_dir
    return model_dir


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
    else:
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), **kwargs)
    model.to(device)
    model.eval()
    return model, load_tokenizer(tokenizer_dir(model_dir, base_model_dir))


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
    torch = _import_torch()
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
        torch = _import_torch()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def swap(self, model_dir: Path, base_model_dir: Path | None = None) -> bool:
        """New weights into the loaded model (``load_state_dict``-style copies; a LoRA adapter is merged into
        the base's weights, loaded the same way), when the architecture and shapes are the model's."""
        from autorl.inference.weights import load_weights_into, merge_adapter, reread_generation_config

        adapter = is_adapter(model_dir)
        if adapter and base_model_dir is None:
            return False
        weights_dir = base_model_dir if adapter and base_model_dir is not None else model_dir
        wanted = shape_config(weights_dir, with_dtype=False)
        if self.model is None or wanted is None or wanted != self._shape:
            return False
        if not load_weights_into(self.model, weights_dir):
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
            _import_torch().cuda.empty_cache()

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
        enc = _left_padded(_import_torch(), prompts, tok.pad_token_id, self.device)
        mode = self.options.get("decode", "generate")
        if mode == "generate" or not _supports_compaction(self.model):
            rows = self._decode_with_generate(enc, req)
        else:
            rows = self._decode_compacting(enc["input_ids"], enc["attention_mask"], req)
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
        torch = _import_torch()
        tok = self.tokenizer
        kwargs: dict[str, Any] = {
            "max_new_tokens": req.max_new_tokens,
            "do_sample": req.temperature > 0,
            "num_return_sequences": req.n,
            "pad_token_id": tok.pad_token_id,
            "eos_token_id": sorted(self._eos_ids()),
        }
        if req.temperature > 0:
            kwargs.update(temperature=req.temperature, top_p=req.top_p)
            torch.manual_seed(req.seed)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        if req.stop:
            kwargs.update(stop_strings=list(req.stop), tokenizer=tok)
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
        torch = _import_torch()
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

    def _decode_compacting(self, input_ids: Any, attention_mask: Any, req: GenerationRequest) -> list[tuple[list[int], str]]:
        """Greedy or sampled decoding that drops finished rows from the batch and its KV cache.

        With GSM8K-like outputs most rows finish long before the longest one; ``generate`` keeps
        computing them all. Here finished rows leave the batch once they are a quarter of it.
        """
        torch = _import_torch()
        from transformers import DynamicCache

        model, tok = self.model, self.tokenizer
        if req.n > 1:
            input_ids = input_ids.repeat_interleave(req.n, dim=0)
            attention_mask = attention_mask.repeat_interleave(req.n, dim=0)
        total = input_ids.shape[0]
        eos = torch.tensor(sorted(self._eos_ids()), device=input_ids.device)
        stop_mask = self._stop_candidates(req.stop).to(input_ids.device) if req.stop else None
        generator = None
        if req.temperature > 0:
            generator = torch.Generator(device=input_ids.device).manual_seed(req.seed)
        rows: list[list[int]] = [[] for _ in range(total)]
        reasons = ["length"] * total
        present = list(range(total))  # original row index of each batch row
        finished = [False] * total
        hook = self.options.get("logits_processor")
        prompts = [[t for t, m in zip(r, mk, strict=True) if m] for r, mk in
                   zip(input_ids.tolist(), attention_mask.tolist(), strict=True)] if hook else []
        cache = DynamicCache(config=model.config)
        cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                        use_cache=True, logits_to_keep=1, **{cache_arg: cache})
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
                out = model(input_ids=feed[:, None], attention_mask=attention_mask, position_ids=next_pos,
                            use_cache=True, **{cache_arg: cache})
                next_pos = next_pos + 1
        return list(zip(rows, reasons, strict=True))


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


def _left_padded(torch: Any, prompts: list[list[int]], pad_id: int, device: str) -> dict[str, Any]:
    """``input_ids`` and ``attention_mask`` for token-id prompts, padded on the left as batched generation needs."""
    width = max(len(p) for p in prompts)
    ids = [[pad_id] * (width - len(p)) + p for p in prompts]
    mask = [[0] * (width - len(p)) + [1] * len(p) for p in prompts]
    return {"input_ids": torch.tensor(ids, device=device), "attention_mask": torch.tensor(mask, device=device)}


def _sample(torch: Any, logits: Any, temperature: float, top_p: float, generator: Any) -> Any:
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        cumulative = sorted_probs.cumsum(dim=-1)
        sorted_probs[cumulative - sorted_probs > top_p] = 0.0
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _supports_compaction(model: Any) -> bool:
    """Whether the model's KV cache can drop rows (decoder-only models with transformers' DynamicCache)."""
    from transformers import DynamicCache

    return hasattr(DynamicCache, "batch_select_indices") and not model.config.is_encoder_decoder
