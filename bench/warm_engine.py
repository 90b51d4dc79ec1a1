"""Per-submission latency of a grader slot: one warm worker against a fresh worker per submission.

Through the grader's own :class:`autorl.grader.jobs.EvalSlot` (submit to record, as the grader calls it): a
baseline plus ten full-checkpoint submissions and three LoRA submissions on the 300 ``arith`` dev items, and a
baseline plus a few submissions on a 1,319-item GSM8K-shaped set with 8-shot prompts; then one fresh worker per
kind of submission, whose per-item outputs are compared with the warm worker's for the same checkpoint.

The model is a random-initialised Qwen2.5-1.5B shape (``bench/vllm_vs_hf.py prepare``); two "trained"
checkpoints are the base with every weight moved by a little noise, and two LoRA adapters (rank 16; the vllm
backend merges an adapter into the base and reloads it as a full checkpoint). A random
model almost never stops by itself, so the GSM8K-shaped set gives each item a completion length drawn from a
hash of its id (lognormal, median ~120 tokens, at most 256), as bench/vllm_vs_hf.py does, through a
benchmark registered by a plugin written to ``OUT/site`` (put it on PYTHONPATH: the worker finds it by its
entry point).

    python bench/warm_engine.py prepare --out /tmp/we
    PYTHONPATH=src:/tmp/we/site python bench/warm_engine.py run --out /tmp/we --backend vllm --results R.json

On the H200 machine add ``/tmp/site`` (vllm) to PYTHONPATH and ``VLLM_USE_FLASHINFER_SAMPLER=0``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PLUGIN = '''"""The GSM8K-shaped benchmark of bench/warm_engine.py: 1,319 dev items, 8-shot prompts, hashed lengths."""
from __future__ import annotations

import hashlib
import math
import random
from pathlib import Path
from typing import Any

from autorl import Benchmark, EvalConfig, GenerationEvaluator, GenerationRequest, Item, ItemResult, hookimpl

WORDS = ["Natalia", "sold", "clips", "to", "friends", "in", "April", "and", "then", "half", "as", "many", "in",
         "May", "how", "did", "she", "sell", "altogether", "Weng", "earns", "dollars", "an", "hour", "for",
         "babysitting", "yesterday", "minutes", "of", "work", "Question:", "Answer:", "The", "answer", "is"]


def words(rng: random.Random, k: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(k))


_R = random.Random("shots")
SHOTS = tuple((f"Question: {words(_R, 80)} Answer:", f" {words(_R, 22)} The answer is {k} .") for k in range(8))


def length(item_id: str) -> int:
    u = int(hashlib.sha256(item_id.encode()).hexdigest()[:8], 16) / 2**32
    z = math.sqrt(-2 * math.log(max(u, 1e-9))) * math.cos(2 * math.pi * u * 7.0)
    return max(8, min(256, int(120 * math.exp(0.5 * z))))


class LengthEvaluator(GenerationEvaluator):
    def evaluate(self, benchmark: Any, items: Any, backend: Any, progress: Any = None) -> list[ItemResult]:
        cfg = benchmark.config()
        reqs = [GenerationRequest(prompt=cfg.render(i.input), max_new_tokens=length(i.id), stop=cfg.stop)
                for i in items]
        out = []
        for item, c in zip(items, backend.generate(reqs), strict=True):
            out.append(ItemResult(item.id, 0.0, c.texts, None, {"output_tokens": c.output_tokens}))
        if progress:
            progress(len(items))
        return out


class GsmShaped(Benchmark):
    """# gsm8k-shaped: GSM8K's size and prompt shape, for latency only"""

    name = "gsm8k-shaped"
    version = "1"
    eval_config = EvalConfig(prompt_template="Question: {question} Answer:", few_shot=SHOTS,
                             few_shot_separator=" ", max_new_tokens=256)

    def prepare_train_data(self, target_dir: Path) -> None:
        target_dir.mkdir(parents=True, exist_ok=True)
        (target_dir / "train.jsonl").write_text("")

    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        rng = random.Random(split)
        n = 1319 if split == "dev" else 50
        return [Item(f"{split}-{i}", {"question": f"{i} {words(rng, rng.randint(60, 120))}"}, "0") for i in range(n)]

    def score(self, item: Item, completion: str) -> float:
        return 0.0

    def evaluator(self) -> LengthEvaluator:
        return LengthEvaluator()


@hookimpl
def register_benchmarks(register: Any) -> None:
    register(GsmShaped)
'''


def write_plugin(site: Path) -> None:
    site.mkdir(parents=True, exist_ok=True)
    (site / "warm_engine_plugin.py").write_text(PLUGIN)
    dist = site / "warm_engine_plugin-0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: warm-engine-plugin\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[autorl]\ngsm8k-shaped = warm_engine_plugin\n")


def moved_copy(source: Path, target: Path, seed: int, scale: float, weights: str) -> None:
    """``source`` with every tensor of ``weights`` plus ``scale`` times unit noise (a stand-in for training)."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tensors = load_file(str(source / weights), device=device)
    gen = torch.Generator(device=device).manual_seed(seed)
    moved = {k: (v.float() + scale * torch.randn(v.shape, generator=gen, device=device)).to(v.dtype).contiguous()
             for k, v in tensors.items()}
    save_file(moved, str(target / weights), metadata={"format": "pt"})


def prepare(out: Path) -> dict[str, Any]:
    from vllm_vs_hf import prepare as prepare_models

    info = prepare_models(out)
    t = time.time()
    moved_copy(out / "model", out / "trained_a", 1, 0.002, "model.safetensors")
    moved_copy(out / "model", out / "trained_b", 2, 0.002, "model.safetensors")
    moved_copy(out / "adapter", out / "adapter_b", 3, 0.01, "adapter_model.safetensors")
    info["copies_s"] = round(time.time() - t, 1)
    write_plugin(out / "site")
    return info


def gpu_memory_mib() -> int | None:
    try:
        text = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=20, check=True).stdout
        return int(text.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def outputs(record: dict[str, Any]) -> dict[str, list[str]]:
    lines = Path(record["per_item_path"]).read_text().splitlines()
    return {r["id"]: r["completions"] for r in map(json.loads, lines)}


def agreement(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    oa, ob = outputs(a), outputs(b)
    same = sum(oa[k] == ob.get(k) for k in oa)
    return {"items": len(oa), "identical": same, "fraction": round(same / max(1, len(oa)), 4)}


class Session:
    """One results file, rewritten after every step (a run cut short keeps what it measured)."""

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path, self.data = path, {**meta, "steps": {}}

    def put(self, name: str, value: Any) -> None:
        self.data["steps"][name] = value
        self.path.write_text(json.dumps(self.data, indent=2))
        print(f"== {name}: {json.dumps(value)[:600]}", flush=True)


LIMIT: int | None = None  # --limit, for a quick check on a CPU


def slot_for(out: Path, name: str, task: str, backend: str, options: dict[str, Any]) -> Any:
    from autorl.grader.config import GraderConfig
    from autorl.grader.jobs import EvalSlot

    store = out / "stores" / name
    shutil.rmtree(store, ignore_errors=True)
    config = GraderConfig(task=task, workspace=str(out), output_dir=str(out), store_dir=str(store),
                          hidden_dir=str(out / f"hidden-{task}"), base_model=str(out / "model"), backend=backend,
                          backend_options=options, eval_timeout=590.0, limit=LIMIT)
    return EvalSlot(config, store)


def as_snapshot(folder: Path) -> Any:
    """``folder`` as the handle a grader slot evaluates (a submission's snapshot: its kind and content digest)."""
    from autorl.evaluation.identity import model_hash
    from autorl.grader.snapshot import Snapshot
    from autorl.grader.validation import validate_checkpoint

    return Snapshot(folder, validate_checkpoint(folder).kind, model_hash(folder))


def timed(slot: Any, model: Path, tag: str) -> dict[str, Any]:
    t = time.monotonic()
    record: dict[str, Any] = slot.run(as_snapshot(model), "dev", tag)
    record["latency_s"] = round(time.monotonic() - t, 3)
    record["gpu_mib_after"] = gpu_memory_mib()
    return record


def brief(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("latency_s", "engine", "load_s", "generate_s", "n", "output_tokens", "gpu_mib_after")
    return {**{k: r.get(k) for k in keys}, **{k: r["extra"][k] for k in ("wake_s", "sleep_s") if k in r["extra"]}}


def series(session: Session, out: Path, name: str, task: str, backend: str, options: dict[str, Any],
           models: list[tuple[str, Path]]) -> dict[str, dict[str, Any]]:
    """One warm slot through ``models`` in order; the record of the last evaluation of each model name."""
    slot = slot_for(out, name, task, backend, options)
    last: dict[str, dict[str, Any]] = {}
    rows = []
    try:
        for k, (label, model) in enumerate(models):
            record = timed(slot, model, f"{label}{k}")
            time.sleep(2.0 if options.get("sleep_when_idle") else 0.0)
            rows.append({"model": label, **brief(record), "gpu_mib_idle": gpu_memory_mib()})
            last[label] = record
            session.put(name, rows)
    finally:
        slot.close()
    return last


def fresh(session: Session, out: Path, name: str, task: str, backend: str, options: dict[str, Any], label: str,
          model: Path, warm: dict[str, Any]) -> dict[str, Any]:
    slot = slot_for(out, name, task, backend, options)
    try:
        record = timed(slot, model, label)
    finally:
        slot.close()
    row = {"model": label, **brief(record), "agreement_with_warm": agreement(warm, record)}
    session.put(name, row)
    return record


def run(out: Path, backend: str, results: Path, gsm_subs: int, skip: set[str], options: dict[str, Any]) -> None:
    base, a, b = out / "model", out / "trained_a", out / "trained_b"
    lora_a, lora_b = out / "adapter", out / "adapter_b"
    session = Session(results, {"backend": backend, "model": "random Qwen2.5-1.5B shape, bf16",
                                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    opts: dict[str, Any] = dict(options)  # the backend's defaults (a warm engine) unless told otherwise
    subs = [("trained_a", a) if k % 2 == 0 else ("trained_b", b) for k in range(10)]
    if "arith" not in skip:
        warm = series(session, out, "arith_warm", "arith", backend, opts,
                      [("base", base), *subs, ("lora_a", lora_a), ("lora_b", lora_b), ("lora_a", lora_a)])
        fresh(session, out, "arith_fresh_full", "arith", backend, opts, "trained_a", a, warm["trained_a"])
        fresh(session, out, "arith_fresh_lora", "arith", backend, opts, "lora_a", lora_a, warm["lora_a"])
    if "gsm" not in skip:
        sleepy = {**opts, "sleep_when_idle": True}
        gsm = [("base", base), *subs[:gsm_subs]]
        warm = series(session, out, "gsm_warm_sleep", "gsm8k-shaped", backend, sleepy, gsm)
        fresh(session, out, "gsm_fresh_full", "gsm8k-shaped", backend, sleepy, "trained_a", a, warm["trained_a"])
        if backend == "vllm" and "mp" not in skip:
            # the engine core in a child process (vllm's default): what running it in-process costs or saves
            child = {**sleepy, "engine_in_process": False}
            fresh(session, out, "gsm_fresh_full_child_process", "gsm8k-shaped", backend, child, "trained_a", a,
                  warm["trained_a"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["prepare", "run"])
    parser.add_argument("--out", type=Path, default=Path("/tmp/we"))
    parser.add_argument("--backend", default="vllm")
    parser.add_argument("--results", type=Path, default=Path("results-warm-engine.json"))
    parser.add_argument("--gsm-subs", type=int, default=3)
    parser.add_argument("--skip", default="", help="comma-separated: arith, gsm, mp")
    parser.add_argument("--options", default="{}", help="backend options (JSON) for every slot")
    parser.add_argument("--limit", type=int, default=None, help="items per evaluation (a quick check)")
    args = parser.parse_args()
    global LIMIT
    LIMIT = args.limit
    if args.what == "prepare":
        print(json.dumps(prepare(args.out)))
    else:
        run(args.out, args.backend, args.results, args.gsm_subs, set(filter(None, args.skip.split(","))),
            json.loads(args.options))


if __name__ == "__main__":
    main()
