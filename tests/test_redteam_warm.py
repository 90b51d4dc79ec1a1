"""Red team: checkpoints built to make a warm engine (weights swapped in place) score something a fresh load
would not, or to leave something behind for the evaluation after them (the baseline's, another submission's).

Each attack passes the grader's validation first (what a real submission must do), then goes through
``HFBackend.acquire`` on an engine that already holds the base model, and is compared with what a fresh
``HFBackend.load`` of the same folder gives: the same tensors, generation settings and tokenizer, or the
same refusal.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from autorl.grader.validation import validate_checkpoint

Tensors = dict[str, Any]


def _moved(base: Path) -> Tensors:
    import torch
    from safetensors.torch import load_file

    weights = load_file(str(base / "model.safetensors"))
    gen = torch.Generator().manual_seed(11)
    return {k: v + 0.05 * torch.randn(v.shape, generator=gen, dtype=v.dtype) for k, v in weights.items()}


def _checkpoint(base: Path, target: Path, files: Callable[[Tensors], dict[str, Tensors]]) -> Path:
    """The base model's folder with its weights moved and written as ``files(weights)`` says."""
    from safetensors.torch import save_file

    shutil.copytree(base, target)
    (target / "model.safetensors").unlink()
    for name, tensors in files(_moved(base)).items():
        save_file(tensors, str(target / name), metadata={"format": "pt"})
    validate_checkpoint(target)  # the grader accepts it: it reaches the engine
    return target


def _state(model: Any) -> Tensors:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same_model(warm: Any, fresh: Any) -> bool:
    import torch

    a, b = _state(warm.model), _state(fresh.model)
    return (
        a.keys() == b.keys()
        and all(torch.equal(a[k], b[k]) for k in a)
        and warm.model.generation_config.to_dict() == fresh.model.generation_config.to_dict()
        and warm.tokenizer.chat_template == fresh.tokenizer.chat_template
        and warm.tokenizer.get_vocab() == fresh.tokenizer.get_vocab()
    )


def _warm_then(base: Path, attack: Path) -> tuple[Any, str]:
    from autorl.inference.hf import HFBackend

    warm = HFBackend({"device": "cpu"})
    assert warm.acquire(base) == "fresh"
    return warm, warm.acquire(attack)


def _fresh(model_dir: Path) -> Any:
    from autorl.inference.hf import HFBackend

    fresh = HFBackend({"device": "cpu"})
    fresh.load(model_dir)
    return fresh


def test_weights_split_over_an_extra_safetensors_file_score_as_a_fresh_load(tiny_model: Path, tmp_path: Path) -> None:
    def split(w: Tensors) -> dict[str, Tensors]:
        keys = sorted(w)
        return {
            "model.safetensors": {k: w[k] for k in keys[: len(keys) // 2]},
            "extra.safetensors": {k: w[k] for k in keys[len(keys) // 2 :]},
        }

    import torch

    from autorl.inference.hf import HFBackend

    attack = _checkpoint(tiny_model, tmp_path / "split", split)
    warm = HFBackend({"device": "cpu"})
    assert warm.acquire(tiny_model) == "fresh"
    # a fresh load reads model.safetensors only and initialises the rest at random: the same seed on both
    # sides makes that draw comparable; the warm engine must not take the extra file's tensors instead
    torch.manual_seed(0)
    how = warm.acquire(attack)
    torch.manual_seed(0)
    fresh = _fresh(attack)
    assert how == "fresh"  # model.safetensors alone does not match the model one for one: no swap
    assert _same_model(warm, fresh)


def test_weights_under_another_file_name_are_refused_as_a_fresh_load_refuses_them(
    tiny_model: Path, tmp_path: Path
) -> None:
    attack = _checkpoint(tiny_model, tmp_path / "renamed", lambda w: {"weights.safetensors": w})
    with pytest.raises(OSError):
        _fresh(attack)  # what a fresh worker (and anyone with from_pretrained) does with it
    from autorl.inference.hf import HFBackend

    warm = HFBackend({"device": "cpu"})
    warm.acquire(tiny_model)
    with pytest.raises(OSError):
        warm.acquire(attack)


def test_tied_output_embedding_given_instead_of_the_input_one_loads_as_fresh(tiny_model: Path, tmp_path: Path) -> None:
    def lm_head_only(w: Tensors) -> dict[str, Tensors]:
        out = {k: v for k, v in w.items() if k != "model.embed_tokens.weight"}
        out["lm_head.weight"] = w["model.embed_tokens.weight"]
        return {"model.safetensors": out}

    attack = _checkpoint(tiny_model, tmp_path / "lm_head", lm_head_only)
    warm, _how = _warm_then(tiny_model, attack)
    assert _same_model(warm, _fresh(attack))


def test_tied_embeddings_given_twice_with_different_values_load_as_fresh(tiny_model: Path, tmp_path: Path) -> None:
    import torch

    def both(w: Tensors) -> dict[str, Tensors]:
        return {"model.safetensors": {**w, "lm_head.weight": w["model.embed_tokens.weight"] + torch.ones(1)}}

    attack = _checkpoint(tiny_model, tmp_path / "both", both)
    warm, how = _warm_then(tiny_model, attack)
    assert how == "fresh"  # which copy wins is from_pretrained's business: the swap declines
    assert _same_model(warm, _fresh(attack))


def test_a_shape_mismatch_hidden_under_a_matching_config_is_not_swapped(tiny_model: Path, tmp_path: Path) -> None:
    import torch

    def grown(w: Tensors) -> dict[str, Tensors]:
        w = dict(w)
        w["model.norm.weight"] = torch.ones(4096)  # config.json says hidden_size 128
        return {"model.safetensors": w}

    attack = _checkpoint(tiny_model, tmp_path / "grown", grown)
    from autorl.inference.hf import HFBackend

    warm = HFBackend({"device": "cpu"})
    warm.acquire(tiny_model)
    before = _state(warm.model)
    with pytest.raises(Exception):  # noqa: B017 (whatever from_pretrained raises for a size mismatch)
        warm.acquire(attack)
    assert warm._loaded is None  # the engine is not kept as if it held either model
    assert before  # the base really was loaded


def test_generation_config_and_chat_template_of_a_submission_do_not_persist_into_the_baseline(
    tiny_model: Path, tmp_path: Path
) -> None:
    attack = tmp_path / "settings"
    shutil.copytree(tiny_model, attack)
    gen = json.loads((attack / "generation_config.json").read_text())
    gen.update({"repetition_penalty": 3.0, "suppress_tokens": [5, 6], "eos_token_id": [0, 7], "min_new_tokens": 4})
    (attack / "generation_config.json").write_text(json.dumps(gen))
    tok = json.loads((attack / "tokenizer_config.json").read_text())
    tok["chat_template"] = "{% for m in messages %}HACK {{ m['content'] }}{% endfor %}"
    (attack / "tokenizer_config.json").write_text(json.dumps(tok))
    validate_checkpoint(attack)
    from autorl.inference.hf import HFBackend

    warm = HFBackend({"device": "cpu"})
    assert warm.acquire(attack) == "fresh"
    assert warm.tokenizer.chat_template.startswith("{% for m in messages %}HACK")
    assert warm.acquire(tiny_model) == "reloaded"
    assert _same_model(warm, _fresh(tiny_model))
    assert warm._eos_ids() == {0}


def test_a_lora_merge_is_undone_before_the_baseline(tiny_model: Path, tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(5)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model))
    lora = get_peft_model(
        model,
        LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj", "embed_tokens"], init_lora_weights=False),
    )
    lora.save_pretrained(str(tmp_path / "lora"))
    from autorl.inference.hf import HFBackend

    warm = HFBackend({"device": "cpu"})
    warm.acquire(tiny_model)
    assert warm.acquire(tmp_path / "lora", tiny_model) == "reloaded"
    merged = _state(warm.model)
    assert warm.acquire(tiny_model, tiny_model) == "reloaded"
    fresh = _fresh(tiny_model)
    assert _same_model(warm, fresh)
    assert not torch.equal(merged["model.embed_tokens.weight"], _state(fresh.model)["model.embed_tokens.weight"])


def test_a_lora_that_unties_the_output_embedding_leaves_nothing_untied_for_the_next_models(
    tiny_model: Path, tmp_path: Path
) -> None:
    """``modules_to_save=["lm_head"]`` on a tied model: the merged engine holds two embedding tensors; the
    checkpoints after it (one giving both, then the base giving one) still score as fresh loads."""
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    torch.manual_seed(6)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model))
    lora = get_peft_model(
        model, LoraConfig(r=4, target_modules=["q_proj"], modules_to_save=["lm_head"], init_lora_weights=False)
    )
    lora.save_pretrained(str(tmp_path / "lora"))
    both = tmp_path / "both"
    shutil.copytree(tiny_model, both)
    weights = load_file(str(tiny_model / "model.safetensors"))
    weights["lm_head.weight"] = weights["model.embed_tokens.weight"] + 1.0
    save_file(weights, str(both / "model.safetensors"), metadata={"format": "pt"})
    validate_checkpoint(both)
    from autorl.inference.hf import HFBackend

    warm = HFBackend({"device": "cpu"})
    warm.acquire(tiny_model)
    warm.acquire(tmp_path / "lora", tiny_model)
    state = warm.model.state_dict()
    assert state["lm_head.weight"].data_ptr() != state["model.embed_tokens.weight"].data_ptr()  # untied now
    warm.acquire(both)
    assert _same_model(warm, _fresh(both))
    warm.acquire(tiny_model)
    assert _same_model(warm, _fresh(tiny_model))


def test_a_full_file_next_to_an_index_of_other_shards_scores_as_a_fresh_load(tiny_model: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    def two_models(w: Tensors) -> dict[str, Tensors]:
        return {"model.safetensors": load_file(str(tiny_model / "model.safetensors")), "shard-1.safetensors": w}

    attack = _checkpoint(tiny_model, tmp_path / "index", two_models)
    index = {"metadata": {}, "weight_map": {k: "shard-1.safetensors" for k in _moved(tiny_model)}}
    (attack / "model.safetensors.index.json").write_text(json.dumps(index))
    validate_checkpoint(attack)
    warm, how = _warm_then(tiny_model, attack)
    assert how in ("reloaded", "fresh")
    assert _same_model(warm, _fresh(attack))
