"""The grader warms its evaluation engine up when it starts: the first submission finds the base model's engine
loaded (reused, swapped or woken), whether the baseline was scored now or read from the cache; a warm-up that
fails or never ends costs the run nothing but itself, and a submission racing it is scored as any other."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from autorl.grader.core import Grader
from autorl.grader.jobs import EvalSlot
from autorl.grader.records import how_evaluated

from .conftest import echo_answers, write_stub_checkpoint
from .grader_harness import make_config
from .test_warm_engine import _trained


def _wait(grader: Grader, sid: int, timeout: float = 120) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while grader.status(sid) not in ("done", "failed"):
        assert time.monotonic() < end, f"submission {sid} still {grader.status(sid)}"
        time.sleep(0.05)
    sub = grader.store.get(sid)
    assert sub is not None
    return sub


def _first_submission(tmp_path: Path, checkpoint: Path, **overrides: Any) -> dict[str, Any]:
    """A grader on a fresh store: wait for its baseline, submit ``checkpoint`` at once, return its store row."""
    grader = Grader(make_config(tmp_path, **overrides))
    grader.start()
    try:
        if grader.config.evaluate_baseline:  # without one, the submission goes at once (racing the warm-up)
            assert grader.wait_baseline(120) is not None, grader.baseline_error
        shutil.copytree(checkpoint, grader.output_dir / "v1")
        sid = grader.submit(str(grader.output_dir / "v1"))
        return _wait(grader, sid)
    finally:
        grader.stop()


def test_after_a_cached_baseline_the_first_submission_finds_the_engine_warm(tiny_model: Path, tmp_path: Path) -> None:
    trained = _trained(tiny_model, tmp_path / "trained")
    common: dict[str, Any] = {
        "task": "arith",
        "backend": "hf",
        "base_model": str(tiny_model),
        "limit": 12,
        "hidden_dir": str(tmp_path / "hidden"),
        "baseline_cache_dir": str(tmp_path / "cache"),
        "backend_options": {"device": "cpu", "sleep_when_idle": True},
        "eval_timeout": 300.0,
    }
    scored_now = _first_submission(tmp_path / "now", trained, **common)
    cold = _first_submission(tmp_path / "cold", trained, **common, warm_up=False)
    warm = _first_submission(tmp_path / "warm", trained, **common)
    now_rec, cold_rec, warm_rec = (s["record"] for s in (scored_now, cold, warm))
    # the baseline scored now left its engine loaded: nothing to warm up, the submission swaps its weights in
    assert now_rec["engine"] == "reloaded"
    assert "already" in now_rec["extra"]["worker"]["warm_up"]["skipped"]
    # a cached baseline loads no engine: without a warm-up the first submission starts one ...
    assert cold_rec["extra"].get("cached") is None and cold_rec["engine"] == "fresh"
    assert "warm_up" not in cold_rec["extra"]["worker"]
    # ... with one, it finds the engine loaded and asleep, wakes it and swaps its weights in
    assert warm_rec["engine"] == "reloaded" and how_evaluated(warm_rec)["wake_s"] is not None
    warmed = warm_rec["extra"]["worker"]["warm_up"]
    assert warmed["engine"] == "fresh" and warmed["load_s"] > 0 and warmed["sleep_s"] is not None
    # the same score and the same outputs as an engine started for it
    assert {warm["score"], scored_now["score"]} == {cold["score"]}
    assert warm_rec["config_hash"] == cold_rec["config_hash"]
    items = [tmp_path / name / "store" / "items" / "sub1-dev.jsonl" for name in ("cold", "warm")]
    assert items[0].read_text() == items[1].read_text()
    log = (tmp_path / "warm" / "store" / "workers" / "slot0.log").read_text()
    assert "warm-up: engine fresh" in log


def test_the_warm_up_s_engine_takes_a_trainer_saved_first_submission_in_the_same_process(
    tiny_model: Path, tmp_path: Path
) -> None:
    """A backend of one engine per process (as vllm's in-process engine): the first submission, saved as a trainer
    saves (its tokenizer files written again), is reloaded into the engine the warm-up started, in that same
    worker process: no fresh engine, no fresh process."""
    from transformers import AutoModelForCausalLM

    from autorl.inference.loading import load_tokenizer

    trained = _trained(tiny_model, tmp_path / "trained")
    saved = tmp_path / "saved"
    AutoModelForCausalLM.from_pretrained(str(trained)).save_pretrained(str(saved))
    load_tokenizer(trained).save_pretrained(str(saved))
    common: dict[str, Any] = {
        "task": "arith",
        "backend": "hf",
        "base_model": str(tiny_model),
        "limit": 12,
        "hidden_dir": str(tmp_path / "hidden"),
        "baseline_cache_dir": str(tmp_path / "cache"),
        "backend_options": {"device": "cpu", "process_per_engine": True},
        "eval_timeout": 300.0,
    }
    _first_submission(tmp_path / "now", saved, **common)  # scores the baseline into the cache
    first = _first_submission(tmp_path / "warm", saved, **common)["record"]
    worker = first["extra"]["worker"]
    assert first["engine"] == "reloaded" and worker["started"] == 1 and "fresh_process" not in worker
    assert worker["warm_up"]["engine"] == "fresh" and "fresh_because" not in first["extra"]


def test_a_submission_racing_the_warm_up_waits_for_it_and_is_scored_as_its_own(tmp_path: Path) -> None:
    # the base model takes 3 s to load and answers 5 items; the submission answers 12
    base = write_stub_checkpoint(tmp_path / "base", echo_answers(5), {"sleep": 3})
    mine = write_stub_checkpoint(tmp_path / "mine", echo_answers(12))
    sub = _first_submission(tmp_path / "g", mine, base_model=str(base), evaluate_baseline=False)
    record = sub["record"]
    warmed = record["extra"]["worker"]["warm_up"]
    assert sub["status"] == "done" and sub["score"] == pytest.approx(60.0)
    assert warmed["engine"] == "fresh" and warmed["load_s"] >= 3
    # sent while the warm-up ran, evaluated after it, in the same worker (nothing replaced, nothing retried)
    assert sub["created_at"] < warmed["finished_at"] <= sub["started_at"]
    assert record["extra"]["worker"]["started"] == 1 and "retried_after" not in record["extra"]["worker"]


@pytest.mark.parametrize(
    ("behaviour", "reason"), [({"crash": True}, "refuses to load"), ({"hang": True}, "warm-up timed out after 2 s")]
)
def test_a_warm_up_that_fails_or_never_ends_leaves_the_first_submission_to_load_as_before(
    tmp_path: Path, behaviour: dict[str, Any], reason: str
) -> None:
    base = write_stub_checkpoint(tmp_path / "base", echo_answers(5), behaviour)
    mine = write_stub_checkpoint(tmp_path / "mine", echo_answers(9))
    sub = _first_submission(tmp_path / "g", mine, base_model=str(base), evaluate_baseline=False, warmup_timeout=2.0)
    record = sub["record"]
    worker = record["extra"]["worker"]
    assert sub["status"] == "done" and sub["score"] == pytest.approx(45.0) and record["engine"] == "fresh"
    assert reason in worker["warm_up"]["error"] and worker["started"] == 2
    assert "retried_after" not in worker  # the warm-up's failure is not counted against the submission
    log = (tmp_path / "g" / "store" / "workers" / "slot0.log").read_text()
    assert "warm-up failed" in log and reason in log


def test_no_warm_up_for_a_backend_that_keeps_no_engine_or_a_closed_run(tmp_path: Path) -> None:
    base = write_stub_checkpoint(tmp_path / "base", echo_answers(5))
    config = make_config(tmp_path / "a", base_model=str(base), backend_options={"warm_engine": False})
    slot = EvalSlot(config, Path(config.store_dir))
    try:
        assert "keeps no engine" in slot.warm_up()["skipped"]
    finally:
        slot.close()
    grader = Grader(make_config(tmp_path / "b", base_model=str(base), evaluate_baseline=False))
    grader.close()
    grader.start()
    try:
        time.sleep(1.0)
        assert grader._slots[0].worker_pid is None  # a closed run starts no engine
    finally:
        grader.stop()
    assert not os.path.exists(tmp_path / "b" / "store" / "workers" / "slot0.log")
