"""Throughput of the hf backend's generation path against a naive ``model.generate`` loop.

The backend's two decoders (``compact``: finished rows leave the batch; ``generate``: plain
``model.generate``) and the naive loop (fixed batch, input order) run on the same requests in one process,
and the ratios are printed; it is a benchmark, not a test.

GSM8K-like lengths: prompts of 100-220 tokens, and completions that mostly end well before the token
limit. A random-initialised model never chooses EOS by itself, so every path gets the same logits
processor, which ends each completion at a length drawn from a fixed per-prompt hash (lognormal,
median ~120 tokens, capped at the limit). Both paths therefore generate exactly the same tokens per
prompt; what differs is batching.

    python bench/eval_throughput.py --shape qwen2.5-1.5b --prompts 512           # on a GPU
    python bench/eval_throughput.py --model ~/.cache/autorl/models/autorl/tiny-v1  # on a CPU
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

SHAPES = {
    "qwen2.5-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768,
                         tie_word_embeddings=True, rope_theta=1e6),
}
WORDS = ["Natalia", "sold", "clips", "to", "friends", "in", "April", "and", "then", "half", "as", "many", "clips", "in", "May", "how", "many", "did", "she", "sell", "altogether", "Weng", "earns", "dollars", "an", "hour", "for", "babysitting", "yesterday", "she", "did", "minutes", "of", "work"]


def random_model(shape: str, root: Path) -> Path:
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from autorl.builtin.arith import _split
    from autorl.builtin.tiny_model import EOS, train_tokenizer

    raw = train_tokenizer([f"Q: What is {a}+{b}?\nA: {a + b}\n" for a, b in _split("train")] + [" ".join(WORDS)] * 50)
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token=EOS, pad_token=EOS)
    config = Qwen2Config(**SHAPES[shape], eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                         bos_token_id=None)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    out = root / shape
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


def make_prompts(tokenizer: Any, n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    prompts = []
    for i in range(n):
        target = rng.randint(100, 220)
        words = [f"Question {i}:"]
        while len(tokenizer(" ".join(words), add_special_tokens=False)["input_ids"]) < target:
            words.append(rng.choice(WORDS))
        prompts.append(" ".join(words) + "\nAnswer:")
    return prompts


class EndAt:
    """Ends each completion at a length fixed by a hash of its prompt's tokens (same in every path)."""

    def __init__(self, eos: int, max_new: int) -> None:
        self.eos, self.max_new = eos, max_new
        self._targets: dict[int, tuple[list[int], int]] = {}

    def target(self, ids: list[int]) -> int:
        key = id(ids)
        if key not in self._targets:
            h = int(hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:8], 16) / 2**32
            t = max(8, min(self.max_new, int(math.exp(math.log(120) + 0.6 * math.sqrt(2) * _erfinv(2 * h - 1)))))
            self._targets[key] = (ids, t)  # keeps ids alive, so the id stays unique
        return self._targets[key][1]

    def __call__(self, prompts: list[list[int]], step: int, scores: Any) -> Any:
        import torch

        targets = torch.tensor([self.target(p) for p in prompts], device=scores.device)
        done = step >= targets
        eos_column = torch.where(done, 0.0, -float("inf")).to(scores.dtype)
        scores = scores.masked_fill(done[:, None], -float("inf"))
        scores[:, self.eos] = eos_column
        return scores


def _erfinv(y: float) -> float:
    from scipy.special import erfinv

    return float(erfinv(max(-0.999999, min(0.999999, y))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a checkpoint directory")
    parser.add_argument("--shape", choices=sorted(SHAPES), help="a random-initialised model of this shape")
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--naive-batch", type=int, default=64, help="the naive loop's fixed batch size")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    import torch
    from naive_generate import naive_generate

    from autorl.inference.base import GenerationRequest
    from autorl.inference.hf import HFBackend

    tmp = Path(tempfile.mkdtemp())
    model_dir = args.model or random_model(args.shape or "qwen2.5-1.5b", tmp)
    backend = HFBackend()
    backend.load(model_dir)
    model, tok = backend.model, backend.tokenizer
    prompts = make_prompts(tok, args.prompts)
    device = str(model.device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    requests = [GenerationRequest(p, max_new_tokens=args.max_new_tokens) for p in prompts]

    def timed(fn: Any) -> tuple[float, int]:
        sync()
        t = time.perf_counter()
        tokens = fn()
        sync()
        return time.perf_counter() - t, tokens

    results: dict[str, dict[str, Any]] = {}
    for mode in ("compact", "generate"):
        backend.options.update(decode=mode, logits_processor=EndAt(tok.eos_token_id, args.max_new_tokens))
        backend.generate(requests[:8])  # warm-up
        seconds, tokens = timed(lambda: sum(c.output_tokens for c in backend.generate(requests)))
        results[f"hf_backend_{mode}"] = {"seconds": seconds, "items_per_s": len(prompts) / seconds,
                                         "tokens_per_s": tokens / seconds, "output_tokens": tokens,
                                         "batch_size": backend._batch_size(220 + args.max_new_tokens)}
    end = EndAt(tok.eos_token_id, args.max_new_tokens)
    naive_generate(model, tok, prompts[:8], 8, 8, end)
    seconds, tokens = timed(lambda: naive_generate(model, tok, prompts, args.max_new_tokens, args.naive_batch, end))
    results["naive_loop"] = {"seconds": seconds, "items_per_s": len(prompts) / seconds, "tokens_per_s": tokens / seconds,
                             "output_tokens": tokens, "batch_size": args.naive_batch}

    figures = {
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
        "model": str(model_dir if args.model else args.shape or "qwen2.5-1.5b"),
        "prompts": len(prompts),
        "max_new_tokens": args.max_new_tokens,
        **results,
        "speedup_default_vs_naive": results["naive_loop"]["seconds"]
        / results["hf_backend_compact" if device.startswith("cuda") else "hf_backend_generate"]["seconds"],
        "speedup_compact_vs_generate": results["hf_backend_generate"]["seconds"] / results["hf_backend_compact"]["seconds"],
        "torch": torch.__version__,
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
