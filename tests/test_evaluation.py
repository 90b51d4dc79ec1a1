"""The evaluation engine on a real tiny model: deterministic, batched correctly, LoRA-aware, hashed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autorl import (
    Benchmark,
    Environment,
    EpisodeBenchmark,
    EpisodeEvaluator,
    EvalConfig,
    GenerationEvaluator,
    GenerationRequest,
    HiddenDataError,
    Item,
    StepResult,
    UsageError,
    write_hidden_items,
)
from autorl.builtin.arith import Arith
from autorl.evaluation.generation import evaluator_for
from autorl.evaluation.identity import config_hash, model_hash
from autorl.evaluation.run import evaluate_model
from autorl.inference.hf import HFBackend
from autorl.inference.vllm import sampling_kwargs
from autorl.testing import PolicyBackend

from .conftest import cli
from .scripted_llm import serve_in_thread


def arith_requests(n: int = 64) -> list[GenerationRequest]:
    import tempfile

    b = Arith()
    hidden = Path(tempfile.mkdtemp(prefix="autorl-hidden-"))  # a fresh secret: items as one installation has them
    b.prepare_eval_data(hidden)
    items = b.load_items("dev", hidden)[:n]
    # varied prompt lengths, so sorting and padding matter
    prompts = [str(b.config().render(it.input)) for it in items]
    return [GenerationRequest(("Hmm. " * (i % 5)) + p, max_new_tokens=8, stop=("\n",)) for i, p in enumerate(prompts)]


def test_tokenizer_loads_identically_through_auto_tokenizer(tiny_model: Path) -> None:
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    raw = Tokenizer.from_file(str(tiny_model / "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(str(tiny_model))
    for text in ["Q: What is 23+45?\nA: 68\n", "  spaces\tand tabs, numbers 1234 and symbols +-*/", "Hello World's"]:
        assert auto(text, add_special_tokens=False)["input_ids"] == raw.encode(text).ids
        assert auto.decode(raw.encode(text).ids) == text


def test_greedy_generation_is_deterministic_and_batching_does_not_change_it(tiny_model: Path) -> None:
    reqs = arith_requests()
    outs = []
    for options in ({"batch_size": 64}, {"batch_size": 64}, {"batch_size": 1}, {"batch_size": 7}):
        be = HFBackend(options)
        be.load(tiny_model)
        outs.append([c.texts for c in be.generate(reqs)])
        be.unload()
    assert outs[0] == outs[1] == outs[2] == outs[3]
    assert all("\n" not in t[0] for t in outs[0])


def test_stop_strings_and_token_counts(tiny_model: Path) -> None:
    be = HFBackend()
    be.load(tiny_model)
    free = be.generate([GenerationRequest("Q: What is 12+34?\nA:", max_new_tokens=12)])[0]
    stopped = be.generate([GenerationRequest("Q: What is 12+34?\nA:", max_new_tokens=12, stop=("\n",))])[0]
    assert "\n" not in stopped.texts[0]
    assert free.texts[0].startswith(stopped.texts[0])
    assert stopped.finish_reasons == ["stop"]
    assert 0 < stopped.output_tokens <= 12


def test_sampling_returns_n_completions(tiny_model: Path) -> None:
    be = HFBackend()
    be.load(tiny_model)
    out = be.generate([GenerationRequest("Q: What is 12+34?\nA:", max_new_tokens=6, temperature=1.0, n=4, seed=3)])[0]
    again = be.generate([GenerationRequest("Q: What is 12+34?\nA:", max_new_tokens=6, temperature=1.0, n=4, seed=3)])[0]
    assert len(out.texts) == 4 and out.texts == again.texts


@pytest.fixture(scope="module")
def lora_pair(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = tmp_path_factory.mktemp("lora")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model))
    peft_model = get_peft_model(
        model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.mul_(20.0)
    peft_model.save_pretrained(root / "adapter")
    merged = peft_model.merge_and_unload()
    merged.save_pretrained(root / "merged", safe_serialization=True)
    AutoTokenizer.from_pretrained(str(tiny_model)).save_pretrained(root / "merged")
    return root / "adapter", root / "merged"


def test_lora_adapter_scores_like_the_merged_model(
    tiny_model: Path, lora_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    adapter, merged = lora_pair
    bench = Arith()
    a = evaluate_model(
        bench, HFBackend(), adapter, split="dev", hidden_dir=tmp_path, base_model_dir=tiny_model, limit=120
    )
    m = evaluate_model(bench, HFBackend(), merged, split="dev", hidden_dir=tmp_path, limit=120)
    base = evaluate_model(bench, HFBackend(), tiny_model, split="dev", hidden_dir=tmp_path, limit=120)
    assert a.item_scores == m.item_scores
    assert a.score == m.score
    assert a.item_scores != base.item_scores  # the adapter really changed the model


def test_config_hash_changes_with_every_setting_and_only_then() -> None:
    class Variant(Arith):
        pass

    be = HFBackend()
    reference = config_hash(Arith(), "dev", be)
    assert config_hash(Arith(), "dev", HFBackend()) == reference
    changes: list[Any] = [
        ("split", lambda: config_hash(Arith(), "test", be)),
        ("chat template", lambda: config_hash(Arith({"chat_template": True}), "dev", be)),
        ("backend dtype", lambda: config_hash(Arith(), "dev", HFBackend({"dtype": "bfloat16"}))),
        ("limit", lambda: config_hash(Arith(), "dev", be, limit=20)),
    ]
    # scores on 20 and on 50 items are not one measurement; no limit is the hash it always was
    assert config_hash(Arith(), "dev", be, limit=20) != config_hash(Arith(), "dev", be, limit=50)
    assert config_hash(Arith(), "dev", be, limit=None) == reference
    for field, value in [
        ("prompt_template", "Q: {question}\nA: "),
        ("max_new_tokens", 9),
        ("temperature", 0.5),
        ("top_p", 0.9),
        ("stop", ("\n\n",)),
        ("few_shot", (("Q: 1+1\nA:", " 2"),)),
        ("system_prompt", "Add."),
        ("num_samples", 2),
        ("seed", 1),
    ]:
        Variant.eval_config = Arith.eval_config.replace(**{field: value})
        changes.append((field, lambda: config_hash(Variant(), "dev", be)))
        assert config_hash(Variant(), "dev", be) != reference, field
    Variant.eval_config = Arith.eval_config
    assert config_hash(Variant(), "dev", be) == reference
    Variant.version = Arith.version + ".1"
    assert config_hash(Variant(), "dev", be) != reference
    for label, fn in changes[:3]:
        assert fn() != reference, label


def test_model_hash_is_content_based(tiny_model: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny_model, copy)
    assert model_hash(copy) == model_hash(tiny_model)
    (copy / "config.json").chmod(0o644)
    (copy / "config.json").write_text((copy / "config.json").read_text() + " ")
    assert model_hash(copy) != model_hash(tiny_model)


def test_eval_cli_json(shared_home: Path, tiny_model: Path) -> None:
    proc = cli(
        "eval",
        "--task",
        "arith",
        "--model",
        "autorl:tiny",
        "--limit",
        "50",
        "--json",
        env={"AUTORL_HOME": str(shared_home)},
        check=True,
    )
    record = json.loads(proc.stdout)
    for key in ("score", "n", "stderr", "ci95", "config_hash", "per_item_path"):
        assert key in record
    assert record["n"] == 50 and 0 < record["score"] < 100
    lines = Path(record["per_item_path"]).read_text().splitlines()
    assert len(lines) == 50 and {"id", "score", "completions"} <= json.loads(lines[0]).keys()
    text = cli(
        "eval",
        "--task",
        "arith",
        "--model",
        "autorl:tiny",
        "--limit",
        "50",
        env={"AUTORL_HOME": str(shared_home)},
        check=True,
    ).stdout
    assert f"{record['score']:.2f}" in text and record["config_hash"] in text


def test_eval_cli_bad_inputs(shared_home: Path, tmp_path: Path) -> None:
    env = {"AUTORL_HOME": str(shared_home), "HF_HUB_OFFLINE": "1"}
    for args, message in [
        (["--split", "train"], "has no split 'train'"),
        (["--limit", "0"], "--limit must be positive"),
        (["--backend", "hff"], "unknown backend 'hff'"),
    ]:
        proc = cli("eval", "--task", "arith", "--model", "autorl:tiny", *args, env=env)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    (tmp_path / "notamodel").mkdir()
    proc = cli("eval", "--task", "arith", "--model", str(tmp_path / "notamodel"), env=env)
    assert proc.returncode == 2 and "no config.json" in proc.stderr


def test_scoring_error_is_recorded_on_the_item_not_fatal(tmp_path: Path) -> None:
    from autorl_example_plugin.stub import EchoBenchmark

    be = PolicyBackend(lambda prompt: "raise" if prompt.endswith("3") else prompt.split()[-1])
    rec = evaluate_model(
        EchoBenchmark(), be, tmp_path, split="dev", hidden_dir=tmp_path, per_item_path=tmp_path / "items.jsonl"
    )
    items = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    broken = [i for i in items if i["error"]]
    assert [i["id"] for i in broken] == ["dev-3", "dev-13"]
    assert "scoring blew up" in broken[0]["error"]
    assert rec.errors == 2 and rec.score == pytest.approx(90.0)


class _Minimal(Benchmark):
    """Data and scoring only: the rest is the base class's."""

    name = "minimal"

    def prepare_train_data(self, target_dir: Path) -> None:
        pass

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        for split in self.splits:
            write_hidden_items(
                hidden_dir, split, [Item(f"{split}-{k}", {"question": f"say {k}"}, str(k)) for k in range(3)]
            )

    def score(self, item: Item, completion: str) -> float:
        return float(completion.strip() == item.reference)


def test_a_benchmark_reads_its_stored_items_by_default_and_is_handed_the_hidden_folder(tmp_path: Path) -> None:
    bench, hidden = _Minimal(), tmp_path / "hidden"
    with pytest.raises(HiddenDataError, match="minimal's hidden dev items are not in"):
        bench.load_items("dev", hidden)
    rec = evaluate_model(
        bench,
        PolicyBackend(lambda prompt: prompt.split()[-1] if prompt != "say 2" else "?"),
        tmp_path,
        split="test",
        hidden_dir=hidden,
    )
    assert rec.item_scores == {"test-0": 1.0, "test-1": 1.0, "test-2": 0.0}
    assert bench.hidden_dir == hidden  # for files beside the items (a catalog, a judge's cache)


class _Counter(Environment):
    def __init__(self, target: int) -> None:
        self.target, self.value = target, 0

    def reset(self) -> str:
        return "value 0"

    def step(self, action: str) -> StepResult:
        self.value += 1 if action == "inc" else 0
        done = self.value >= self.target
        return StepResult(f"value {self.value}", 1.0 if done else 0.0, done)


class _CountBench(EpisodeBenchmark, Benchmark):
    name = "count"
    max_steps = 6
    eval_config = EvalConfig(max_new_tokens=4)

    def prepare_train_data(self, target_dir: Path) -> None:
        pass

    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        return [Item(f"g{k}", {"question": ""}, k) for k in (1, 2, 3, 9)]

    def score(self, item: Item, completion: str) -> float:
        return 0.0

    def evaluator(self) -> EpisodeEvaluator:
        return EpisodeEvaluator()

    def make_env(self, item: Item) -> Environment:
        return _Counter(int(item.reference))

    def episode_prompt(self, item: Item, history: list[tuple[str, str]], observation: str) -> str:
        return observation


def test_episode_evaluator_steps_episodes_in_lockstep(tmp_path: Path) -> None:
    be = PolicyBackend(lambda prompt: "inc")
    rec = evaluate_model(_CountBench(), be, tmp_path, split="dev", hidden_dir=tmp_path)
    # one batched call per turn over the episodes still running: 4, 3, 2, then the long one alone
    assert be.calls == [4, 3, 2, 1, 1, 1]
    assert rec.item_scores == {"g1": 1.0, "g2": 1.0, "g3": 1.0, "g9": 0.0}


class _OptionsBench(_CountBench):
    declared_options = {**EpisodeBenchmark.EPISODE_OPTIONS, "target": int}
    n_examples = 2

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.read_episode_options()

    def config(self) -> EvalConfig:
        return self.episode_config()


def test_an_episode_benchmark_takes_the_episode_options_with_its_own_defaults() -> None:
    plain = _OptionsBench()
    assert (plain.max_steps, plain.n_examples) == (6, 2)
    assert plain.config() == EvalConfig(max_new_tokens=4)
    bench = _OptionsBench({"max_steps": 3, "examples": 0, "chat": True, "max_new_tokens": 9, "target": 1})
    assert (bench.max_steps, bench.n_examples) == (3, 0)
    assert bench.config() == EvalConfig(max_new_tokens=9, chat_template=True)
    assert _OptionsBench({"chat_template": False, "chat": True}).config().chat_template is False
    with pytest.raises(UsageError, match=r"max_step: .*did you mean max_steps"):
        _OptionsBench({"max_step": 3})


def test_the_engine_picks_the_generation_evaluator_unless_the_benchmark_names_one() -> None:
    from autorl_example_plugin.stub import EchoBenchmark

    assert EchoBenchmark().evaluator() is None
    assert type(evaluator_for(EchoBenchmark())) is GenerationEvaluator
    assert type(evaluator_for(_CountBench())) is EpisodeEvaluator


def test_vllm_sampling_matches_hf_decoding() -> None:
    greedy = sampling_kwargs(GenerationRequest("p", max_new_tokens=8, stop=("\n",), top_p=0.5))
    assert greedy == {"n": 1, "max_tokens": 8, "temperature": 0.0, "top_p": 1.0, "stop": ["\n"], "seed": None}
    sample = sampling_kwargs(GenerationRequest("p", max_new_tokens=8, temperature=0.7, top_p=0.9, n=4, seed=5))
    assert sample["temperature"] == 0.7 and sample["top_p"] == 0.9 and sample["n"] == 4 and sample["seed"] == 5
    assert sample["stop"] is None


@pytest.fixture
def openai_server(tiny_model: Path) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A real OpenAI-compatible server on 127.0.0.1 serving the tiny model by path, answering with the sum asked for."""
    import re

    from autorl.inference.hf import load_tokenizer

    tok = load_tokenizer(tiny_model)

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    seen: list[dict[str, Any]] = []
    failures = {"left": 1}

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        if failures["left"]:
            failures["left"] -= 1
            return JSONResponse({"error": "overloaded"}, status_code=503)
        a, b = map(int, re.findall(r"(\d+)\+(\d+)", tok.decode(body["prompt"]))[-1])
        return JSONResponse(
            {
                "choices": [{"index": 0, "text": f" {a + b}\nQ: more", "finish_reason": "stop"}],
                "usage": {"completion_tokens": 3},
            }
        )

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": str(tiny_model), "root": str(tiny_model)}]})

    app = Starlette(routes=[Route("/v1/models", models), Route("/v1/completions", completions, methods=["POST"])])
    with serve_in_thread(app) as port:
        yield f"http://127.0.0.1:{port}/v1", seen


def test_openai_backend_against_a_real_server(
    openai_server: tuple[str, list[dict[str, Any]]], tiny_model: Path, tmp_path: Path
) -> None:
    from autorl.inference.openai import OpenAIBackend

    url, seen = openai_server
    be = OpenAIBackend({"base_url": url, "concurrency": 4})
    rec = evaluate_model(Arith(), be, tiny_model, split="dev", hidden_dir=tmp_path, limit=20)
    assert rec.score == 100.0 and rec.n == 20
    assert len(seen) == 21  # one 503 retried
    assert seen[-1]["model"] == str(tiny_model) and seen[-1]["stop"] == ["\n"] and seen[-1]["temperature"] == 0.0
    assert all(isinstance(t, int) for t in seen[-1]["prompt"])  # token ids, tokenized here


def test_compacting_decoder_matches_generate_and_both_apply_logits_processors(tiny_model: Path) -> None:
    reqs = [*arith_requests(80), GenerationRequest("Q: What is 12+34?\nA:", max_new_tokens=10)]
    outputs = {}
    for mode in ("generate", "compact"):
        be = HFBackend({"decode": mode, "batch_size": 32})
        be.load(tiny_model)
        outputs[mode] = [(c.texts, c.output_tokens, c.finish_reasons) for c in be.generate(reqs)]
    assert outputs["compact"] == outputs["generate"]

    def end_after_two(prompts: list[list[int]], step: int, logits: Any) -> Any:
        assert all(isinstance(p, list) and p for p in prompts)
        if step >= 2:
            logits[:, :] = -float("inf")
            logits[:, be.tokenizer.eos_token_id] = 0.0
        return logits

    for mode in ("generate", "compact"):
        be = HFBackend({"decode": mode, "logits_processor": end_after_two})
        be.load(tiny_model)
        assert all(c.output_tokens <= 2 for c in be.generate(reqs[:20]))
