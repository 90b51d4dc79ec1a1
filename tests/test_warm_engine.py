"""A grader slot's warm worker: the engine kept between submissions scores exactly as a fresh process does,
and a worker that dies, hangs or answers for another job is replaced without losing the submission."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from autorl.grader.config import GraderConfig
from autorl.grader.jobs import EvalFailed, EvalSlot

from .conftest import as_snapshot, echo_answers, write_lora, write_stub_checkpoint


def _trained(base: Path, target: Path) -> Path:
    """The base model with every weight moved (a stand-in for a trained checkpoint), same config and files."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(base, target)
    weights = load_file(str(base / "model.safetensors"))
    gen = torch.Generator().manual_seed(1)
    moved = {k: v + 0.05 * torch.randn(v.shape, generator=gen, dtype=v.dtype) for k, v in weights.items()}
    save_file(moved, str(target / "model.safetensors"), metadata={"format": "pt"})
    return target


def _other_shape(base: Path, target: Path) -> Path:
    """The tiny model's recipe (its tokenizer and layout) with another hidden size."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(base))
    config.hidden_size, config.intermediate_size = 64, 192
    torch.manual_seed(3)
    AutoModelForCausalLM.from_config(config).save_pretrained(str(target), safe_serialization=True)
    for f in base.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "vocab", "merges")):
            shutil.copy2(f, target / f.name)
    return target


def _config(tmp_path: Path, **kw: Any) -> GraderConfig:
    values: dict[str, Any] = {
        "task": "arith",
        "workspace": str(tmp_path),
        "output_dir": str(tmp_path),
        "store_dir": str(tmp_path / "store"),
        "hidden_dir": str(tmp_path / "hidden"),
        "backend": "hf",
        "backend_options": {"device": "cpu"},
        "eval_timeout": 600.0,
        "limit": 40,
    }
    values.update(kw)
    return GraderConfig(**values)


def _outputs(record: dict[str, Any]) -> dict[str, list[str]]:
    lines = Path(record["per_item_path"]).read_text().splitlines()
    return {r["id"]: r["completions"] for r in map(json.loads, lines)}


def test_one_warm_worker_scores_a_sequence_exactly_as_fresh_processes(
    tiny_model: Path, tmp_path: Path, home: Path
) -> None:
    models = tmp_path / "models"
    models.mkdir()
    sequence = [
        tiny_model,
        _trained(tiny_model, models / "trained"),
        write_lora(tiny_model, models / "lora"),
        tiny_model,
        _other_shape(tiny_model, models / "wide"),
    ]
    hidden = str(tmp_path / "hidden")  # one draw of the hidden items for every slot
    config = _config(tmp_path / "warm", base_model=str(tiny_model), hidden_dir=hidden)
    slot = EvalSlot(config, Path(config.store_dir))
    try:
        warm = [slot.run(as_snapshot(m), "dev", f"w{k}") for k, m in enumerate(sequence)]
    finally:
        slot.close()
    assert [r["engine"] for r in warm] == ["fresh", "reloaded", "reloaded", "reloaded", "fresh"]
    assert len({r["extra"]["worker"]["pid"] for r in warm}) == 1
    fresh = []
    for k, m in enumerate(sequence):
        cfg = _config(tmp_path / f"fresh{k}", base_model=str(tiny_model), hidden_dir=hidden)
        one = EvalSlot(cfg, Path(cfg.store_dir))
        try:
            fresh.append(one.run(as_snapshot(m), "dev", f"f{k}"))
        finally:
            one.close()
    for w, f in zip(warm, fresh, strict=True):
        assert f["engine"] == "fresh"
        assert _outputs(w) == _outputs(f)
        assert w["score"] == f["score"] and w["config_hash"] == f["config_hash"]
        assert w["load_s"] >= 0 and w["generate_s"] > 0
    # the sequence is not vacuous: each model answers differently from the one before it
    for a, b in itertools.pairwise(warm):
        assert _outputs(a) != _outputs(b)


def test_backend_caches_are_dropped_on_every_acquire(tiny_model: Path, tmp_path: Path) -> None:
    from autorl.inference.base import GenerationRequest
    from autorl.inference.hf import HFBackend

    be = HFBackend({"device": "cpu", "decode": "compact"})
    assert be.acquire(tiny_model) == "fresh"
    be.generate([GenerationRequest("What is 12+30?", max_new_tokens=4, stop=("\n",))])
    assert "_stop_cache" in be.__dict__  # a mask derived from the tokenizer
    trained = _trained(tiny_model, tmp_path / "t")
    assert be.acquire(trained) == "reloaded"
    assert "_stop_cache" not in be.__dict__
    assert be.acquire(trained) == "reused"
    be.release()
    assert be.model is None


def test_a_backend_that_keeps_no_engine_loads_afresh_and_frees_it_when_idle(tmp_path: Path) -> None:
    from autorl.inference.base import Backend, Completion

    class Counting(Backend):
        name = "counting"

        def __init__(self) -> None:
            super().__init__()
            self.loads = self.unloads = 0

        def keeps_engine(self) -> bool:
            return False

        def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
            self.loads += 1

        def unload(self) -> None:
            self.unloads += 1

        def generate(self, requests: Any) -> list[Completion]:
            return []

    model = write_stub_checkpoint(tmp_path / "m")
    be = Counting()
    assert [be.acquire(model), be.acquire(model)] == ["fresh", "fresh"]
    assert (be.loads, be.unloads) == (2, 1)
    be.idle()
    assert be.unloads == 2 and be.acquire(model) == "fresh"


def test_a_worker_killed_mid_evaluation_is_replaced_and_the_submission_still_scores(tmp_path: Path) -> None:
    ckpt = write_stub_checkpoint(tmp_path / "slow", echo_answers(7), {"sleep": 3})
    config = _config(tmp_path, task="echo", backend="scripted", backend_options={}, limit=None)
    slot = EvalSlot(config, Path(config.store_dir))
    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.update(slot.run(as_snapshot(ckpt), "dev", "sub1")))
    t.start()
    try:
        end = time.monotonic() + 60
        while slot.worker_pid is None and time.monotonic() < end:
            time.sleep(0.05)
        first = slot.worker_pid
        assert first is not None
        time.sleep(1.0)
        os.kill(first, signal.SIGKILL)
        t.join(120)
        assert out["score"] == pytest.approx(35.0)
        assert "SIGKILL" in out["extra"]["worker"]["retried_after"]
        assert out["extra"]["worker"]["pid"] != first
    finally:
        slot.close()
        t.join(10)


def test_a_worker_that_dies_while_idle_says_why_in_the_next_record_and_the_log(tmp_path: Path) -> None:
    fine = write_stub_checkpoint(tmp_path / "fine", echo_answers(4))
    config = _config(tmp_path, task="echo", backend="scripted", backend_options={}, limit=None)
    slot = EvalSlot(config, Path(config.store_dir))
    try:
        first = slot.run(as_snapshot(fine), "dev", "sub1")
        pid = first["extra"]["worker"]["pid"]
        os.kill(pid, signal.SIGKILL)
        end = time.monotonic() + 30
        # dead and reapable, as between two submissions (a killed process shows as a zombie before its threads
        # are gone, and cannot be reaped until they are): WNOWAIT leaves the reaping to the slot
        while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None and time.monotonic() < end:
            time.sleep(0.05)
        second = slot.run(as_snapshot(fine), "dev", "sub2")
        third = slot.run(as_snapshot(fine), "dev", "sub3")
    finally:
        slot.close()
    assert "replaced_after" not in first["extra"]["worker"]
    assert "killed by SIGKILL" in second["extra"]["worker"]["replaced_after"]
    assert second["extra"]["worker"]["pid"] != pid and second["score"] == pytest.approx(first["score"])
    assert "replaced_after" not in third["extra"]["worker"]  # said once, with the job that found it dead
    log = (Path(config.store_dir) / "workers" / "slot0.log").read_text()
    assert "killed by SIGKILL" in log and "while idle" in log


def test_a_hung_worker_is_killed_at_the_timeout_and_retried_once(tmp_path: Path) -> None:
    ckpt = write_stub_checkpoint(tmp_path / "hang", echo_answers(1), {"hang": True})
    config = _config(tmp_path, task="echo", backend="scripted", backend_options={}, limit=None, eval_timeout=3.0)
    slot = EvalSlot(config, Path(config.store_dir))
    pids: set[int] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if slot.worker_pid:
                pids.add(slot.worker_pid)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    try:
        with pytest.raises(EvalFailed, match=r"timed out after 3 s.*also on a fresh worker"):
            slot.run(as_snapshot(ckpt), "dev", "sub1")
        took = time.monotonic() - started
    finally:
        stop.set()
        watcher.join()
        slot.close()
    assert 6 <= took < 40
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_failed_job_fails_at_once_and_the_next_one_gets_a_fresh_worker(tmp_path: Path) -> None:
    crash = write_stub_checkpoint(tmp_path / "crash", echo_answers(1), {"crash": True})
    fine = write_stub_checkpoint(tmp_path / "fine", echo_answers(4))
    config = _config(tmp_path, task="echo", backend="scripted", backend_options={}, limit=None)
    slot = EvalSlot(config, Path(config.store_dir))
    try:
        with pytest.raises(EvalFailed, match="refuses to load"):
            slot.run(as_snapshot(crash), "dev", "sub1")
        record = slot.run(as_snapshot(fine), "dev", "sub2")
        again = slot.run(as_snapshot(fine), "dev", "sub3")
    finally:
        slot.close()
    assert record["score"] == pytest.approx(20.0) and record["engine"] == "fresh"
    assert record["extra"]["worker"]["started"] == 2 and "retried_after" not in record["extra"]["worker"]
    assert again["engine"] == "reused" and again["extra"]["worker"]["pid"] == record["extra"]["worker"]["pid"]
    assert (Path(config.store_dir) / "logs" / "sub1-dev.log").read_text().count("refuses to load") >= 1


_IMPOSTOR = """\
import json, os, struct, sys
r, w = int(sys.argv[-2]), int(sys.argv[-1])
head = os.read(r, 4)
job = json.loads(os.read(r, struct.unpack(">I", head)[0]))
body = json.dumps({"nonce": "not-" + job["nonce"], "ok": True, "record": {"score": 100.0}}).encode()
os.write(w, struct.pack(">I", len(body)) + body)
os.read(r, 1)
"""


def test_an_answer_for_another_job_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "impostor.py"
    script.write_text(_IMPOSTOR)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    python.chmod(0o755)
    ckpt = write_stub_checkpoint(tmp_path / "m", echo_answers(1))
    config = _config(tmp_path, task="echo", backend="scripted", backend_options={}, limit=None, python=str(python))
    slot = EvalSlot(config, Path(config.store_dir))
    try:
        with pytest.raises(EvalFailed, match="answered another job"):
            slot.run(as_snapshot(ckpt), "dev", "sub1")
    finally:
        slot.close()


def test_one_engine_per_process_a_new_engine_runs_in_a_fresh_worker_not_counted_as_a_failure(
    tmp_path: Path,
) -> None:
    # a backend whose library keeps memory after an unload (vllm in-process) starts one engine per process
    first = write_stub_checkpoint(tmp_path / "a", echo_answers(7))
    second = write_stub_checkpoint(tmp_path / "b", echo_answers(3))
    config = _config(
        tmp_path, task="echo", backend="scripted", backend_options={"process_per_engine": True}, limit=None
    )
    slot = EvalSlot(config, Path(config.store_dir))
    try:
        records = [
            slot.run(as_snapshot(m), "dev", f"s{k}") for k, m in enumerate([first, first, second, second, first])
        ]
    finally:
        slot.close()
    assert [r["engine"] for r in records] == ["fresh", "reused", "fresh", "reused", "fresh"]
    assert [r["score"] for r in records] == [35.0, 35.0, 15.0, 15.0, 35.0]
    pids = [r["extra"]["worker"]["pid"] for r in records]
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]
    assert [bool(r["extra"]["worker"].get("fresh_process")) for r in records] == [False, False, True, False, True]
    assert not any("retried_after" in r["extra"]["worker"] for r in records)  # a restart is not a lost worker


def test_one_engine_per_process_without_a_warm_engine_each_job_gets_its_own_worker(tmp_path: Path) -> None:
    model = write_stub_checkpoint(tmp_path / "a", echo_answers(7))
    options = {"process_per_engine": True, "warm_engine": False}
    config = _config(tmp_path, task="echo", backend="scripted", backend_options=options, limit=None)
    slot = EvalSlot(config, Path(config.store_dir))
    try:
        records = [slot.run(as_snapshot(model), "dev", f"s{k}") for k in range(3)]
    finally:
        slot.close()
    assert [r["engine"] for r in records] == ["fresh"] * 3 and {r["score"] for r in records} == {35.0}
    assert len({r["extra"]["worker"]["pid"] for r in records}) == 3
    # the worker ended by itself after each answer: no restart asked, nothing retried
    assert not any(set(r["extra"]["worker"]) & {"fresh_process", "retried_after"} for r in records)
    assert [r["extra"]["worker"]["started"] for r in records] == [1, 2, 3]


def test_one_engine_per_process_scores_a_sequence_as_one_warm_worker_does(
    tiny_model: Path, tmp_path: Path, home: Path
) -> None:
    models = tmp_path / "models"
    models.mkdir()
    sequence = [
        tiny_model,
        _trained(tiny_model, models / "trained"),
        _other_shape(tiny_model, models / "wide"),
        tiny_model,
    ]
    hidden = str(tmp_path / "hidden")
    runs = {}
    for name, options in (("warm", {"device": "cpu"}), ("per_process", {"device": "cpu", "process_per_engine": True})):
        config = _config(tmp_path / name, base_model=str(tiny_model), hidden_dir=hidden, backend_options=options)
        slot = EvalSlot(config, Path(config.store_dir))
        try:
            runs[name] = [slot.run(as_snapshot(m), "dev", f"{name}{k}") for k, m in enumerate(sequence)]
        finally:
            slot.close()
    assert [r["engine"] for r in runs["per_process"]] == ["fresh", "reloaded", "fresh", "fresh"]
    for a, b in zip(runs["warm"], runs["per_process"], strict=True):
        assert _outputs(a) == _outputs(b) and a["score"] == b["score"]
    assert _outputs(runs["per_process"][0]) != _outputs(runs["per_process"][2])
