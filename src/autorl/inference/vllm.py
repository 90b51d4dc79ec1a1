"""The ``vllm`` backend: ``vllm.LLM`` in this process, a warm engine, merged LoRA adapters, prefix caching."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autorl.errors import InvalidCheckpointError, MissingDependencyError
from autorl.inference.base import (
    Backend,
    Completion,
    GenerationRequest,
    cut_at_stop,
    fingerprint,
    is_adapter,
    prompt_token_ids,
    shape_config,
)
from autorl.inference.loading import load_tokenizer
from autorl.inference.weights import merged_checkpoint, side_files


def engine_environment(in_process: bool) -> dict[str, str]:
    """The environment vllm reads when an engine starts: the engine core in this process, or in a child."""
    return {"VLLM_ENABLE_V1_MULTIPROCESSING": "0" if in_process else "1"}


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


#: keys of the side files that a running engine never reads to decode or to stop (written by the saving library,
#: or used only to pad and truncate a batch), by file name; ``model_max_length`` is not one (vllm caps the
#: engine's context at it)
_INERT_SIDE_KEYS = {
    "tokenizer_config.json": frozenset({"padding_side", "truncation_side", "local_files_only", "is_local",
                                        "pad_token_type_id", "max_length", "pad_to_multiple_of",
                                        "name_or_path", "_commit_hash", "stride", "truncation_strategy"}),
    "tokenizer.json": frozenset({"padding", "truncation"}),
    "generation_config.json": frozenset({"transformers_version", "_from_model_config"}),
}
#: BPE's "no prefix" and "no suffix", written as null by one version of tokenizers and as "" by another
_EMPTY_AS_NONE = frozenset({"continuing_subword_prefix", "end_of_word_suffix"})


def _meaningful(value: Any, inert: frozenset[str] = frozenset()) -> Any:
    if isinstance(value, dict):
        return {k: _meaningful(v) for k, v in value.items()
                if k not in inert and v is not None and not (k in _EMPTY_AS_NONE and v == "")}
    if isinstance(value, list):
        return [_meaningful(v) for v in value]
    return value


def side_file_view(path: Path) -> bytes:
    """What an engine reads of one side file: a JSON file's content less its inert keys and null values, in one
    canonical form (the tokenizer that ``save_pretrained`` writes back, with other spellings of the same
    settings, is the same tokenizer); any other file's bytes."""
    data = path.read_bytes()
    if not path.name.endswith(".json"):
        return data
    try:
        parsed = json.loads(data)
    except ValueError:
        return data
    view = _meaningful(parsed, _INERT_SIDE_KEYS.get(path.name, frozenset()))
    return json.dumps(view, sort_keys=True, separators=(",", ":")).encode()


def side_views(model_dir: Path) -> tuple[tuple[str, str], ...]:
    """Each side file's name and the digest of its :func:`side_file_view`: every file besides the weights and
    ``config.json`` that the engine reads once at start (tokenizer, chat templates, generation settings:
    :func:`~autorl.inference.weights.side_files`). A reload into a running engine needs them to mean the same,
    since it keeps the ones it started with."""
    return tuple((path.relative_to(model_dir).as_posix(), hashlib.sha256(side_file_view(path)).hexdigest())
                 for path in side_files(model_dir))


def side_files_digest(model_dir: Path) -> str:
    """One digest of :func:`side_views`."""
    h = hashlib.sha256()
    for name, digest in side_views(model_dir):
        h.update(name.encode() + b"\0" + digest.encode())
    return h.hexdigest()


#: side files the engine reads only to decode what it generates (and to render chat templates, which it never
#: does here: prompts arrive as token ids); a difference in them is judged by what the two tokenizers decode
_DECODING_PREFIXES = ("tokenizer", "vocab", "merges", "special_tokens", "added_tokens", "chat_template")


def _decoding_file(name: str) -> bool:
    return name.startswith(_DECODING_PREFIXES) or name.endswith((".model", ".spm", ".tiktoken", ".jinja"))


def decoding_difference(old_dir: Path, new_dir: Path, probes: int = 400) -> str | None:
    """How the tokenizer of ``new_dir`` decodes otherwise than that of ``old_dir`` (each loaded as vllm loads it:
    ``AutoTokenizer``, no remote code), or ``None`` when it decodes alike: the same vocabulary size, special ids,
    end and padding ids and space clean-up, every single token the same text with and without its special
    tokens, and ``probes`` seeded random sequences too. A trainer that saves its tokenizer again writes other
    bytes, keys and even another class name for the same decoding; a running engine keeps the one it started
    with, which is then as good."""
    import random

    from transformers import AutoTokenizer

    try:
        a = AutoTokenizer.from_pretrained(str(old_dir), trust_remote_code=False)
        b = AutoTokenizer.from_pretrained(str(new_dir), trust_remote_code=False)
    except Exception as exc:  # a tokenizer that does not load decodes nothing alike
        return f"its tokenizer does not load ({type(exc).__name__})"
    for what in ("__len__", "all_special_ids", "eos_token_id", "pad_token_id", "bos_token_id",
                 "clean_up_tokenization_spaces"):
        mine = len(a) if what == "__len__" else getattr(a, what, None)
        theirs = len(b) if what == "__len__" else getattr(b, what, None)
        if (sorted(mine) if isinstance(mine, list) else mine) != (sorted(theirs) if isinstance(theirs, list) else theirs):
            return f"its tokenizer differs in {what.strip('_')}"
    state = _decoder_state(a)
    if state is not None and state == _decoder_state(b):
        return None  # the same vocabulary, added tokens and decoder in the backend each class built
    size = len(a)
    rng = random.Random(0)
    seqs = [[i] for i in range(size)] + [[rng.randrange(size) for _ in range(rng.randint(2, 24))]
                                         for _ in range(probes)]
    for skip in (True, False):
        if a.batch_decode(seqs, skip_special_tokens=skip) != b.batch_decode(seqs, skip_special_tokens=skip):
            return "its tokenizer decodes some tokens otherwise"
    return None


def _decoder_state(tok: Any) -> Any:
    """What a fast tokenizer's backend decodes with (its model's vocabulary and merges, added tokens, decoder), as
    the class that loaded it built it; ``None`` for a tokenizer without such a backend."""
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        return None
    try:
        state = json.loads(backend.to_str())
    except (AttributeError, ValueError, TypeError):
        return None
    return _meaningful([state.get(k) for k in ("model", "added_tokens", "decoder")])


def key_difference(old: tuple[Any, ...] | None, new: tuple[Any, ...] | None) -> str:
    """Why a checkpoint's :meth:`VLLMBackend._engine_key` keeps it out of a running engine, in words."""
    if old is None or new is None:
        return "its config.json cannot be read"
    if old[0] != new[0]:
        return "its architecture, shapes or dtype differ from the running engine's"
    mine, theirs = dict(old[1]), dict(new[1])
    names = sorted(n for n in set(mine) | set(theirs) if mine.get(n) != theirs.get(n))
    return f"its tokenizer or generation settings differ ({', '.join(names)})"


def keep_side_files(source: Path, target: Path) -> None:
    """A copy of ``source``'s :func:`~autorl.inference.weights.side_files` and ``config.json`` in ``target``
    (replaced): what a tokenizer is loaded from."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for path in [*side_files(source), source / "config.json"]:
        if path.is_file() and not path.is_symlink():
            dest = target / path.relative_to(source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)


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

        return {"name": self.name, "vllm": vllm.__version__, "dtype": str(self.options.get("dtype", "auto")),
                "prompt": "token ids", "adapters": "merged"}

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
        for key in ("max_model_len", "enforce_eager", "max_num_seqs", "compilation_config", "enable_prefix_caching",
                    "kv_cache_memory_bytes"):
            if key in self.options:
                kwargs[key] = self.options[key]
        if self.options.get("sleep_when_idle") and self.keeps_engine():
            kwargs["enable_sleep_mode"] = True
        return kwargs

    @staticmethod
    def _engine_key(weights: Path) -> tuple[Any, ...] | None:
        """Everything of a full checkpoint that a running engine fixed at start; ``None`` when unreadable."""
        config = shape_config(weights, with_dtype=True)
        if config is None:
            return None
        return (json.dumps(config, sort_keys=True), side_views(weights))

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
        if key[0] != self._engine[0]:
            return False
        if key[1] in self._alike:  # judged already for this engine: the same files decode alike again
            return True
        mine, theirs = dict(self._engine[1]), dict(key[1])
        if any(not _decoding_file(n) for n in set(mine) | set(theirs) if mine.get(n) != theirs.get(n)):
            return False
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
