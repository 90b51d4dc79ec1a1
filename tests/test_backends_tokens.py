"""Every backend feeds the model the same tokens, and every setting of a backend that moves a score is hashed."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autorl.errors import EvaluationError, UsageError
from autorl.evaluation.identity import model_hash
from autorl.inference.base import GenerationRequest
from autorl.inference.hf import HFBackend, load_tokenizer
from autorl.inference.openai import OpenAIBackend
from autorl.inference.vllm import vllm_prompts

from .scripted_llm import serve_in_thread

BOS = "<|im_start|>"
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


@pytest.fixture(scope="module")
def bos_model(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with a Llama-style tokenizer: it adds a BOS to every text, and its chat template writes one."""
    out = tmp_path_factory.mktemp("bos") / "model"
    shutil.copytree(tiny_model, out)
    tok = json.loads((out / "tokenizer.json").read_text())
    bos_id = next(t["id"] for t in tok["added_tokens"] if t["content"] == BOS)
    tok["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [
            {"SpecialToken": {"id": BOS, "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {BOS: {"id": BOS, "ids": [bos_id], "tokens": [BOS]}},
    }
    (out / "tokenizer.json").write_text(json.dumps(tok))
    config = json.loads((out / "tokenizer_config.json").read_text())
    config.update(tokenizer_class="PreTrainedTokenizerFast", bos_token=BOS, chat_template=TEMPLATE)
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


REQUESTS = [
    GenerationRequest("Q: What is 12+34?\nA:", max_new_tokens=4),
    GenerationRequest("Q: What is 5+6?\nA:", max_new_tokens=4),
    GenerationRequest([{"role": "user", "content": "What is 7+8?"}], max_new_tokens=4),
]


def test_the_fixture_tokenizer_adds_a_bos_by_default(bos_model: Path) -> None:
    tok = load_tokenizer(bos_model)
    assert tok("Q: 1")["input_ids"][0] == tok.bos_token_id
    assert tok.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False).startswith(BOS)


def _hf_prompts(model_dir: Path) -> list[list[int]]:
    """The prompt ids of ``REQUESTS`` in request order, checked against what the hf backend's model received."""
    seen: list[list[int]] = []

    def record(prompts: list[list[int]], step: int, logits: Any) -> Any:
        if step == 0:
            seen.extend(list(p) for p in prompts)
        return logits

    be = HFBackend({"logits_processor": record, "batch_size": 1, "device": "cpu"})
    be.load(model_dir)
    be.generate(REQUESTS)
    ids = be.prompt_ids(REQUESTS)
    # generation runs longest first: the model saw exactly these prompts, in its own order
    assert sorted(seen) == sorted(ids) and len(seen) == len(REQUESTS)
    return ids


@pytest.fixture
def openai_echo(bos_model: Path) -> Iterator[tuple[str, list[dict[str, Any]], list[str]]]:
    """A real OpenAI-compatible server on 127.0.0.1 that serves ``bos_model`` by path and records the requests."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    seen: list[dict[str, Any]] = []
    served = [str(bos_model)]

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": m, "root": m, "object": "model"} for m in served]})

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        return JSONResponse(
            {"choices": [{"index": 0, "text": " 46", "finish_reason": "stop"}], "usage": {"completion_tokens": 2}}
        )

    app = Starlette(routes=[Route("/v1/models", models), Route("/v1/completions", completions, methods=["POST"])])
    with serve_in_thread(app) as port:
        yield f"http://127.0.0.1:{port}/v1", seen, served


def test_hf_vllm_and_openai_feed_the_model_the_same_tokens(
    bos_model: Path, openai_echo: tuple[str, list[dict[str, Any]], list[str]]
) -> None:
    tok = load_tokenizer(bos_model)
    hf = _hf_prompts(bos_model)
    # no BOS added to a text prompt (as the hf backend always did); the chat template's own BOS, once
    assert hf[0] == tok("Q: What is 12+34?\nA:", add_special_tokens=False)["input_ids"]
    assert hf[0][0] != tok.bos_token_id
    assert hf[2][0] == tok.bos_token_id and hf[2][1] != tok.bos_token_id

    assert [p["prompt_token_ids"] for p in vllm_prompts(tok, REQUESTS)] == hf

    url, seen, _ = openai_echo
    be = OpenAIBackend({"base_url": url, "concurrency": 1})
    be.load(bos_model)
    out = be.generate(REQUESTS)
    assert [c.texts for c in out] == [[" 46"]] * 3
    assert sorted(s["prompt"] for s in seen) == sorted(hf)
    assert {s["model"] for s in seen} == {str(bos_model)}


def test_openai_refuses_a_fixed_served_model_name() -> None:
    with pytest.raises(UsageError, match="no 'model' option"):
        OpenAIBackend({"base_url": "http://127.0.0.1:9/v1", "model": "served-model"})


def test_openai_refuses_a_server_that_does_not_serve_the_checkpoint(
    bos_model: Path, tmp_path: Path, openai_echo: tuple[str, list[dict[str, Any]], list[str]]
) -> None:
    url, seen, served = openai_echo
    other = tmp_path / "other-checkpoint"
    shutil.copytree(bos_model, other)
    be = OpenAIBackend({"base_url": url})
    with pytest.raises(EvaluationError, match=r"does not serve .*other-checkpoint"):
        be.load(other)
    served.append(str(other))
    be.load(other)
    assert be.model == str(other) and not seen


def test_a_logits_processor_enters_the_hf_identity() -> None:
    def keep(prompts: list[list[int]], step: int, logits: Any) -> Any:
        return logits

    def ban_first(prompts: list[list[int]], step: int, logits: Any) -> Any:
        logits[:, 0] = -float("inf")
        return logits

    def scaled(factor: float) -> Any:
        def hook(prompts: list[list[int]], step: int, logits: Any) -> Any:
            return logits * factor

        return hook

    ids = [
        HFBackend({"device": "cpu", **opts}).identity()
        for opts in (
            {},
            {"logits_processor": keep},
            {"logits_processor": ban_first},
            {"logits_processor": scaled(1.0)},
            {"logits_processor": scaled(2.0)},
        )
    ]
    assert len({json.dumps(i, sort_keys=True) for i in ids}) == 5
    assert HFBackend({"device": "cpu", "logits_processor": keep}).identity() == ids[1]
    assert HFBackend({"device": "cpu", "logits_processor": scaled(2.0)}).identity() == ids[4]


def test_model_hash_follows_linked_directories(tmp_path: Path) -> None:
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"one")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    os.symlink(weights, model / "shards")
    os.symlink(model, model / "shards" / "loop")  # a link back up ends, it does not loop
    before = model_hash(model)
    (weights / "model.safetensors").write_bytes(b"two")
    assert model_hash(model) != before
    copy = tmp_path / "copy"
    shutil.copytree(model, copy, symlinks=False, ignore=shutil.ignore_patterns("loop"))
    assert model_hash(copy) == model_hash(model)
