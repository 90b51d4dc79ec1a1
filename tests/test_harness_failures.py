"""Harness failures are never the agent's: an evaluation that fails for the machine's reason (the GPU's memory
taken by another run, an engine that died) is retried, and recorded as an infrastructure failure when it still
fails; a run whose only failures are the harness's is an infrastructure failure, never "no scored submission".
The engine fails on demand (the scripted backend's ``AUTORL_SCRIPTED_FAULTS``), whatever the checkpoint."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from autorl.grader.core import Grader
from autorl.inference.failures import harness_cause, same_shape
from autorl.record.row import end_reason, infra_failure

from .conftest import cli, echo_answers, write_stub_checkpoint
from .grader_harness import make_config
from .test_run import agent_folder

NO_CACHE = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        (NO_CACHE, "KV cache"),
        (
            "AssertionError: Error in memory profiling. Initial free memory 30 GiB, current free memory 41 GiB.",
            "measured",
        ),
        (
            "ValueError: Free memory on device cuda:0 (2.1/79.2 GiB) on startup is less than desired GPU memory "
            "utilization (0.25, 19.8 GiB).",
            "free GPU memory",
        ),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "out of memory"),
        ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.", "died"),
        ("OSError: [Errno 28] No space left on device: '/tmp/x'", "disk"),
    ],
)
def test_machine_causes_are_named(text: str, cause: str) -> None:
    found = harness_cause(text)
    assert found is not None and cause in found


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: CUDA error: device-side assert triggered",  # token ids past the vocabulary: the checkpoint's
        "RuntimeError: Error(s) in loading state_dict: size mismatch for lm_head.weight",
        "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
        "ValueError: the scripted model refuses to load",
    ],
)
def test_what_a_checkpoint_causes_is_not_the_machines(text: str) -> None:
    assert harness_cause(text) is None


def test_a_memory_failure_is_the_machines_only_for_a_model_of_the_base_models_shape(tmp_path: Path) -> None:
    base = write_stub_checkpoint(tmp_path / "base")
    same = write_stub_checkpoint(tmp_path / "same")
    bigger = write_stub_checkpoint(tmp_path / "bigger")
    (bigger / "config.json").write_text(json.dumps({"model_type": "stub", "hidden_size": 99999}))
    assert same_shape(None, base) and same_shape(same, base)
    assert not same_shape(bigger, base) and not same_shape(same, None)


def _faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: int, error: str = NO_CACHE) -> Path:
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps({"fail": fail, "error": error, "match": "snapshots"}))
    monkeypatch.setenv("AUTORL_SCRIPTED_FAULTS", str(faults))
    return faults


def _submit_one(tmp_path: Path, checkpoint: Path, **overrides: Any) -> tuple[dict[str, Any], list[str]]:
    """A grader with a base model; submit ``checkpoint``; its store row and the slot's log lines."""
    base = write_stub_checkpoint(tmp_path / "base", echo_answers(2))
    grader = Grader(make_config(tmp_path, base_model=str(base), harness_backoff_s=0.2, **overrides))
    grader.start()
    try:
        assert grader.wait_baseline(60) is not None, grader.baseline_error
        shutil.copytree(checkpoint, grader.output_dir / "v1")
        sid = grader.submit(str(grader.output_dir / "v1"))
        end = time.monotonic() + 120
        while grader.status(sid) not in ("done", "failed"):
            assert time.monotonic() < end
            time.sleep(0.05)
        row = grader.store.get(sid)
        assert row is not None
        state = grader.state()
    finally:
        grader.stop()
    log = (tmp_path / "store" / "workers" / "slot0.log").read_text().splitlines()
    return {**row, "public": state["submissions"][0]}, log


def test_an_engine_that_fails_for_memory_is_retried_and_the_submission_scored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = _faults(tmp_path, monkeypatch, fail=2)
    row, log = _submit_one(tmp_path, write_stub_checkpoint(tmp_path / "ckpt", echo_answers(7)))
    assert row["status"] == "done" and row["score"] == pytest.approx(35.0)
    retries = row["record"]["extra"]["worker"]["harness_retries"]
    assert len(retries) == 2 and all("KV cache" in r for r in retries)
    assert json.loads(faults.read_text())["fail"] == 0
    assert sum("the harness failed" in line for line in log) == 2


def test_an_engine_that_keeps_failing_is_an_infrastructure_failure_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _faults(tmp_path, monkeypatch, fail=10)
    row, _ = _submit_one(tmp_path, write_stub_checkpoint(tmp_path / "ckpt", echo_answers(7)), harness_retries=1)
    assert row["status"] == "failed" and "tried 2 times" in row["error"]
    assert row["infra_failure"] and "KV cache" in row["infra_failure"]
    assert row["public"]["infra_failure"] == row["infra_failure"]  # the agent is told it was not its checkpoint


def test_a_checkpoint_that_fails_by_itself_is_the_agents_at_once(tmp_path: Path) -> None:
    row, log = _submit_one(tmp_path, write_stub_checkpoint(tmp_path / "ckpt", echo_answers(7), {"crash": True}))
    assert row["status"] == "failed" and "refuses to load" in row["error"]
    assert row["infra_failure"] is None and not any("the harness failed" in line for line in log)


def test_a_larger_model_running_out_of_memory_is_the_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _faults(tmp_path, monkeypatch, fail=10, error="torch.OutOfMemoryError: CUDA out of memory")
    bigger = write_stub_checkpoint(tmp_path / "ckpt", echo_answers(7))
    (bigger / "config.json").write_text(json.dumps({"model_type": "stub", "num_hidden_layers": 400}))
    row, _ = _submit_one(tmp_path, bigger)
    assert row["status"] == "failed" and row["infra_failure"] is None


def test_the_run_row_says_infrastructure_only_when_every_failure_was_the_harnesss() -> None:
    harness = {"status": "failed", "score": None, "infra_failure": "the GPU ran out of memory"}
    own = {"status": "failed", "score": None, "infra_failure": None}
    scored = {"status": "done", "score": 50.0}
    assert infra_failure([harness, harness], None) is not None
    assert infra_failure([harness, own], None) is None  # the agent's own failure counts against it
    assert infra_failure([], None) is None  # no submission: the agent's
    assert infra_failure([harness, scored], {"status": "done", "score": 40.0}) is None
    failed_test = {"status": "failed", "infra_failure": "the engine died", "error": "EngineDeadError"}
    assert "test evaluation" in (infra_failure([scored], failed_test) or "")
    outcome = {"timed_out": True, "exit_code": None, "reason": "timeout"}
    why = infra_failure([harness], None)
    assert end_reason(outcome, 0, None, why).startswith("infrastructure failure: ")
    assert end_reason(outcome, 0, None, None) == "no scored submission"


@pytest.mark.e2e
def test_an_exact_copy_of_the_base_scored_by_a_failing_engine_is_an_infrastructure_failure(
    tmp_path: Path, home: Path
) -> None:
    """The CPU shape of the GPU study's failure: every submission failed in the engine, and the record said "no
    scored submission", counted against the agent. Now: retried, then the run is an infrastructure failure."""
    base = write_stub_checkpoint(tmp_path / "base", echo_answers(3))
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps({"fail": 100, "error": NO_CACHE, "match": "snapshots"}))
    agent = agent_folder(
        tmp_path / "agents",
        "copier",
        """
        cp -r "$MODEL_PATH/." "$OUTPUT_DIR/copy"
        submit copy
    """,
    )
    proc = cli(
        "run",
        "--agent",
        str(agent),
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "60",
        "--backend",
        "scripted",
        "--no-audit",
        "--json",
        env={"AUTORL_HOME": str(home), "AUTORL_SCRIPTED_FAULTS": str(faults), "AUTORL_HARNESS_BACKOFF_S": "0.2"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = json.loads(proc.stdout)
    assert row["submissions"] == 1 and row["success"] is False
    assert row["end_reason"].startswith("infrastructure failure: ") and "KV cache" in row["infra_failure"]
