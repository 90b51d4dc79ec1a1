"""Runs that share one GPU: engine starts taken in turn across processes, each grader's engine held to its run's
memory budget (the agent told the rest), and a ``runs_per_gpu`` that cannot fit refused with the arithmetic."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from autorl.errors import UsageError
from autorl.inference.gpu_share import (
    AGENT_BUDGET_ENV,
    GIB,
    GpuBudget,
    engine_start,
    gpu_turn,
    kv_bytes_per_token,
)
from autorl.resources import ResolvedModel
from autorl.runs.gpus import GpuAssignment
from autorl.runs.plan import Assets, resolve, share_gpu
from autorl.runs.spec import RunSpec

from .conftest import write_stub_checkpoint

#: Qwen2.5-1.5B's shapes: 28 layers, 2 KV heads of 128
QWEN_1_5B = {
    "model_type": "qwen2",
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "hidden_size": 1536,
    "torch_dtype": "bfloat16",
}
H100 = 81559 * 2**20


def _model(folder: Path, weights: int = 3_087_467_144) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(QWEN_1_5B))
    with (folder / "model.safetensors").open("wb") as f:
        f.truncate(weights)  # sparse: the size is what counts
    return folder


def test_engine_starts_on_one_gpu_take_turns_across_processes(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import json, sys, time
        from autorl.inference.gpu_share import engine_start
        with engine_start(["GPU-shared"]) as info:
            began = time.time()
            time.sleep(1.0)
        print(json.dumps({"began": began, "ended": time.time(), "wait_s": info["wait_s"]}))
    """)
    env = {"AUTORL_GPU_LOCK_DIR": str(tmp_path / "locks"), "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env) for _ in range(3)
    ]
    spans = sorted((json.loads(p.communicate(timeout=60)[0]) for p in procs), key=lambda s: s["began"])
    for earlier, later in itertools.pairwise(spans):
        assert later["began"] >= earlier["ended"] - 0.01  # never two engines starting at once


def test_an_engine_start_waits_for_its_gpus_turn_and_says_how_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorl_example_plugin.stub import ScriptedBackend

    monkeypatch.setenv("AUTORL_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-test")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import time
        from autorl.inference.gpu_share import engine_start
        with engine_start(["GPU-test"]):
            print("held", flush=True)
            time.sleep(1.5)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={"AUTORL_GPU_LOCK_DIR": str(tmp_path / "locks")},
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    backend = ScriptedBackend({})
    backend.gpu_turn = gpu_turn  # what the evaluation layer gives every backend
    assert backend.acquire(write_stub_checkpoint(tmp_path / "m")) == "fresh"
    holder.wait(30)
    turn = backend.last_start_lock
    assert turn is not None and turn["gpus"] == ["GPU-test"] and turn["wait_s"] > 0 and turn["what"] == "start"
    backend.release()


def test_without_a_gpu_nothing_is_locked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("AUTORL_GPU_LOCK_DIR", str(tmp_path / "locks"))
    with engine_start() as info:
        assert info["gpus"] == [] and info["wait_s"] == 0.0
    assert not (tmp_path / "locks").exists()


def test_a_planted_link_in_the_lock_folder_is_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTORL_GPU_LOCK_DIR", str(tmp_path / "locks"))
    (tmp_path / "locks").mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / "locks" / "gpu-GPU-x.lock").symlink_to(victim)
    with engine_start(["GPU-x"]) as info:
        assert "unlocked" in info  # the start goes on, unserialised, and says so
    assert victim.read_text() == "keep me"


def test_a_gpu_budget_is_its_share_less_the_engine_and_says_its_arithmetic(tmp_path: Path) -> None:
    model = _model(tmp_path / "qwen")
    assert kv_bytes_per_token(model) == 2 * 28 * 2 * 128 * 2
    three = GpuBudget.for_model(model, H100, 3)
    assert three.kv_cache_bytes == 65_536 * 28_672 and three.weights_bytes == 3_087_467_144
    assert three.agent_bytes == H100 // 3 - three.engine_bytes and three.agent_bytes > 16 * GIB
    three.check()
    options = three.engine_options()
    assert options["kv_cache_memory_bytes"] == three.kv_cache_bytes and options["sleep_when_idle"] is False
    assert 0.09 < options["gpu_memory_utilization"] < 0.11  # what the engine takes of the card, not a share of it
    # each agent needs 16 GiB: three fit an H100, four do not, and the refusal shows the sums
    GpuBudget.for_model(model, H100, 3, agent_min_bytes=16 * GIB).check()
    with pytest.raises(UsageError) as refused:
        GpuBudget.for_model(model, H100, 4, agent_min_bytes=16 * GIB).check()
    message = str(refused.value)
    assert message.startswith("runs_per_gpu = 4 cannot fit: 79.6 GiB / 4 runs = 19.9 GiB a run")
    assert "(it needs 16.0)" in message and "at most 3 such runs fit one GPU" in message
    with pytest.raises(UsageError, match="runs_per_gpu = 12 cannot fit"):
        GpuBudget.for_model(model, H100, 12).check()  # the engine alone is more than a twelfth


def _plan(backend: str, tmp_path: Path, **options: object) -> tuple[object, Assets]:
    spec = RunSpec.build("example", "arith", "m", 60.0, backend="hf", sandbox="none", backend_options=options)
    plan = resolve(spec, "arith", None, lambda _: None)
    gpus = GpuAssignment(("0",), ("0",), ("0",), explicit=True)
    assets = Assets(ResolvedModel("m", _model(tmp_path / "m"), "local"), None)  # type: ignore[arg-type]
    return replace(plan, backend=backend, gpus=gpus), assets


def test_a_run_sharing_its_gpu_holds_its_engine_to_its_share_and_tells_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTORL_RUNS_PER_GPU", "2")
    plan, assets = _plan("vllm", tmp_path)
    said: list[str] = []
    shared = share_gpu(plan, assets, said.append, total_bytes=H100)  # type: ignore[arg-type]
    budget = GpuBudget.for_model(assets.model.path, H100, 2)
    assert shared.backend_options == budget.engine_options()
    assert shared.gpus.agent_env() == {"CUDA_VISIBLE_DEVICES": "0", AGENT_BUDGET_ENV: str(budget.agent_bytes)}
    assert shared.gpu_budget is not None and shared.gpu_budget["runs_per_gpu"] == 2
    assert said == [f"GPU 0: {budget.arithmetic()}"]
    # what the operator set wins; the hf backend is not held to a KV budget
    own, assets = _plan("vllm", tmp_path / "own", gpu_memory_utilization=0.5)
    assert (
        share_gpu(own, assets, said.append, total_bytes=H100).backend_options[  # type: ignore[arg-type]
            "gpu_memory_utilization"
        ]
        == 0.5
    )
    hf, assets = _plan("hf", tmp_path / "hf")
    assert share_gpu(hf, assets, said.append, total_bytes=H100) is hf  # type: ignore[arg-type]
    monkeypatch.setenv("AUTORL_RUNS_PER_GPU", "40")
    with pytest.raises(UsageError, match="runs_per_gpu = 40 cannot fit"):
        share_gpu(plan, assets, said.append, total_bytes=H100)  # type: ignore[arg-type]
    monkeypatch.setenv("AUTORL_RUNS_PER_GPU", "two")
    with pytest.raises(UsageError, match="AUTORL_RUNS_PER_GPU must be a positive whole number"):
        share_gpu(plan, assets, said.append, total_bytes=H100)  # type: ignore[arg-type]


def test_the_local_executor_refuses_a_study_that_cannot_fit_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorl.sweep.local import LocalExecutor

    model = _model(tmp_path / "qwen")
    monkeypatch.setattr("autorl.inference.gpu_share.gpu_memory_bytes", lambda device: H100)
    cells = [{"backend": "vllm", "model": str(model), "gpus": 1}]
    LocalExecutor({"gpus": "0", "runs_per_gpu": 3, "agent_gpu_gb": 16}).check_cells(cells)
    with pytest.raises(UsageError, match=r"runs_per_gpu = 5 cannot fit.*at most 3 such runs"):
        LocalExecutor({"gpus": "0", "runs_per_gpu": 5, "agent_gpu_gb": 16}).check_cells(cells)
    with pytest.raises(UsageError, match="agent_gpu_gb must be"):
        LocalExecutor({"gpus": "0", "agent_gpu_gb": "lots"}).check_cells(cells)
    LocalExecutor({"gpus": "0", "runs_per_gpu": 5}).check_cells([{**cells[0], "backend": "hf"}])  # no KV budget


def test_a_lock_holder_that_dies_frees_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTORL_GPU_LOCK_DIR", str(tmp_path / "locks"))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import time
        from autorl.inference.gpu_share import engine_start
        with engine_start(["GPU-d"]):
            print("held", flush=True)
            time.sleep(600)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.kill()  # an engine start that crashed: the kernel drops its lock with its descriptors
    holder.wait(10)
    with engine_start(["GPU-d"]) as info:  # (a lock left held would hang here, until the test's timeout)
        assert info["gpus"] == ["GPU-d"]
