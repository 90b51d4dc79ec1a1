"""A study's disk, bounded and checked: the agents' quotas sized so that the runs that go at once fit, a disk too
small refused before the study starts with the arithmetic, and a run whose share is not free when it should
start is the machine's failure in words (retried), never ``OSError: [Errno 28]``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autorl.errors import UsageError
from autorl.sweep.disk import GIB, grader_share, plan_quota, room_for_run

WEIGHTS = 3 * GIB  # a 1.5B model in bf16


def test_each_run_gets_its_share_of_the_free_disk_as_its_quota() -> None:
    where = Path("/scratch")
    # alone on 200 GiB, a run keeps its own quota (8x the weights)
    assert plan_quota(200 * GIB, where, 1, WEIGHTS, 24 * GIB) == 24 * GIB
    # three at once on 64 GiB (the GPU machine's disk): 19.2 GiB each (a tenth is left), less the grader's 9.25
    three = plan_quota(64 * GIB, where, 3, WEIGHTS, 24 * GIB)
    assert three == int(64 * GIB * 0.9) // 3 - grader_share(WEIGHTS)
    assert 3 * (three + grader_share(WEIGHTS)) <= 0.9 * 64 * GIB
    with pytest.raises(UsageError) as refused:
        plan_quota(20 * GIB, where, 3, WEIGHTS, 24 * GIB)
    message = str(refused.value)
    assert message.startswith("the study does not fit its disk: /scratch has 20.0 GiB free, 6.0 GiB for each of 3")
    assert "9.2 GiB for the grader's copies" in message and "--max-parallel" in message
    with pytest.raises(UsageError, match="lower output_quota_gb"):
        plan_quota(64 * GIB, where, 3, WEIGHTS, 24 * GIB, asked=20 * GIB)


def test_a_run_without_its_share_free_says_so(tmp_path: Path) -> None:
    assert room_for_run([tmp_path], 1024) is None
    why = room_for_run([tmp_path / "not" / "yet"], 2**62)
    assert why is not None and why.startswith("not enough disk to start the run: ") and "tries it again" in why


def test_the_worker_refuses_to_start_a_run_the_disk_cannot_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorl.sweep.worker import run_attempt

    attempt = tmp_path / "keys" / "k" / "a1"
    attempt.mkdir(parents=True)
    monkeypatch.setenv("AUTORL_SWEEP_SCRATCH", str(tmp_path / "scratch"))
    (attempt / "payload.json").write_text(
        json.dumps(
            {
                "run_key": "k",
                "attempt": 1,
                "sweep": "s",
                "sweep_id": "x",
                "sweep_dir": str(tmp_path),
                "args": [],
                "options": {"task": "arith", "gpus": 0},
                "home": str(tmp_path / "home"),
                "gpus": None,
                "program": ["false"],
                "disk_need": 2**62,
            }
        )
    )
    outcome = run_attempt(attempt)
    assert outcome["kind"] == "infra" and outcome["reason"].startswith("not enough disk to start the run")


def test_a_study_too_large_for_its_disk_is_refused_before_it_starts(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorl.sweep.local import LocalExecutor

    monkeypatch.setattr("autorl.sweep.disk.shutil.disk_usage", lambda path: type("U", (), {"free": 5 * GIB})())
    cells = [{"model": str(tiny_model), "gpus": 0}] * 4
    executor = LocalExecutor({"slots": 2}, sweep_dir=tmp_path / "study")
    executor.check_cells(cells)  # two at once on 5 GiB: each gets 2.5 GiB less the grader's copies
    assert executor.output_quota is not None and executor.output_quota < 2.5 * GIB
    with pytest.raises(UsageError, match="does not fit its disk"):
        LocalExecutor({"slots": 2, "output_quota_gb": 4}, sweep_dir=tmp_path / "study").check_cells(cells)
