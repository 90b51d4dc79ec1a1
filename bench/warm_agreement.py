"""Does a warm vllm engine score a checkpoint exactly as a fresh engine does?

Through the grader worker's own path (``evaluate_model(..., keep_loaded=True)`` on a ``VLLMBackend`` with a
scratch folder, as ``autorl.grader.worker`` runs it, minus the pipe), one engine is started on checkpoint A
and evaluates it first (what a fresh worker does), then the base, then B, then A again (reloaded in place).
A second engine started on A evaluates it once more (the control: two fresh engines). A LoRA engine does the
same with adapters (a, b, a). For every evaluation of A it records, besides the per-item outputs:

- a digest of every parameter and buffer in the engine (bitwise, computed on the GPU), so a reload that
  left any tensor different from a fresh load shows up by name;
- teacher-forced log-probabilities of 64 fixed sequences (an item's prompt plus the fresh engine's
  completion), so the comparison does not rest on argmax ties of a random model.

Models: the random-initialised Qwen2.5-1.5B shape of ``bench/vllm_vs_hf.py`` with two moved copies (as in
``bench/warm_engine.py``) and two LoRA adapters, and two trained ``autorl:tiny`` models (seeds 0 and 1, same
shape and tokenizer: a model whose greedy outputs are stable). ``--mode`` picks how the vllm engine runs:
``mp`` (vllm's default, the engine core in a child process) or ``inproc`` (``VLLM_ENABLE_V1_MULTIPROCESSING=0``).

    python bench/warm_agreement.py tiny --out .we                 # where the hub is out of reach: CPU
    python bench/warm_agreement.py prepare --out /tmp/we          # on the GPU machine
    PYTHONPATH=src:/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 \\
      python bench/warm_agreement.py run --out /tmp/we --tiny .we --mode inproc --results R.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PROBES = 64


def tensor_digest(model: Any) -> dict[str, str]:
    """Every parameter and buffer of ``model`` as two wrapping 64-bit sums of its bytes (plain and weighted by
    position): any bit that differs changes them. Runs where the model is (the engine's worker)."""
    import torch

    out: dict[str, str] = {}
    with torch.no_grad():
        for kind, named in (("param", model.named_parameters()), ("buffer", model.named_buffers())):
            for name, t in named:
                if t.is_meta:
                    out[f"{kind}:{name}"] = "meta"
                    continue
                b = t.detach().contiguous().reshape(-1).view(torch.uint8)
                pad = (-b.numel()) % 8
                if pad:
                    b = torch.cat([b, b.new_zeros(pad)])
                w = b.view(torch.int64)
                idx = torch.arange(w.numel(), device=w.device, dtype=torch.int64) * 2654435761 + 1
                out[f"{kind}:{name}"] = f"{int(w.sum())}:{int((w * idx).sum())}:{t.dtype}:{tuple(t.shape)}"
    return out


def build_tiny(out: Path) -> None:
    from autorl.builtin.tiny_model import build

    for seed in (0, 1):
        build(out / f"tiny_{seed}", seed=seed)


def prepare(out: Path) -> dict[str, Any]:
    from vllm_vs_hf import prepare as prepare_models
    from warm_engine import moved_copy

    info = prepare_models(out)
    moved_copy(out / "model", out / "trained_a", 1, 0.002, "model.safetensors")
    moved_copy(out / "model", out / "trained_b", 2, 0.002, "model.safetensors")
    moved_copy(out / "adapter", out / "adapter_b", 3, 0.01, "adapter_model.safetensors")
    return info


class Study:
    def __init__(self, out: Path, mode: str, results: Path) -> None:
        from autorl.builtin.arith import Arith

        self.out, self.results = out, results
        self.benchmark = Arith()
        self.data: dict[str, Any] = {"mode": mode, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                     "series": {}, "compare": {}}

    def save(self) -> None:
        self.results.write_text(json.dumps(self.data, indent=2))

    def evaluate(self, backend: Any, label: str, model: Path, base: Path | None, probes: list[list[int]] | None,
                 tag: str) -> dict[str, Any]:
        from autorl.evaluation.run import evaluate_model

        per_item = self.out / "items" / f"{tag}.jsonl"
        record = evaluate_model(self.benchmark, backend, model, split="dev", hidden_dir=self.out / "hidden-arith",
                                base_model_dir=base, per_item_path=per_item, keep_loaded=True)
        rows = [json.loads(line) for line in per_item.read_text().splitlines()]
        outputs = {r["id"]: r["completions"] for r in rows}
        result: dict[str, Any] = {"label": label, "engine": record.engine, "load_s": record.load_s,
                                  "generate_s": record.generate_s, "score": record.score, "outputs": outputs}
        if probes is None:  # the first evaluation of a series: its completions become the probes
            tok = backend.tokenizer
            from autorl.inference.base import prompt_token_ids

            items = self.benchmark.load_items("dev", self.out / "hidden-arith")[:PROBES]
            probes = [prompt_token_ids(tok, self.benchmark.config().render(i.input))
                      + tok(outputs[i.id][0], add_special_tokens=False)["input_ids"] for i in items]
        result["probes"] = probes
        result["logprobs"] = prompt_logprobs(backend, probes)
        result["digest"] = backend.llm.apply_model(tensor_digest)[0]
        return result

    def series(self, name: str, steps: list[tuple[str, Path, Path | None]], options: dict[str, Any],
               probes: list[list[int]] | None = None) -> list[dict[str, Any]]:
        from autorl.inference.vllm import VLLMBackend

        backend = VLLMBackend({"warm_engine": True, **options})
        backend.scratch_dir = self.out / "scratch" / name
        shutil.rmtree(backend.scratch_dir, ignore_errors=True)
        backend.scratch_dir.mkdir(parents=True)
        done: list[dict[str, Any]] = []
        try:
            for k, (label, model, base) in enumerate(steps):
                r = self.evaluate(backend, label, model, base, probes if probes is not None else
                                  (done[0]["probes"] if done else None), f"{name}-{k}-{label}")
                done.append(r)
                self.data["series"][name] = [{k2: v for k2, v in d.items()
                                              if k2 not in ("outputs", "probes", "logprobs", "digest")} for d in done]
                self.save()
                print(f"== {name} {k} {label}: {self.data['series'][name][-1]}", flush=True)
        finally:
            backend.release()
        self.data["series"][name + "_gpu_mib_after_release"] = gpu_memory_mib()
        return done

    def compare(self, name: str, a: dict[str, Any], b: dict[str, Any]) -> None:
        same = sum(a["outputs"][k] == b["outputs"].get(k) for k in a["outputs"])
        diffs = [abs(x - y) for xs, ys in zip(a["logprobs"], b["logprobs"], strict=True)
                 for x, y in zip(xs, ys, strict=True)]
        names = sorted(set(a["digest"]) | set(b["digest"]))
        differing = [n for n in names if a["digest"].get(n) != b["digest"].get(n)]
        row = {"items": len(a["outputs"]), "identical": same, "score": [a["score"], b["score"]],
               "engines": [a["engine"], b["engine"]], "logprob_max_abs_diff": max(diffs) if diffs else None,
               "logprob_positions": len(diffs), "logprob_identical": sum(d == 0.0 for d in diffs),
               "tensors": len(names), "tensors_differing": differing[:20], "tensors_differing_n": len(differing)}
        self.data["compare"][name] = row
        self.save()
        print(f"== compare {name}: {row}", flush=True)


def prompt_logprobs(backend: Any, probes: list[list[int]]) -> list[list[float]]:
    """Teacher-forced log-probability of every token of every probe after the first (one batch)."""
    from vllm import SamplingParams

    backend.reset_caches()
    params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
    outs = backend.llm.generate([{"prompt_token_ids": p} for p in probes], params, lora_request=backend.lora,
                                use_tqdm=False)
    result = []
    for probe, out in zip(probes, outs, strict=True):
        lps = out.prompt_logprobs or []
        result.append([float(pos[tok].logprob) for tok, pos in zip(probe[1:], lps[1:], strict=True)])
    backend.reset_caches()
    return result


def gpu_memory_mib() -> int | None:
    from warm_engine import gpu_memory_mib as used

    return used()


def run(out: Path, tiny: Path, mode: str, results: Path, parts: set[str]) -> None:
    study = Study(out, mode, results)
    m, a, b = out / "model", out / "trained_a", out / "trained_b"
    la, lb = out / "adapter", out / "adapter_b"
    t0, t1 = tiny / "tiny_0", tiny / "tiny_1"

    def tiny_part() -> None:
        s = study.series("tiny", [("t1", t1, None), ("t0", t0, None), ("t1", t1, None)], {})
        study.compare("tiny_warm_vs_fresh", s[0], s[-1])

    def full_part() -> None:
        s = study.series("full", [("a", a, None), ("base", m, None), ("b", b, None), ("a", a, None)], {})
        study.compare("full_warm_vs_fresh", s[0], s[-1])
        c = study.series("full_control", [("a", a, None)], {}, probes=s[0]["probes"])
        study.compare("full_fresh_vs_fresh", s[0], c[0])
        study.compare("full_warm_vs_control", c[0], s[-1])

    def lora_part() -> None:
        s = study.series("lora", [("la", la, m), ("lb", lb, m), ("la", la, m)], {})
        study.compare("lora_warm_vs_fresh", s[0], s[-1])

    for name, part in (("tiny", tiny_part), ("full", full_part), ("lora", lora_part)):
        if name not in parts:
            continue
        try:
            part()
        except Exception as exc:  # a part that fails is recorded; the next one still runs
            study.data.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"[:2000]
            study.save()
            print(f"== {name} failed: {exc!r}", flush=True)
    study.data["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    study.save()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["tiny", "prepare", "run"])
    parser.add_argument("--out", type=Path, default=Path("/tmp/we"))
    parser.add_argument("--tiny", type=Path, default=Path(".we"))
    parser.add_argument("--mode", choices=["mp", "inproc"], default="inproc")
    parser.add_argument("--parts", default="tiny,full,lora")
    parser.add_argument("--results", type=Path, default=Path("results-warm-agreement.json"))
    args = parser.parse_args()
    if args.what == "tiny":
        build_tiny(args.out)
    elif args.what == "prepare":
        print(json.dumps(prepare(args.out)))
    else:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if args.mode == "inproc" else "1"
        os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"  # apply_model ships tensor_digest to the engine
        run(args.out, args.tiny, args.mode, args.results, set(args.parts.split(",")))


if __name__ == "__main__":
    main()
