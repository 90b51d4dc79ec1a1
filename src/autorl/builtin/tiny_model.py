"""``autorl:tiny``: a ~0.5M-parameter Qwen2 model built here, so the demo needs no network.

:mod:`autorl.resources` builds it into the cache the first time ``autorl:tiny`` is asked for; the
``tiny_model`` fixture of :mod:`autorl.testing` builds it once per test session.

The recipe trains a byte-level BPE tokenizer with Qwen2's exact pre-tokenization (so ``AutoTokenizer``
reproduces its ids), then briefly fine-tunes a small Qwen2 on the ``arith`` training data until it is weak
but not hopeless (greedy exact match on held-in training problems crosses ``TARGET``). A quarter of each batch
is two general skills (counting on, the larger of two numbers) from generated questions, none of them one of
the ``basics`` set's: so that ``--off-target basics`` reads above 0 for this model, and a loss elsewhere after
training on addition can show.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

from autorl.builtin.arith import public_pairs
from autorl.builtin.basics import question_texts
from autorl.errors import MissingDependencyError, extra_install

RECIPE_VERSION = "3"  # 2: trained on arith v2's smaller public train set; 3: and on two general skills
TARGET = 0.25
#: the share of each training batch that is a general question (:func:`general_example`)
GENERAL_SHARE = 0.25
EOS = "<|endoftext|>"
QWEN2_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def _text(a: int, b: int) -> tuple[str, str]:
    return f"Q: What is {a}+{b}?\nA:", f" {a + b}\n"


def general_example(rng: random.Random, avoid: frozenset[str]) -> tuple[str, str]:
    """A general question and its answer in the arith prompt's format: what comes after a number, or the larger
    of two; never one of the questions in ``avoid`` (the ``basics`` set's, which measures these skills)."""
    while True:
        if rng.random() < 0.5:
            n = rng.randint(1, 998)
            question, answer = f"What number comes after {n}?", n + 1
        else:
            a, b = rng.sample(range(1, 1000), 2)
            question, answer = f"Which is larger, {a} or {b}?", max(a, b)
        if question not in avoid:
            return f"Q: {question}\nA:", f" {answer}\n"


def train_tokenizer(corpus: list[str]) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=[EOS, "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    return tok


def _greedy_accuracy(model: Any, tok: Any, pairs: list[tuple[int, int]]) -> float:
    import torch

    prompts = [_text(a, b)[0] for a, b in pairs]
    enc = tok(prompts, return_tensors="pt", padding=True)
    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
    texts = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    good = sum(t.strip().split("\n")[0].strip() == str(a + b) for t, (a, b) in zip(texts, pairs, strict=True))
    return float(good) / len(pairs)


def build(target: Path, *, seed: int = 0, max_steps: int = 3000, lr: float = 1e-3, log: Any = print) -> Path:
    """Build the model into ``target`` (atomically: a temp folder renamed at the end)."""
    try:
        import torch
        from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    except ImportError as exc:
        raise MissingDependencyError("the built-in model autorl:tiny", extra_install("hf")) from exc
    started = time.monotonic()
    train = public_pairs("train")
    avoid = question_texts()
    general = random.Random(seed + 1)
    corpus = [p + a for p, a in (_text(x, y) for x, y in train)]
    corpus += [p + a for p, a in (general_example(general, avoid) for _ in range(len(train) // 2))]
    raw = train_tokenizer(corpus)
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token=EOS, pad_token=EOS, unk_token=EOS)  # type: ignore[no-untyped-call]
    tok.padding_side = "left"
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=raw.get_vocab_size(),
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100))
    rng = random.Random(seed)
    probe = rng.sample(train, 200)
    eos_id = tok.eos_token_id
    step = 0
    accuracy = 0.0
    tok_right = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token=EOS, pad_token=EOS)  # type: ignore[no-untyped-call]
    tok_right.padding_side = "right"
    while step < max_steps:
        batch = [
            general_example(general, avoid) if rng.random() < GENERAL_SHARE else _text(*rng.choice(train))
            for _ in range(64)
        ]
        prompts = [tok_right(p)["input_ids"] for p, _ in batch]
        answers = [tok_right(a)["input_ids"] + [eos_id] for _, a in batch]
        width = max(len(p) + len(a) for p, a in zip(prompts, answers, strict=True))
        ids = torch.full((len(batch), width), eos_id)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (p, a) in enumerate(zip(prompts, answers, strict=True)):
            seq = p + a
            ids[i, : len(seq)] = torch.tensor(seq)
            labels[i, len(p) : len(seq)] = torch.tensor(a)
            mask[i, : len(seq)] = 1
        model.train()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        step += 1
        if step % 25 == 0:
            model.eval()  # type: ignore[no-untyped-call]
            accuracy = _greedy_accuracy(model, tok, probe)
            log(f"autorl:tiny step {step}: loss {loss.item():.3f}, train-probe accuracy {accuracy:.0%}")
            if accuracy >= TARGET:
                break
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    # AutoTokenizer then builds Qwen2Tokenizer, whose pipeline this tokenizer was trained with
    cfg_path = tmp / "tokenizer_config.json"
    tok_cfg = json.loads(cfg_path.read_text())
    tok_cfg["tokenizer_class"] = "Qwen2Tokenizer"
    cfg_path.write_text(json.dumps(tok_cfg, indent=2))
    (tmp / "autorl_recipe.json").write_text(
        json.dumps(
            {
                "recipe": "autorl:tiny",
                "version": RECIPE_VERSION,
                "seed": seed,
                "steps": step,
                "train_probe_accuracy": accuracy,
                "general_share": GENERAL_SHARE,
                "build_seconds": round(time.monotonic() - started, 1),
            },
            indent=2,
        )
    )
    if target.exists():
        shutil.rmtree(target)
    tmp.replace(target)
    return target
