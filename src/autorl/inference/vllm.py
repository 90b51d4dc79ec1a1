"""The ``vllm`` backend: in-process ``vllm.LLM``, LoRA requests, prefix caching, a GPU memory share."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autorl.errors import MissingDependencyError
from autorl.inference.base import (
    Backend,
    Completion,
    GenerationRequest,
    cut_at_stop,
    is_adapter,
    prompt_token_ids,
    shape_config,
)

#: files besides the weights that the engine reads once at start (tokenizer, generation settings): a reload
#: into a running engine needs them byte-identical, since it keeps the ones it started with
ENGINE_SIDE_FILES = (
    "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json",
    "added_tokens.json", "tokenizer.model", "chat_template.jinja", "chat_template.json", "generation_config.json",
)


def sampling_kwargs(request: GenerationRequest) -> dict[str, Any]:
    """``vllm.SamplingParams`` arguments equivalent to the hf backend's decoding for ``request``."""
    kwargs: dict[str, Any] = {
        "n": request.n,
        "max_tokens": request.max_new_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p if request.temperature > 0 else 1.0,
        "stop": list(request.stop) or None,
        "seed": request.seed if request.temperature > 0 else None,
    }
    return kwargs


def vllm_prompts(tokenizer: Any, requests: Sequence[GenerationRequest]) -> list[dict[str, list[int]]]:
    """The prompts handed to ``LLM.generate``: token ids, tokenized as every backend does.

    vllm given text would tokenize it itself and add a BOS for Llama-style tokenizers (a second one after a
    chat template's), so the model would see other tokens than under the hf backend.
    """
    return [{"prompt_token_ids": prompt_token_ids(tokenizer, r.prompt)} for r in requests]


def adapter_rank(adapter_dir: Path) -> int:
    return int(json.loads((adapter_dir / "adapter_config.json").read_text()).get("r", 16))


def lora_rank_capacity(rank: int) -> int:
    """The ``max_lora_rank`` an engine is started with: at least 64 (so later adapters of another rank fit
    without a new engine), a power of two as vllm accepts."""
    cap = 64
    while cap < rank:
        cap *= 2
    return cap


def side_files_digest(model_dir: Path) -> str:
    h = hashlib.sha256()
    for name in ENGINE_SIDE_FILES:
        path = model_dir / name
        if path.is_file():
            h.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def link_tree(source: Path, target: Path) -> None:
    """Make ``target`` hold ``source``'s files (hard links where the filesystem allows, else copies), replacing
    whatever it held: an engine started on ``target`` then reads the new weights under the same path."""
    fresh = target.with_name(target.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, fresh, copy_function=link)
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        os.replace(target, old)
    os.replace(fresh, target)
    shutil.rmtree(old, ignore_errors=True)


class VLLMBackend(Backend):
    """vllm's offline engine. Options: ``gpu_memory_utilization`` (0.45; ``autorl run`` gives 0.25 when the
    agent shares the grader's GPU), ``enable_prefix_caching`` (on), ``max_num_seqs``, ``compilation_config``,
    ``max_model_len``, ``tensor_parallel_size``, ``enforce_eager``, ``dtype`` (``auto``).

    Measured on an H200 (bench/vllm_h200.md): 25-35x the naive ``model.generate`` loop; prefix caching 1.7x
    on 8-shot prompts; a quarter of the GPU loses nothing for a 1.5B model; a LoRA submission halves speed.

    ``warm_engine`` (off by default): a warm grader worker keeps the engine between submissions. Off, each
    evaluation starts an engine in the worker (the process and ``import vllm`` are still kept) and frees it
    afterwards. Why off: measured on an H200 (bench/h200/results-warm-engine-vllm.json) a kept engine was
    50-90x faster per submission, but on a random-initialised 1.5B model its per-item greedy outputs were only
    91-95% identical to a fresh engine's for the same weights (two fresh engines: 100%), and they depended on
    which checkpoint the engine held before, so a score could depend on the order of submissions.

    With ``warm_engine``, the engine runs on a private copy of the model
    folder (hard links): a checkpoint of the same architecture, dtype, tokenizer and generation settings
    replaces that folder's files and is read into the running engine (``collective_rpc("reload_weights")``);
    a LoRA adapter becomes a new ``LoRARequest`` on an engine started with LoRA on the same base. The prefix
    cache is reset before every evaluation: blocks computed with the old weights would otherwise be reused.
    ``sleep_when_idle`` (for a GPU shared with the agent) starts the engine with sleep mode and puts it to
    sleep between evaluations (``sleep_level``, 1: weights kept in CPU memory, the KV cache dropped).
    """

    name = "vllm"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.llm: Any = None
        self.lora: Any = None
        self.tokenizer: Any = None
        #: what a reload into the running engine must match (``_engine_key``)
        self._engine: tuple[Any, ...] | None = None
        self._lora_ids = itertools.count(1)

    @classmethod
    def available(cls) -> bool:
        try:
            import importlib.util

            if importlib.util.find_spec("vllm") is None:
                return False
            import torch

            return bool(torch.cuda.is_available())
        except ImportError:
            return False

    def identity(self) -> dict[str, Any]:
        import vllm

        return {"name": self.name, "vllm": vllm.__version__, "dtype": str(self.options.get("dtype", "auto")),
                "prompt": "token ids"}

    def engine_kwargs(self, model: Path, lora: bool, max_lora_rank: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": str(model),
            "trust_remote_code": False,
            "enable_prefix_caching": True,
            "gpu_memory_utilization": float(self.options.get("gpu_memory_utilization", 0.45)),
            "tensor_parallel_size": int(self.options.get("tensor_parallel_size", 1)),
            "dtype": str(self.options.get("dtype", "auto")),
            "seed": 0,
        }
        for key in ("max_model_len", "enforce_eager", "max_num_seqs", "compilation_config", "enable_prefix_caching"):
            if key in self.options:
                kwargs[key] = self.options[key]
        if lora:
            kwargs.update(enable_lora=True, max_lora_rank=max_lora_rank, max_loras=1)
        if self.options.get("sleep_when_idle") and self.keeps_engine():
            kwargs["enable_sleep_mode"] = True
        return kwargs

    def keeps_engine(self) -> bool:
        return bool(self.options.get("warm_engine", False))

    def _engine_key(self, model_dir: Path, base_model_dir: Path | None) -> tuple[Any, ...] | None:
        """Everything of a checkpoint that a running engine fixed at start; ``None`` when unreadable."""
        adapter = is_adapter(model_dir)
        weights = base_model_dir if adapter else model_dir
        if weights is None:
            return None
        config = shape_config(weights, with_dtype=True)
        if config is None:
            return None
        base = str(weights.resolve()) if adapter else None
        return (json.dumps(config, sort_keys=True), side_files_digest(weights), adapter, base)

    def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
        try:
            from vllm import LLM
        except ImportError as exc:
            raise MissingDependencyError("the vllm backend", "vllm") from exc
        adapter = is_adapter(model_dir)
        engine_model = base_model_dir if adapter and base_model_dir else model_dir
        rank = lora_rank_capacity(adapter_rank(model_dir)) if adapter else 0
        if self.scratch_dir is not None and self.keeps_engine():
            # a folder of our own whose files a later reload replaces (never the snapshot itself)
            link_tree(engine_model, self.scratch_dir / "engine-model")
            engine_model = self.scratch_dir / "engine-model"
        self.llm = LLM(**self.engine_kwargs(engine_model, adapter, rank))
        key = self._engine_key(model_dir, base_model_dir) if self.scratch_dir and self.keeps_engine() else None
        self._engine = (*key, rank) if key is not None else None
        self._use(model_dir, base_model_dir)

    def _use(self, model_dir: Path, base_model_dir: Path | None) -> None:
        from vllm.lora.request import LoRARequest

        from autorl.inference.hf import load_tokenizer, tokenizer_dir

        # the tokenizer the hf backend would use (an adapter's own, when it ships one)
        self.tokenizer = load_tokenizer(tokenizer_dir(model_dir, base_model_dir))
        if self.lora is not None:
            with contextlib.suppress(Exception):  # max_loras is 1: vllm would evict it anyway
                self.llm.llm_engine.remove_lora(self.lora.lora_int_id)
        # a new id per adapter: vllm caches adapters by id
        self.lora = LoRARequest(f"submission-{next(self._lora_ids)}", next(self._lora_ids), str(model_dir)) \
            if is_adapter(model_dir) else None

    def swap(self, model_dir: Path, base_model_dir: Path | None = None) -> bool:
        if self.llm is None or self._engine is None or self.scratch_dir is None:
            return False
        adapter = is_adapter(model_dir)
        key = self._engine_key(model_dir, base_model_dir)
        if key is None or key != self._engine[:-1] or (adapter and adapter_rank(model_dir) > self._engine[-1]):
            return False
        if not adapter:
            link_tree(model_dir, self.scratch_dir / "engine-model")
            self.llm.collective_rpc("reload_weights")
        # an adapter's engine holds the base's weights, always (it never reloads a full checkpoint)
        self._use(model_dir, base_model_dir)
        return True

    def reset_caches(self) -> None:
        if self.llm is not None and self.llm.reset_prefix_cache() is False:
            raise RuntimeError("vllm did not reset its prefix cache (requests still running?)")

    def sleep(self) -> None:
        if self.llm is not None:
            self.llm.sleep(level=int(self.options.get("sleep_level", 1)))

    def wake(self) -> None:
        if self.llm is not None:
            self.llm.wake_up()
            if int(self.options.get("sleep_level", 1)) >= 2:  # level 2 dropped the weights too
                self.llm.collective_rpc("reload_weights")

    def unload(self) -> None:
        if self.llm is not None:
            # the engine core runs in a child process: stop it now, so a new engine gets the GPU memory back
            with contextlib.suppress(Exception):
                self.llm.llm_engine.engine_core.shutdown()
        self.llm = self.tokenizer = self.lora = None
        self._engine = None
        import gc

        gc.collect()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        from vllm import SamplingParams

        prompts = vllm_prompts(self.tokenizer, requests)
        params = [SamplingParams(**sampling_kwargs(r)) for r in requests]
        outputs = self.llm.generate(prompts, params, lora_request=self.lora, use_tqdm=False)
        result = []
        for req, out in zip(requests, outputs, strict=True):
            texts = [cut_at_stop(o.text, req.stop)[0] for o in out.outputs]
            tokens = sum(len(o.token_ids) for o in out.outputs)
            result.append(Completion(texts, tokens, [str(o.finish_reason) for o in out.outputs]))
        return result
