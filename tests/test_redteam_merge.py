"""Red team: LoRA adapters merged for the vllm backend (``merged_checkpoint``), the warm engine's key
(``VLLMBackend._engine_key``), and the slot's one-engine-per-process restart protocol.

Every attack is a submission the grader accepts: it goes through the grader's own snapshot
(``take_snapshot``, which refuses links) and ``validate_checkpoint`` before it is merged or keyed. A test
fails when the hole exists; the holes this file found are fixed (each test says which it was).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from autorl.grader.snapshot import take_snapshot
from autorl.grader.validation import validate_checkpoint
from autorl.inference.vllm import VLLMBackend
from autorl.inference.weights import merged_checkpoint

from .conftest import as_snapshot, write_lora

torch = pytest.importorskip("torch")
pytest.importorskip("peft")


def _submitted(folder: Path, tmp_path: Path) -> Path:
    """The grader's snapshot of ``folder`` (links refused, only regular files copied), validated."""
    target = tmp_path / "snapshots" / folder.name
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        take_snapshot(fd, target)
    finally:
        os.close(fd)
    validate_checkpoint(target)
    return target


def _bump_saved_modules(peft: Any) -> None:
    """Move the fully trained copies (modules_to_save, trainable tokens) off their initial values."""
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "modules_to_save" in name or "trainable_tokens" in name or "token_adapter" in name:
                p.add_(0.5)


def _hf(adapter: Path, base: Path) -> tuple[Any, Any]:
    from autorl.inference.hf import load_causal_lm

    return load_causal_lm(adapter, base, device="cpu", dtype="float32")


def _fresh(folder: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(folder)).eval()


def _same_model(a: Any, b: Any) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    if sa.keys() != sb.keys() or not all(torch.equal(sa[k], sb[k]) for k in sa):
        return False
    ids = torch.tensor([[5, 17, 40, 9, 60, 3, 100, 7]])
    with torch.no_grad():
        return bool(torch.equal(a(ids).logits, b(ids).logits))


def _swapped_vocab(base: Path) -> str:
    """The base's tokenizer.json with the ids of "1" and "2" exchanged (a tokenizer that reads digits apart)."""
    tok = json.loads((base / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    vocab["1"], vocab["2"] = vocab["2"], vocab["1"]
    return json.dumps(tok)


# ---------------------------------------------------------------- 1. the merge is the hf backend's model


LORA_VARIANTS: dict[str, dict[str, Any]] = {
    "dora": {"use_dora": True},
    "rslora": {"use_rslora": True},
    "fan_in_fan_out": {"fan_in_fan_out": True},
    "lora_on_tied_embedding": {"target_modules": ["embed_tokens", "q_proj"]},
    "lora_on_tied_lm_head": {"target_modules": ["lm_head", "q_proj"]},
    "modules_to_save_tied_embedding": {"modules_to_save": ["embed_tokens"], "perturb": _bump_saved_modules},
    "trainable_token_indices": {"trainable_token_indices": {"embed_tokens": [3, 5]}, "perturb": _bump_saved_modules},
    "target_parameters": {"target_modules": [], "target_parameters": ["mlp.gate_proj.weight"]},
}


@pytest.mark.parametrize("variant", sorted(LORA_VARIANTS))
def test_lora_variants_merge_to_the_hf_backends_model(variant: str, tiny_model: Path, tmp_path: Path) -> None:
    options = dict(LORA_VARIANTS[variant])
    adapter = _submitted(write_lora(tiny_model, tmp_path / variant, **options), tmp_path)
    merged = merged_checkpoint(adapter, tiny_model, tmp_path / "merged")
    expected, _ = _hf(adapter, tiny_model)
    assert _same_model(_fresh(merged), expected)


def test_extra_weight_files_and_odd_fields_in_an_adapter_are_ignored_by_both_backends(
    tiny_model: Path, tmp_path: Path
) -> None:
    adapter = write_lora(tiny_model, tmp_path / "extra")
    # a full model's weights and config next to the adapter, and a base named elsewhere: peft and the merge
    # both read only adapter_config.json and adapter_model.safetensors
    from safetensors.torch import load_file, save_file

    moved = {k: v + 1.0 for k, v in load_file(str(tiny_model / "model.safetensors")).items()}
    save_file(moved, str(adapter / "model.safetensors"), metadata={"format": "pt"})
    save_file(moved, str(adapter / "extra.safetensors"), metadata={"format": "pt"})
    shutil.copy2(tiny_model / "config.json", adapter / "config.json")
    shutil.copy2(tiny_model / "generation_config.json", adapter / "generation_config.json")
    cfg = json.loads((adapter / "adapter_config.json").read_text())
    cfg.update(base_model_name_or_path="someone/else", revision="main", inference_mode=False, unknown_field=[1, 2])
    (adapter / "adapter_config.json").write_text(json.dumps(cfg))
    adapter = _submitted(adapter, tmp_path)
    merged = merged_checkpoint(adapter, tiny_model, tmp_path / "merged")
    expected, _ = _hf(adapter, tiny_model)
    assert _same_model(_fresh(merged), expected)
    assert (merged / "config.json").read_bytes() == (tiny_model / "config.json").read_bytes()


def test_an_adapter_with_layer_replication_is_refused_by_its_field_never_merged_into_the_bases_layout(
    tiny_model: Path, tmp_path: Path
) -> None:
    # layer_replication adds layers that share the base's tensors: written in the base's 2-layer layout it would
    # have been reloaded into a warm engine while the hf backend scores 3 layers; scored, it failed with
    # "IndexError: list index out of range" (the config's layer_types lists 2 layers). The grader refuses it at
    # the door, by its field
    from autorl.errors import InvalidCheckpointError

    folder = write_lora(tiny_model, tmp_path / "replicated", layer_replication=[[0, 2], [1, 2]])
    with pytest.raises(InvalidCheckpointError) as refused:
        _submitted(folder, tmp_path)
    assert str(refused.value).startswith(
        "adapter_config.json: layer_replication (layers 0-1, 1-1 stacked: 3 layers) is not supported"
    )
    assert "IndexError" not in str(refused.value)
    expected, _ = _hf(folder, tiny_model)
    assert expected.config.num_hidden_layers == 3  # what the hf backend would score
    # were it merged anyway, the merge refuses it rather than writing it in the base's layout
    with pytest.raises(InvalidCheckpointError, match="does not make a loadable checkpoint"):
        merged_checkpoint(folder, tiny_model, tmp_path / "merged")
    assert not (tmp_path / "merged").exists() and not (tmp_path / "merged.partial").exists()
    # a full model grown so, its config out of step (transformers itself will not save one): refused by the
    # fields that disagree
    full = tmp_path / "stacked"
    shutil.copytree(tiny_model, full)
    config = json.loads((full / "config.json").read_text())
    config.update(num_hidden_layers=3, layer_types=["full_attention"] * 2)
    (full / "config.json").chmod(0o644)
    (full / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        InvalidCheckpointError,
        match=r"config\.json: layer_types lists 2 layers but "
        r"num_hidden_layers is 3",
    ):
        _submitted(full, tmp_path)


def _adapter_with_tokenizer(tiny_model: Path, folder: Path) -> Path:
    adapter = write_lora(tiny_model, folder)
    shutil.copy2(tiny_model / "tokenizer.json", adapter / "tokenizer.json")
    shutil.copy2(tiny_model / "tokenizer_config.json", adapter / "tokenizer_config.json")
    return adapter


# was a hole (fixed): tokenizer_config 'fast_tokenizer_files' makes transformers read tokenizer.<version>.json, which
# merged_checkpoint does not copy (TOKENIZER_FILES only)
def test_an_adapters_versioned_tokenizer_file_goes_with_the_merge(tiny_model: Path, tmp_path: Path) -> None:
    from autorl.inference.hf import load_tokenizer

    adapter = _adapter_with_tokenizer(tiny_model, tmp_path / "versioned")
    config = json.loads((adapter / "tokenizer_config.json").read_text())
    config["fast_tokenizer_files"] = ["tokenizer.5.0.0.json"]
    (adapter / "tokenizer_config.json").write_text(json.dumps(config))
    (adapter / "tokenizer.5.0.0.json").write_text(_swapped_vocab(tiny_model))
    adapter = _submitted(adapter, tmp_path)
    _, hf_tok = _hf(adapter, tiny_model)
    assert hf_tok("12")["input_ids"] != load_tokenizer(tiny_model)("12")["input_ids"]  # the attack is live
    merged = merged_checkpoint(adapter, tiny_model, tmp_path / "merged")
    assert load_tokenizer(merged)("12")["input_ids"] == hf_tok("12")["input_ids"]


# was a hole (fixed): an adapter's additional_chat_templates/*.jinja sets the hf tokenizer's chat template;
# merged_checkpoint copies no subfolder, so the vllm prompts differ
def test_an_adapters_additional_chat_templates_go_with_the_merge(tiny_model: Path, tmp_path: Path) -> None:
    from autorl.inference.hf import load_tokenizer

    adapter = _adapter_with_tokenizer(tiny_model, tmp_path / "templates")
    (adapter / "additional_chat_templates").mkdir()
    template = "{% for m in messages %}Q: {{ m['content'] }}\n{% endfor %}A:"
    (adapter / "additional_chat_templates" / "default.jinja").write_text(template)
    adapter = _submitted(adapter, tmp_path)
    _, hf_tok = _hf(adapter, tiny_model)
    assert hf_tok.chat_template == template  # the attack is live: the hf backend renders chat prompts with it
    merged = merged_checkpoint(adapter, tiny_model, tmp_path / "merged")
    assert load_tokenizer(merged).chat_template == hf_tok.chat_template


def test_an_adapter_shipping_only_a_chat_template_uses_the_bases_tokenizer_in_both(
    tiny_model: Path, tmp_path: Path
) -> None:
    # no tokenizer.json / tokenizer_config.json / vocab.json: the hf backend reads the base's tokenizer, so must
    # the merge (the adapter's loose chat_template.jinja is ignored by both)
    from autorl.inference.hf import load_tokenizer

    adapter = write_lora(tiny_model, tmp_path / "loose")
    (adapter / "chat_template.jinja").write_text("{{ 'X' }}")
    adapter = _submitted(adapter, tmp_path)
    _, hf_tok = _hf(adapter, tiny_model)
    merged = merged_checkpoint(adapter, tiny_model, tmp_path / "merged")
    tok = load_tokenizer(merged)
    assert tok.chat_template == hf_tok.chat_template and tok.get_vocab() == hf_tok.get_vocab()


def test_an_adapter_tokenizer_with_only_added_tokens_changed_changes_the_engine_key(
    tiny_model: Path, tmp_path: Path
) -> None:
    from autorl.inference.hf import load_tokenizer

    adapter = _adapter_with_tokenizer(tiny_model, tmp_path / "added")
    tok = json.loads((adapter / "tokenizer.json").read_text())
    tok["added_tokens"].append(
        {
            "id": 265,
            "content": "<|rt|>",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
    )
    (adapter / "tokenizer.json").write_text(json.dumps(tok))
    adapter = _submitted(adapter, tmp_path)
    _, hf_tok = _hf(adapter, tiny_model)
    merged = merged_checkpoint(adapter, tiny_model, tmp_path / "merged")
    assert load_tokenizer(merged).get_added_vocab() == hf_tok.get_added_vocab()
    assert VLLMBackend._engine_key(merged) != VLLMBackend._engine_key(tiny_model)


# ---------------------------------------------------------------- 2. reads, writes and errors of the merge


def test_links_in_an_adapter_never_reach_the_merge(tiny_model: Path, tmp_path: Path) -> None:
    # merged_checkpoint itself would follow a linked adapter_model.safetensors (peft opens it); the grader's
    # snapshot refuses every link before that
    from autorl.errors import PathRefused

    secret = tmp_path / "outside.safetensors"
    adapter = write_lora(tiny_model, tmp_path / "linked")
    os.replace(adapter / "adapter_model.safetensors", secret)
    (adapter / "adapter_model.safetensors").symlink_to(secret)
    with pytest.raises(PathRefused):
        _submitted(adapter, tmp_path)


def test_a_broken_adapter_fails_with_an_error_and_writes_nothing(tiny_model: Path, tmp_path: Path) -> None:
    adapter = write_lora(tiny_model, tmp_path / "broken")
    cfg = json.loads((adapter / "adapter_config.json").read_text())
    cfg["target_modules"] = ["no_such_module"]
    (adapter / "adapter_config.json").write_text(json.dumps(cfg))
    adapter = _submitted(adapter, tmp_path)
    root = tmp_path / "scratch"
    root.mkdir()
    with pytest.raises(ValueError, match="no_such_module"):  # peft's message, the same the hf backend gives
        merged_checkpoint(adapter, tiny_model, root / "merged")
    assert list(root.iterdir()) == []


def test_the_merge_writes_only_its_target(tiny_model: Path, tmp_path: Path) -> None:
    adapter = _adapter_with_tokenizer(tiny_model, tmp_path / "names")
    for name in ("..tokenizer.json", "merges.txt..", "vocab.json.."):
        (adapter / name).write_text("{}")
    adapter = _submitted(adapter, tmp_path)
    root = tmp_path / "scratch"
    root.mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    merged = merged_checkpoint(adapter, tiny_model, root / "merged")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert [p.name for p in root.iterdir()] == ["merged"] and merged == root / "merged"
    assert all(p.is_file() and not p.is_symlink() for p in merged.iterdir())


# ---------------------------------------------------------------- 3. the warm engine's key


def _full(tiny_model: Path, folder: Path, edit: Callable[[Path], None]) -> Path:
    shutil.copytree(tiny_model, folder)
    edit(folder)
    return folder


# was a hole (fixed): _engine_key hashes ENGINE_SIDE_FILES only; a tokenizer.<version>.json named by
# fast_tokenizer_files is the tokenizer the engine reads, yet a reload keeps the old one
def test_a_versioned_tokenizer_file_enters_the_engine_key(tiny_model: Path, tmp_path: Path) -> None:
    from autorl.inference.hf import load_tokenizer

    def versioned(text: str) -> Callable[[Path], None]:
        def edit(folder: Path) -> None:
            config = json.loads((folder / "tokenizer_config.json").read_text())
            config["fast_tokenizer_files"] = ["tokenizer.5.0.0.json"]
            (folder / "tokenizer_config.json").write_text(json.dumps(config))
            (folder / "tokenizer.5.0.0.json").write_text(text)

        return edit

    first = _submitted(
        _full(tiny_model, tmp_path / "first", versioned((tiny_model / "tokenizer.json").read_text())), tmp_path
    )
    second = _submitted(_full(tiny_model, tmp_path / "second", versioned(_swapped_vocab(tiny_model))), tmp_path)
    assert load_tokenizer(first)("12")["input_ids"] != load_tokenizer(second)("12")["input_ids"]  # outputs differ
    assert VLLMBackend._engine_key(first) != VLLMBackend._engine_key(second)


def test_the_dtype_in_the_engine_key_is_the_one_transformers_reads(tiny_model: Path, tmp_path: Path) -> None:
    from transformers import AutoConfig

    def both(dtype: str, torch_dtype: str) -> Callable[[Path], None]:
        def edit(folder: Path) -> None:
            config = json.loads((folder / "config.json").read_text())
            config.update(dtype=dtype, torch_dtype=torch_dtype)
            (folder / "config.json").write_text(json.dumps(config))

        return edit

    def legacy(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        config.pop("dtype")
        config["torch_dtype"] = "bfloat16"
        (folder / "config.json").write_text(json.dumps(config))

    a = _full(tiny_model, tmp_path / "a", both("float32", "bfloat16"))
    b = _full(tiny_model, tmp_path / "b", legacy)
    assert AutoConfig.from_pretrained(str(a)).dtype != AutoConfig.from_pretrained(str(b)).dtype
    assert VLLMBackend._engine_key(a) != VLLMBackend._engine_key(b)
    assert VLLMBackend._engine_key(a) == VLLMBackend._engine_key(tiny_model)


def test_generation_settings_and_special_tokens_enter_the_engine_key(tiny_model: Path, tmp_path: Path) -> None:
    def gen(folder: Path) -> None:
        config = json.loads((folder / "generation_config.json").read_text())
        config["repetition_penalty"] = 1.3
        (folder / "generation_config.json").write_text(json.dumps(config))

    def special(folder: Path) -> None:
        (folder / "special_tokens_map.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))

    key = VLLMBackend._engine_key(tiny_model)
    for name, edit in (("gen", gen), ("special", special)):
        assert VLLMBackend._engine_key(_full(tiny_model, tmp_path / name, edit)) != key


# ---------------------------------------------------------------- 4. the slot's restart protocol


def _slot(tmp_path: Path) -> Any:
    from autorl.grader.config import GraderConfig
    from autorl.grader.jobs import EvalSlot

    config = GraderConfig(
        task="echo",
        workspace=str(tmp_path),
        output_dir=str(tmp_path),
        store_dir=str(tmp_path / "store"),
        hidden_dir=str(tmp_path / "hidden"),
        backend="scripted",
        backend_options={"process_per_engine": True},
        eval_timeout=600.0,
        limit=None,
    )
    return EvalSlot(config, Path(config.store_dir))


def test_a_checkpoint_that_fails_after_a_restart_fails_once_and_is_no_restart(tmp_path: Path) -> None:
    from autorl.grader.jobs import EvalFailed

    from .conftest import echo_answers, write_stub_checkpoint

    fine = write_stub_checkpoint(tmp_path / "fine", echo_answers(4))
    crash = write_stub_checkpoint(tmp_path / "crash", echo_answers(1), {"crash": True})
    slot = _slot(tmp_path)
    try:
        assert slot.run(as_snapshot(fine), "dev", "s0")["engine"] == "fresh"
        # the warm worker asks for a fresh process (not a failure); there the load fails: a real failure
        # the failure says what failed in the checkpoint's own terms, not the bare exception alone
        with pytest.raises(EvalFailed, match=r"refuses to load.* \(evaluating the checkpoint \(model_type "):
            slot.run(as_snapshot(crash), "dev", "s1")
        assert slot._workers_started == 2 and slot.worker_pid is None
        after = slot.run(as_snapshot(fine), "dev", "s2")
    finally:
        slot.close()
    assert after["engine"] == "fresh" and after["score"] == pytest.approx(20.0)
    assert after["extra"]["worker"]["started"] == 3 and not set(after["extra"]["worker"]) & {
        "fresh_process",
        "retried_after",
    }


def test_a_checkpoint_that_kills_its_worker_after_a_restart_ends_in_a_bounded_failure(tmp_path: Path) -> None:
    from autorl.grader.jobs import EvalFailed

    from .conftest import echo_answers, write_stub_checkpoint

    fine = write_stub_checkpoint(tmp_path / "fine", echo_answers(4))
    kill = write_stub_checkpoint(tmp_path / "kill", echo_answers(1), {"kill": True})
    slot = _slot(tmp_path)
    try:
        slot.run(as_snapshot(fine), "dev", "s0")
        with pytest.raises(EvalFailed, match="also on a fresh worker"):
            slot.run(as_snapshot(kill), "dev", "s1")
        # one restart (asked by the warm worker), one retry after the lost worker: no loop
        assert slot._workers_started == 3
        assert slot.run(as_snapshot(fine), "dev", "s2")["score"] == pytest.approx(20.0)
    finally:
        slot.close()
