"""The one evaluation path: baselines, submissions and ``autorl eval`` all go through :func:`evaluate_model`."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from autorl.errors import UsageError
from autorl.evaluation.generation import evaluator_for
from autorl.evaluation.identity import eval_config, stable_hash
from autorl.evaluation.schema import summary
from autorl.evaluation.stats import summarize
from autorl.inference.base import FRESH
from autorl.inference.gpu_share import gpu_turn
from autorl.jsonio import write_jsonl_atomic

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.evaluation.schema import EvalIdentity
    from autorl.evaluation.schema import EvalRecord as EvalRecordDict
    from autorl.inference.base import Backend, StartLock
    from autorl.scoring import Item


@dataclass
class EvalRecord:
    """A score and everything needed to trust and reproduce it."""

    benchmark: str
    split: str
    score: float
    n: int
    stderr: float
    ci95: list[float]
    config_hash: str
    config: EvalIdentity
    item_scores: dict[str, float]
    errors: int
    duration_s: float
    output_tokens: int
    per_item_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: how the model got into the engine: ``fresh`` (a new engine), ``reused`` (the engine held these very
    #: files), ``reloaded`` (new weights swapped into the running engine); never part of the config hash
    engine: str = "fresh"
    #: seconds to get the model into the engine (start, reload or nothing), and to generate and score
    load_s: float = 0.0
    generate_s: float = 0.0

    def to_dict(self, items: bool = True) -> EvalRecordDict:
        """The record as JSON (:class:`autorl.evaluation.schema.EvalRecord`); without ``items`` its summary, no
        per-item scores."""
        record: EvalRecordDict = {
            "benchmark": self.benchmark,
            "split": self.split,
            "score": self.score,
            "n": self.n,
            "stderr": self.stderr,
            "ci95": list(self.ci95),
            "config_hash": self.config_hash,
            "config": copy.deepcopy(self.config),
            "item_scores": dict(self.item_scores),
            "errors": self.errors,
            "duration_s": self.duration_s,
            "output_tokens": self.output_tokens,
            "per_item_path": self.per_item_path,
            "extra": copy.deepcopy(self.extra),
            "engine": self.engine,
            "load_s": self.load_s,
            "generate_s": self.generate_s,
        }
        return record if items else summary(record)


class EngineFigures(TypedDict, total=False):
    """How the engine of one evaluation was had, in its record's ``extra``."""

    #: seconds to wake an engine that slept before this evaluation (part of ``load_s``), and its sleep's
    wake_s: float
    sleep_s: float
    #: the wait for the GPU's engine-start lock (:func:`autorl.inference.gpu_share.engine_start`)
    gpu_turn: StartLock
    #: why the engine was started afresh rather than given these weights in place
    fresh_because: str


def _engine_figures(backend: Backend) -> EngineFigures:
    """A warm engine that slept before this evaluation: how long waking it (in ``load_s``) and the sleep took;
    an engine started or woken on a GPU: how long it waited for its turn (``gpu_turn``)."""
    figures: EngineFigures = {}
    if backend.last_wake_s is not None:
        figures = {"wake_s": round(backend.last_wake_s, 3), "sleep_s": round(backend.last_sleep_s or 0.0, 3)}
    if backend.last_start_lock:
        figures["gpu_turn"] = backend.last_start_lock
    if backend.last_fresh_reason:
        figures["fresh_because"] = backend.last_fresh_reason
    return figures


def evaluate_model(
    benchmark: Benchmark,
    backend: Backend,
    model_dir: Path,
    *,
    split: str,
    hidden_dir: Path,
    base_model_dir: Path | None = None,
    limit: int | None = None,
    per_item_path: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    keep_loaded: bool = False,
) -> EvalRecord:
    """Evaluate ``model_dir`` on ``split`` of ``benchmark``; write per-item records if asked.

    ``hidden_dir`` is the grader's folder of the benchmark's hidden data; it becomes ``benchmark.hidden_dir``.

    With ``keep_loaded`` (a warm grader worker) the backend keeps its engine afterwards and gets the model
    through :meth:`~autorl.inference.base.Backend.acquire` (reused, reloaded in place, or loaded afresh);
    otherwise it is loaded and unloaded here. The record says which (``engine``) and the config hash does not.
    """
    if split not in benchmark.splits:
        raise UsageError(f"{benchmark.name} has no split {split!r}; it has {', '.join(benchmark.splits)}")
    benchmark.hidden_dir = hidden_dir
    benchmark.prepare_eval_data(hidden_dir)
    items = benchmark.load_items(split, hidden_dir)
    if limit is not None:
        items = items[:limit]
    started = time.monotonic()
    backend.model_dir = model_dir
    if backend.gpu_turn is None:  # engine starts on a GPU take turns with every other run's
        backend.gpu_turn = gpu_turn
    if keep_loaded:
        engine = backend.acquire(model_dir, base_model_dir)
    else:
        backend.last_start_lock = None
        backend.start(model_dir, base_model_dir)
        engine = FRESH
    loaded = time.monotonic()
    try:
        done = 0

        def tick(k: int) -> None:
            nonlocal done
            done += k
            if progress:
                progress(done, len(items))

        evaluator = evaluator_for(benchmark)
        results = evaluator.evaluate(benchmark, items, backend, tick)
    except BaseException:
        if keep_loaded:
            backend.release()  # an engine that failed mid-evaluation is not trusted with the next one
        raise
    finally:
        generated = time.monotonic()
        if not keep_loaded:
            backend.unload()
    stats = summarize([r.score for r in results])
    config = eval_config(benchmark, split, backend, hidden_dir, limit)
    record = EvalRecord(
        benchmark=benchmark.name,
        split=split,
        score=stats.mean,
        n=stats.n,
        stderr=stats.stderr,
        ci95=list(stats.ci95),
        config_hash=stable_hash(config),
        config=config,
        item_scores={r.id: r.score for r in results},
        errors=sum(1 for r in results if r.error),
        duration_s=time.monotonic() - started,
        output_tokens=sum(int(r.extra.get("output_tokens", 0)) for r in results),
        per_item_path=str(per_item_path) if per_item_path else None,
        extra={
            "ci_method": stats.method,
            "single_split": len(benchmark.splits) == 1,
            **evaluator.summary(results),
            **_engine_figures(backend),
        },
        engine=engine,
        load_s=round(loaded - started, 3),
        generate_s=round(generated - loaded, 3),
    )
    if per_item_path is not None:
        per_item_path.parent.mkdir(parents=True, exist_ok=True)
        shown = {item.id: item_view(benchmark, item) for item in items}
        write_jsonl_atomic(per_item_path, ({**r.to_dict(), **shown.get(r.id, {})} for r in results), mode=0o644)
    return record


class ItemView(TypedDict):
    """What a per-item record shows of its item (:func:`item_view`)."""

    prompt: str
    reference: Any


def item_view(benchmark: Benchmark, item: Item) -> ItemView:
    """What a per-item record shows of its item beside the model's answer: ``prompt``, the item's own text (its
    fields in the prompt template; no few-shot examples or system prompt, which are the same for every item and
    are in the record's config), and ``reference``, its reference answer. An item whose fields the template
    cannot take (an episode's environment spec) shows them as JSON."""
    try:
        prompt = benchmark.config().prompt_template.format_map(item.input)
    except (KeyError, IndexError, ValueError, AttributeError, TypeError):
        prompt = json.dumps(dict(item.input), default=str, ensure_ascii=False)
    return {"prompt": prompt, "reference": item.reference}
