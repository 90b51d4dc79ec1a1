"""vllm against the hf backend and a naive ``model.generate`` loop, on the same GSM8K-like requests.

A random-initialised model of the Qwen2.5-1.5B shape (bf16 safetensors, a word-level tokenizer with the
full 151,936-token vocabulary, so that any generated id decodes) and a random LoRA adapter for it are
saved first. Every path then gets the same 512 prompts of 100-220 tokens and generates the same number of
tokens for each: a length drawn from a hash of the prompt's token ids (lognormal, median ~120, at most
256). The hf paths end each completion there with a logits processor; vllm gets it as the request's
``max_new_tokens`` (a random model almost never picks EOS by itself). Model load / engine start-up are
timed apart from generation. Each vllm configuration runs in its own process (a fresh engine and GPU).

    python bench/vllm_vs_hf.py all --out /tmp/vb                 # prepare + hf + naive + vllm default
    python bench/vllm_vs_hf.py all --out /tmp/vb --skip-hf --configs no_prefix_cache,mem_0.25,seqs_512,lora

On the H200 machine: ``PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0`` (see bench/vllm_h200.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

VOCAB = 151936
WORDS = ["Natalia", "sold", "clips", "to", "friends", "in", "April", "and", "then", "half", "as", "many", "in",
         "May", "how", "did", "she", "sell", "altogether", "Weng", "earns", "dollars", "an", "hour", "for",
         "babysitting", "yesterday", "minutes", "of", "work", "Question:", "Answer:", "The", "answer", "is",
         *[str(i) for i in range(100)]]
#: engine settings per configuration (VLLMBackend options); "lora" also loads through an adapter
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "no_prefix_cache": {"enable_prefix_caching": False},
    "mem_0.25": {"gpu_memory_utilization": 0.25},
    "mem_0.85": {"gpu_memory_utilization": 0.85},
    "seqs_512": {"max_num_seqs": 512, "compilation_config": {"max_cudagraph_capture_size": 512}},
    "lora": {},
}


def save_tokenizer(out: Path) -> Any:
    """A byte-level BPE tokenizer (Qwen2's pre-tokenizer) whose merges make each word one token, padded with
    unreachable tokens to the full vocabulary so that any id the random model emits decodes."""
    import json as _json

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from autorl.builtin.tiny_model import EOS, train_tokenizer

    raw = train_tokenizer([" ".join(WORDS)] * 200)
    spec = _json.loads(raw.to_str())
    vocab = spec["model"]["vocab"]
    for i in range(VOCAB):
        if len(vocab) + len(spec["added_tokens"]) >= VOCAB:
            break
        vocab.setdefault(f"x{i}", len(vocab) + len(spec["added_tokens"]))
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(_json.dumps(spec)), eos_token=EOS, pad_token=EOS)
    tok.save_pretrained(out)
    return tok


def prepare(out: Path, layers: int = 28) -> dict[str, Any]:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    t = time.time()
    model_dir, adapter_dir = out / "model", out / "adapter"
    tok = save_tokenizer(model_dir)
    config = Qwen2Config(vocab_size=VOCAB, hidden_size=1536, intermediate_size=8960, num_hidden_layers=layers,
                         num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True,
                         max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(model_dir, safe_serialization=True)
    lora = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, init_lora_weights=False,
                                            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    lora.save_pretrained(adapter_dir)
    return {"model": str(model_dir), "adapter": str(adapter_dir), "prepare_s": round(time.time() - t, 1),
            "params": sum(p.numel() for p in model.parameters())}


def prompt_sets(n: int) -> dict[str, list[str]]:
    rng = random.Random(0)

    def words(k: int) -> str:
        return " ".join(rng.choice(WORDS[:35]) for _ in range(k))

    plain = [f"Question: {i} {words(rng.randint(100, 220) - 4)} Answer:" for i in range(n)]
    # 8-shot: the same ~930-token prefix before every question, as GSM8K few-shot prompts have
    shots = " ".join(f"Question: {words(80)} Answer: {words(22)} The answer is {k} ." for k in range(8))
    few_shot = [f"{shots} Question: {i} {words(rng.randint(60, 120))} Answer:" for i in range(n)]
    return {"plain": plain, "few_shot_8": few_shot}


def targets(tokenizer: Any, prompts: list[str], max_new: int) -> list[int]:
    from eval_throughput import EndAt

    end = EndAt(tokenizer.eos_token_id, max_new)
    return [end.target(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts]


def run_hf(model_dir: Path, n: int, max_new: int, naive_batch: int) -> dict[str, Any]:
    import torch
    from eval_throughput import EndAt
    from naive_generate import naive_generate

    from autorl.inference.base import GenerationRequest
    from autorl.inference.hf import HFBackend

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    t = time.time()
    backend = HFBackend()
    backend.load(model_dir)
    load_s = time.time() - t
    tok = backend.tokenizer
    prompts = prompt_sets(n)["plain"]
    requests = [GenerationRequest(p, max_new_tokens=max_new) for p in prompts]
    backend.options["logits_processor"] = EndAt(tok.eos_token_id, max_new)
    backend.generate(requests[:8])
    sync()
    t = time.time()
    tokens = sum(c.output_tokens for c in backend.generate(requests))
    sync()
    hf_s = time.time() - t
    end = EndAt(tok.eos_token_id, max_new)
    naive_generate(backend.model, tok, prompts[:8], 8, 8, end)
    sync()
    t = time.time()
    naive_tokens = naive_generate(backend.model, tok, prompts, max_new, naive_batch, end)
    sync()
    naive_s = time.time() - t
    expected = sum(targets(tok, prompts, max_new))
    return {
        "load_s": round(load_s, 1),
        "hf_backend": {"seconds": round(hf_s, 2), "items_per_s": round(n / hf_s, 1),
                       "tokens_per_s": round(tokens / hf_s), "output_tokens": tokens, "decode": backend.options.get("decode", "generate")},
        "naive_loop": {"seconds": round(naive_s, 2), "items_per_s": round(n / naive_s, 1),
                       "tokens_per_s": round(naive_tokens / naive_s), "output_tokens": naive_tokens,
                       "batch_size": naive_batch},
        "expected_output_tokens": expected,
    }


def run_vllm(model_dir: Path, adapter_dir: Path, config: str, n: int, max_new: int) -> dict[str, Any]:
    t = time.time()
    import vllm

    from autorl.inference.base import GenerationRequest
    from autorl.inference.vllm import VLLMBackend

    import_s = time.time() - t
    backend = VLLMBackend(dict(CONFIGS[config]))
    t = time.time()
    if config == "lora":
        backend.load(adapter_dir, base_model_dir=model_dir)
    else:
        backend.load(model_dir)
    load_s = time.time() - t
    tok = backend.llm.get_tokenizer()
    out: dict[str, Any] = {"config": config, "options": CONFIGS[config], "vllm": vllm.__version__,
                           "import_s": round(import_s, 1), "engine_start_s": round(load_s, 1)}
    try:
        cache = backend.llm.llm_engine.vllm_config.cache_config
        out["kv_cache_blocks"] = cache.num_gpu_blocks
        out["block_size"] = cache.block_size
    except AttributeError:
        pass
    sets = prompt_sets(n)
    warm = [GenerationRequest(p, max_new_tokens=16) for p in sets["plain"][:16]]
    backend.generate(warm)
    for name, prompts in sets.items():
        reqs = [GenerationRequest(p, max_new_tokens=m) for p, m in zip(prompts, targets(tok, prompts, max_new),
                                                                          strict=True)]
        t = time.time()
        done = backend.generate(reqs)
        seconds = time.time() - t
        tokens = sum(c.output_tokens for c in done)
        out[name] = {"seconds": round(seconds, 2), "items_per_s": round(n / seconds, 1),
                     "tokens_per_s": round(tokens / seconds), "output_tokens": tokens,
                     "expected_output_tokens": sum(r.max_new_tokens for r in reqs),
                     "prompt_tokens": sum(len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["prepare", "hf", "vllm", "all"])
    parser.add_argument("--out", type=Path, default=Path("/tmp/vb"))
    parser.add_argument("--config", default="default", choices=sorted(CONFIGS))
    parser.add_argument("--configs", default="default", help="for `all`: comma-separated vllm configurations")
    parser.add_argument("--skip-hf", action="store_true")
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--naive-batch", type=int, default=64)
    parser.add_argument("--layers", type=int, default=28, help="prepare: fewer layers for a quick check")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    model_dir, adapter_dir = args.out / "model", args.out / "adapter"
    if args.what == "prepare":
        print(json.dumps(prepare(args.out, args.layers)))
    elif args.what == "hf":
        print(json.dumps(run_hf(model_dir, args.prompts, args.max_new_tokens, args.naive_batch)))
    elif args.what == "vllm":
        print(json.dumps(run_vllm(model_dir, adapter_dir, args.config, args.prompts, args.max_new_tokens)))
    else:
        results: dict[str, Any] = {}
        if not (model_dir / "config.json").is_file() or not (adapter_dir / "adapter_config.json").is_file():
            results["prepare"] = _child(["prepare", "--out", str(args.out), "--layers", str(args.layers)])
        common = ["--out", str(args.out), "--prompts", str(args.prompts), "--max-new-tokens", str(args.max_new_tokens)]
        if not args.skip_hf:
            results["hf"] = _child(["hf", *common, "--naive-batch", str(args.naive_batch)])
        for config in filter(None, args.configs.split(",")):
            results[f"vllm_{config}"] = _child(["vllm", *common, "--config", config])
        results.update(_ratios(results))
        name = "results-" + "-".join(k for k in results if k.startswith(("hf", "vllm"))) + ".json"
        (args.out / name).write_text(json.dumps(results, indent=1))
        print(json.dumps(results, indent=1))


def _child(args: list[str]) -> dict[str, Any]:
    t = time.time()
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=dict(os.environ))
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-12:], "seconds": round(time.time() - t, 1)}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_s"] = round(time.time() - t, 1)
    print(json.dumps({args[0]: result}), flush=True)
    return result


def _ratios(results: dict[str, Any]) -> dict[str, Any]:
    hf = results.get("hf", {})
    out: dict[str, Any] = {}
    for key, r in results.items():
        if key.startswith("vllm_") and "plain" in r and "naive_loop" in hf:
            out[f"{key}_vs_naive_tokens_per_s"] = round(r["plain"]["tokens_per_s"] / hf["naive_loop"]["tokens_per_s"], 1)
            out[f"{key}_vs_hf_backend_tokens_per_s"] = round(r["plain"]["tokens_per_s"] / hf["hf_backend"]["tokens_per_s"], 1)
    if "naive_loop" in hf:
        out["hf_backend_vs_naive_tokens_per_s"] = round(hf["hf_backend"]["tokens_per_s"] / hf["naive_loop"]["tokens_per_s"], 2)
    return {"ratios": out} if out else {}


if __name__ == "__main__":  # vllm's engine process re-imports the main module
    main()
