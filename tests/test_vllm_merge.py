"""The vllm backend's CPU-side logic: LoRA adapters merged into a full checkpoint in the base's own layout (so
a warm engine takes them by a reload), the engine key, the process mode. The GPU path is recorded in
bench/h200/warm_agreement.md."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autorl.inference.base import EngineRestart, shape_config
from autorl.inference.engine_key import keep_side_files, side_files_digest
from autorl.inference.vllm import VLLMBackend, engine_environment, link_tree
from autorl.inference.weights import merged_checkpoint

from .conftest import write_lora

torch = pytest.importorskip("torch")
pytest.importorskip("peft")


def _state(folder: Path) -> dict[str, object]:
    from transformers import AutoModelForCausalLM

    return dict(AutoModelForCausalLM.from_pretrained(str(folder)).state_dict())


def _hf_merged(adapter: Path, base: Path) -> dict[str, object]:
    from autorl.inference.hf import load_causal_lm

    model, _ = load_causal_lm(adapter, base, device="cpu", dtype="float32")
    return dict(model.state_dict())


def _equal(a: dict[str, object], b: dict[str, object]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # type: ignore[arg-type]


def test_a_merged_adapter_is_the_hf_backends_merge_in_the_bases_layout(tiny_model: Path, tmp_path: Path) -> None:
    adapter = write_lora(tiny_model, tmp_path / "adapter")
    merged = merged_checkpoint(adapter, tiny_model, tmp_path / "merged")
    assert _equal(_state(merged), _hf_merged(adapter, tiny_model))
    assert not _equal(_state(merged), _state(tiny_model))  # the adapter changed something
    # config and side files byte for byte, the same tensor names: a warm engine on the base reloads it
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if (tiny_model / name).is_file():
            assert (merged / name).read_bytes() == (tiny_model / name).read_bytes()
    assert VLLMBackend._engine_key(merged) == VLLMBackend._engine_key(tiny_model)
    from safetensors import safe_open

    def names(folder: Path) -> list[str]:
        with safe_open(str(folder / "model.safetensors"), framework="pt") as h:
            return sorted(h.keys())

    assert names(merged) == names(tiny_model)
    assert not (tmp_path / "merged.partial").exists()


def test_an_adapter_that_replaces_a_tied_module_is_saved_whole_not_in_the_bases_layout(
    tiny_model: Path, tmp_path: Path
) -> None:
    # modules_to_save unties lm_head from the embeddings: the base's one-tensor layout cannot hold it
    adapter = write_lora(tiny_model, tmp_path / "adapter", modules_to_save=["lm_head"])
    with torch.no_grad():
        from safetensors.torch import load_file, save_file

        weights = load_file(str(adapter / "adapter_model.safetensors"))
        for k in weights:
            if "lm_head" in k and "lora" not in k:
                weights[k] = weights[k] + 0.5
        save_file(weights, str(adapter / "adapter_model.safetensors"))
    merged = merged_checkpoint(adapter, tiny_model, tmp_path / "merged")
    expected = _hf_merged(adapter, tiny_model)
    got = _state(merged)
    assert torch.equal(got["lm_head.weight"], expected["lm_head.weight"])  # type: ignore[arg-type]
    assert not torch.equal(got["lm_head.weight"], got["model.embed_tokens.weight"])  # type: ignore[arg-type]


def test_an_adapters_own_tokenizer_goes_with_the_merge_and_changes_the_engine_key(
    tiny_model: Path, tmp_path: Path
) -> None:
    adapter = write_lora(tiny_model, tmp_path / "adapter")
    shutil.copy2(tiny_model / "tokenizer.json", adapter / "tokenizer.json")
    config = json.loads((tiny_model / "tokenizer_config.json").read_text())
    config["model_max_length"] = 77
    (adapter / "tokenizer_config.json").write_text(json.dumps(config))
    merged = merged_checkpoint(adapter, tiny_model, tmp_path / "merged")
    assert json.loads((merged / "tokenizer_config.json").read_text())["model_max_length"] == 77
    assert side_files_digest(merged) != side_files_digest(tiny_model)
    assert VLLMBackend._engine_key(merged) != VLLMBackend._engine_key(tiny_model)  # a fresh engine, not a reload


def test_a_linked_tokenizer_file_in_an_adapter_is_not_followed(tiny_model: Path, tmp_path: Path) -> None:
    adapter = write_lora(tiny_model, tmp_path / "adapter")
    secret = tmp_path / "secret.txt"
    secret.write_text("hidden answers")
    shutil.copy2(tiny_model / "tokenizer.json", adapter / "tokenizer.json")
    (adapter / "chat_template.jinja").symlink_to(secret)
    merged = merged_checkpoint(adapter, tiny_model, tmp_path / "merged")
    assert not (merged / "chat_template.jinja").exists()


def test_the_backend_merges_each_adapter_once_and_keeps_the_base_key(tiny_model: Path, tmp_path: Path) -> None:
    be = VLLMBackend({})
    be.scratch_dir = tmp_path / "scratch"
    be.scratch_dir.mkdir()
    adapter = write_lora(tiny_model, tmp_path / "adapter")
    assert be.weights(tiny_model, None) == tiny_model
    first = be.weights(adapter, tiny_model)
    assert first.parent == be.scratch_dir
    mtime = (first / "model.safetensors").stat().st_mtime_ns
    assert be.weights(adapter, tiny_model) == first and (first / "model.safetensors").stat().st_mtime_ns == mtime
    assert shape_config(first, with_dtype=True) == shape_config(tiny_model, with_dtype=True)
    from autorl.errors import InvalidCheckpointError

    with pytest.raises(InvalidCheckpointError):
        be.weights(adapter, None)


def test_without_a_scratch_folder_merges_go_to_a_temp_folder_removed_on_unload(
    tiny_model: Path, tmp_path: Path
) -> None:
    be = VLLMBackend({})
    merged = be.weights(write_lora(tiny_model, tmp_path / "adapter"), tiny_model)
    assert merged.is_dir()
    be.unload()
    assert not merged.exists()


def test_the_engine_runs_in_process_and_warm_by_default_and_so_one_engine_per_process() -> None:
    be = VLLMBackend({})
    assert be.in_process() and be.keeps_engine() and be.engine_per_process()
    assert engine_environment(True) == {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    child = VLLMBackend({"engine_in_process": False, "warm_engine": False})
    assert not child.in_process() and not child.keeps_engine() and not child.engine_per_process()
    assert engine_environment(False) == {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
    assert "lora" not in json.dumps(be.engine_kwargs(Path("/m")))


def test_a_second_engine_in_one_process_is_refused_with_a_restart(tmp_path: Path) -> None:
    from autorl.inference.base import Backend, Completion

    class Once(Backend):
        name = "once"

        def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
            pass

        def generate(self, requests: object) -> list[Completion]:
            return []

    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"n": str(d)}))
    be = Once({"process_per_engine": True})
    assert be.acquire(a) == "fresh" and be.acquire(a) == "reused"
    with pytest.raises(EngineRestart):
        be.acquire(b)  # no swap: a new engine, which this process may not start
    assert be.spent()
    assert Once({}).acquire(a) == "fresh"


def _saved_again(base: Path, target: Path) -> Path:
    """The base model loaded and saved by transformers, model and tokenizer, as a trainer's save does: the weights
    the same, the tokenizer files rewritten (other keys, nulls as empty strings, other formatting)."""
    from transformers import AutoModelForCausalLM

    from autorl.inference.loading import load_tokenizer

    AutoModelForCausalLM.from_pretrained(str(base)).save_pretrained(str(target))
    load_tokenizer(base).save_pretrained(str(target))
    return target


def test_a_checkpoint_a_trainer_saved_is_reloaded_into_the_running_engine(tiny_model: Path, tmp_path: Path) -> None:
    """The first submission of the GPU's main job started a fresh engine in a fresh process (41 s) although the
    warm-up had loaded one: the trainer's save rewrites the tokenizer's files, whose bytes made the engine key.
    The key now holds what the engine reads of them; the running engine takes the checkpoint by a reload."""
    saved = _saved_again(tiny_model, tmp_path / "saved")
    assert (saved / "tokenizer_config.json").read_bytes() != (tiny_model / "tokenizer_config.json").read_bytes()
    assert VLLMBackend._engine_key(saved) == VLLMBackend._engine_key(tiny_model)

    class Engine:  # the one piece of vllm that cannot run here: records what the backend asks of it
        def __init__(self) -> None:
            self.calls: list[str] = []

        def collective_rpc(self, name: str) -> None:
            self.calls.append(name)

        def reset_prefix_cache(self) -> bool:
            return True

    class Recorded(VLLMBackend):
        def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
            weights = self.weights(model_dir, base_model_dir)
            assert self.scratch_dir is not None
            link_tree(weights, self.scratch_dir / "engine-model")
            keep_side_files(weights, self.scratch_dir / "engine-tokenizer")
            self.llm, self._engine = Engine(), self._engine_key(weights)

    backend = Recorded({})
    backend.scratch_dir = tmp_path / "scratch"
    backend.scratch_dir.mkdir()
    assert backend.acquire(tiny_model) == "fresh"
    assert backend.acquire(saved) == "reloaded" and backend.llm.calls == ["reload_weights"]
    # saved again under another class name, with an unknown token: other keys, the same decoding (the GPU's case)
    renamed = _saved_again(tiny_model, tmp_path / "renamed")
    config = json.loads((renamed / "tokenizer_config.json").read_text())
    other = (
        "PreTrainedTokenizerFast" if config.get("tokenizer_class") != "PreTrainedTokenizerFast" else "Qwen2Tokenizer"
    )
    config.update(tokenizer_class=other, backend="tokenizers")
    (renamed / "tokenizer_config.json").write_text(json.dumps(config))
    assert VLLMBackend._engine_key(renamed) != VLLMBackend._engine_key(tiny_model)
    assert backend.acquire(renamed) == "reloaded"
    # a tokenizer that decodes otherwise is another engine, and the reason says which file
    other = _saved_again(tiny_model, tmp_path / "other")
    config = json.loads((other / "generation_config.json").read_text())
    config["eos_token_id"] = 7
    (other / "generation_config.json").write_text(json.dumps(config))
    with pytest.raises(EngineRestart, match=r"generation settings differ \(generation_config.json\)"):
        backend.acquire(other)
    assert backend.last_fresh_reason is not None and "generation_config.json" in backend.last_fresh_reason
