"""The ``vllm`` backend: ``vllm.LLM`` in this process, a warm engine, merged LoRA adapters, prefix caching."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

from autorl.errors import InvalidCheckpointError, MissingDependencyError
from autorl.inference.base import (
    Backend,
    Completion,
    GenerationRequest,
    cut_at_stop,
    fingerprint,
    is_adapter,
    prompt_token_ids,
)
from autorl.inference.engine_key import (
    decoding_difference,
    decoding_only,
    engine_key,
    keep_side_files,
    key_difference,
)
from autorl.inference.loading import load_tokenizer
from autorl.inference.weights import merged_checkpoint


def engine_environment(in_process: bool) -> dict[str, str]:
    """The environment vllm reads when an engine starts: the engine core in this process, or in a child."""
    return {"VLLM_ENABLE_V1_MULTIPROCESSING": "0" if in_process else "1"}


class SamplingKwargs(TypedDict):
    """The ``vllm.SamplingParams`` arguments autorl sets (:func:`sampling_kwargs`)."""

    n: int
    max_tokens: int
    temperature: float
    top_p: float
    stop: list[str] | None
    seed: int | None


def sampling_kwargs(request: GenerationRequest) -> SamplingKwargs:
    """``vllm.SamplingParams`` arguments equivalent to the hf backend's decoding for ``request``."""
    kwargs: SamplingKwargs = {
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
    """vllm's offline engine. Options: ``gpu_memory_utilization`` (0.45), ``kv_cache_memory_bytes`` (the KV cache in
    bytes, instead of profiling free memory: ``autorl run`` sets both from the run's share of a GPU it shares
    with its agent or other runs, :mod:`autorl.inference.gpu_share`), ``enable_prefix_caching`` (on),
    ``max_num_seqs``, ``compilation_config``,
    ``max_model_len``, ``tensor_parallel_size``, ``enforce_eager``, ``dtype`` (``auto``), ``warm_engine`` (on),
    ``engine_in_process`` (on), ``sleep_when_idle``, ``sleep_level`` (1).

    Measured on an H200 (bench/vllm_h200.md): 25-35x the naive ``model.generate`` loop; prefix caching 1.7x
    on 8-shot prompts; a quarter of the GPU loses nothing for a 1.5B model.

    **The same weights, the same outputs.** ``engine_in_process`` runs vllm's engine core in this process
    (``VLLM_ENABLE_V1_MULTIPROCESSING=0``). In a child process (vllm's default) the core keeps stepping while
    this process detokenizes, so a request that hit a stop string is dropped a variable number of steps
    later; the batches, and with them the bf16 numerics of every other request, change from run to run. On an
    H200 (bench/h200/warm_agreement.md) two fresh engines on one checkpoint then gave 299/300 identical items
    and teacher-forced log-probabilities up to 0.043 apart; in-process, 300/300 and bit-identical, whether
    the engine was fresh or had the weights reloaded. An engine in this process does not give all its GPU
    memory back when shut down (3-4 GB stayed per engine there), so the backend asks for a fresh worker process
    for each new engine (:meth:`~autorl.inference.base.Backend.engine_per_process`).

    **Warm engine** (``warm_engine``, on): the engine runs on a private copy of the model folder (hard links);
    a checkpoint of the same architecture, dtype, tokenizer and generation settings replaces that folder's
    files and is read into the running engine (``collective_rpc("reload_weights")``, which copies into the
    tensors the CUDA graphs hold: every parameter and buffer was bit-identical to a fresh engine's on the
    H200). The prefix cache is reset before every evaluation: blocks computed with the old weights would
    otherwise be reused. ``sleep_when_idle`` (for a GPU shared with the agent) starts the engine with sleep
    mode and puts it to sleep between evaluations (``sleep_level``, 1: weights kept in CPU memory, the KV
    cache dropped).

    **LoRA adapters are merged** into the base's weights (peft's ``merge_and_unload``, as the hf backend does;
    :func:`~autorl.inference.weights.merged_checkpoint`) and evaluated as a full checkpoint. vllm's own LoRA
    path was measured and not kept: the same adapter on one engine, first and after another adapter, gave
    271-274/300 identical items and log-probabilities up to 0.037 apart, in both process modes; it also needs
    an engine started with LoRA (a full restart after full checkpoints) and halves generation speed.
    """

    name = "vllm"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.llm: Any = None
        self.tokenizer: Any = None
        #: what a reload into the running engine must match (``_engine_key``); ``None`` when not kept
        self._engine: tuple[Any, ...] | None = None
        #: side files judged to decode alike with the running engine's tokenizer (:meth:`_decodes_alike`)
        self._alike: set[Any] = set()
        #: the adapter (fingerprint) last merged, and where the merged checkpoint is
        self._merged: tuple[tuple[Any, ...], Path] | None = None
        self._merge_root: Path | None = None  # a temp folder for merges when there is no scratch folder

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

        return {
            "name": self.name,
            "vllm": vllm.__version__,
            "dtype": str(self.options.get("dtype", "auto")),
            "prompt": "token ids",
            "adapters": "merged",
        }

    def in_process(self) -> bool:
        return bool(self.options.get("engine_in_process", True))

    def engine_per_process(self) -> bool:
        return self.in_process() or super().engine_per_process()

    def engine_kwargs(self, model: Path) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": str(model),
            "trust_remote_code": False,
            "enable_prefix_caching": True,
            "gpu_memory_utilization": float(self.options.get("gpu_memory_utilization", 0.45)),
            "tensor_parallel_size": int(self.options.get("tensor_parallel_size", 1)),
            "dtype": str(self.options.get("dtype", "auto")),
            "seed": 0,
        }
        for key in (
            "max_model_len",
            "enforce_eager",
            "max_num_seqs",
            "compilation_config",
            "enable_prefix_caching",
            "kv_cache_memory_bytes",
        ):
            if key in self.options:
                kwargs[key] = self.options[key]
        if self.options.get("sleep_when_idle") and self.keeps_engine():
            kwargs["enable_sleep_mode"] = True
        return kwargs

    @staticmethod
    def _engine_key(weights: Path) -> tuple[Any, ...] | None:
        """Everything of a full checkpoint that a running engine fixed at start (:func:`engine_key`)."""
        return engine_key(weights)

    def weights(self, model_dir: Path, base_model_dir: Path | None) -> Path:
        """The full checkpoint the engine runs for ``model_dir``: itself, or a LoRA adapter merged into the base
        (once per adapter: the merge is kept until the next adapter)."""
        if not is_adapter(model_dir):
            return model_dir
        if base_model_dir is None:
            raise InvalidCheckpointError(f"{model_dir} is a LoRA adapter but no base model was given")
        key = fingerprint(model_dir, base_model_dir)
        if self._merged is not None and self._merged[0] == key and self._merged[1].is_dir():
            return self._merged[1]
        if self.scratch_dir is None and self._merge_root is None:
            self._merge_root = Path(tempfile.mkdtemp(prefix="autorl-merged-"))
        root = self.scratch_dir if self.scratch_dir is not None else self._merge_root
        assert root is not None
        target = merged_checkpoint(model_dir, base_model_dir, root / "merged")
        self._merged = (key, target)
        return target

    def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
        try:
            from vllm import LLM
        except ImportError as exc:
            raise MissingDependencyError("the vllm backend", "vllm") from exc
        weights = self.weights(model_dir, base_model_dir)
        engine_model = weights
        kept = self.scratch_dir is not None and self.keeps_engine()
        if kept:
            assert self.scratch_dir is not None
            # a folder of our own whose files a later reload replaces (never the snapshot itself)
            link_tree(weights, self.scratch_dir / "engine-model")
            engine_model = self.scratch_dir / "engine-model"
            # the tokenizer the engine decodes with for as long as it runs, whatever later reloads bring
            keep_side_files(weights, self.scratch_dir / "engine-tokenizer")
        os.environ.update(engine_environment(self.in_process()))
        self.llm = LLM(**self.engine_kwargs(engine_model))
        self._engine = self._engine_key(weights) if kept else None
        self._alike = set()
        self.tokenizer = load_tokenizer(weights)

    def swap(self, model_dir: Path, base_model_dir: Path | None = None) -> bool:
        if self.llm is None or self._engine is None or self.scratch_dir is None:
            return False
        weights = self.weights(model_dir, base_model_dir)
        key = self._engine_key(weights)
        if key is None or key != self._engine:
            self.swap_refusal = key_difference(self._engine, key)
            if key is None or not self._decodes_alike(key, weights):
                return False
            self.swap_refusal = None
        link_tree(weights, self.scratch_dir / "engine-model")
        self.llm.collective_rpc("reload_weights")
        self.tokenizer = load_tokenizer(weights)
        return True

    def _decodes_alike(self, key: tuple[Any, ...], weights: Path) -> bool:
        """Whether a checkpoint whose engine key differs from the running engine's only in files it decodes with
        decodes alike (:func:`decoding_difference`) with the tokenizer the engine started with."""
        assert self._engine is not None and self.scratch_dir is not None
        if not decoding_only(self._engine, key):
            return False
        if key[1] in self._alike:  # judged already for this engine: the same files decode alike again
            return True
        why = decoding_difference(self.scratch_dir / "engine-tokenizer", weights)
        if why is not None:
            self.swap_refusal = why
            return False
        self._alike.add(key[1])
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
            # stop the engine core now (a child process, or this one's), so a new engine gets the GPU back
            with contextlib.suppress(Exception):
                self.llm.llm_engine.engine_core.shutdown()
        self.llm = self.tokenizer = None
        self._engine = None
        if self._merge_root is not None:
            shutil.rmtree(self._merge_root, ignore_errors=True)
            self._merge_root = self._merged = None
        import gc

        gc.collect()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        from vllm import SamplingParams

        prompts = vllm_prompts(self.tokenizer, requests)
        params = [SamplingParams(**sampling_kwargs(r)) for r in requests]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        result = []
        for req, out in zip(requests, outputs, strict=True):
            texts = [cut_at_stop(o.text, req.stop)[0] for o in out.outputs]
            tokens = sum(len(o.token_ids) for o in out.outputs)
            result.append(Completion(texts, tokens, [str(o.finish_reason) for o in out.outputs]))
        return result
