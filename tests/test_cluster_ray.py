"""The ``ray`` executor on a real local Ray cluster started by ``ray start --head`` (its own ports and temporary
folder), reached by address as a remote cluster would be: a study, and a lost worker (the Ray worker process
running a task killed) retried. Marked ``cluster``: ``nox -s cluster`` runs them; they skip without ray."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autorl.procs.group import free_port

from .test_sweep import FAKE_RUN, _agents

pytestmark = pytest.mark.cluster
pytest.importorskip("ray")
START_S = 120.0
#: a token left in ~/.ray by another cluster would turn on token authentication for this one only
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """`ray start --head --block` in its own process group (stopped with it, never `ray stop`, which would stop
    every Ray of this user on the machine); its address once `ray status` answers."""
    ray = str(Path(sys.executable).with_name("ray"))
    port = free_port()
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # a short path: Ray's socket names have a length limit
    head = subprocess.Popen(
        [
            ray,
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--num-cpus=2",
            "--num-gpus=0",
            "--include-dashboard=false",
            f"--temp-dir={temp}",
            "--disable-usage-stats",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=ENV,
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.time() + START_S
        while time.time() < deadline:
            if head.poll() is not None:
                pytest.fail(f"ray start --head exited with {head.returncode}")
            status = subprocess.run([ray, "status", f"--address={address}"], capture_output=True, timeout=60, env=ENV)
            if status.returncode == 0:
                break
            time.sleep(1)
        else:
            pytest.fail("the Ray head never answered `ray status`")
        yield address
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()


@pytest.fixture
def fake_study(ray_address: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    # the cluster's workers have the raylet's environment: the fake's own variable comes in its command line
    monkeypatch.setenv(
        "AUTORL_SWEEP_RUN_PROGRAM", f"env FAKE_RUN_LOG={tmp_path / 'fake_runs.jsonl'} {sys.executable} {script}"
    )
    monkeypatch.setenv("FAKE_RUN_LOG", str(tmp_path / "fake_runs.jsonl"))
    monkeypatch.setenv("AUTORL_SWEEP_SCRATCH", str(tmp_path / "scratch"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    return tmp_path / "fake_runs.jsonl"


def _spec(tmp_path: Path, address: str, **extra: Any) -> dict[str, Any]:
    from .conftest import write_stub_checkpoint

    model = write_stub_checkpoint(tmp_path / "base-model")
    return {
        "name": "ray-study",
        "agent": _agents(tmp_path / "agents", "a")[0],
        "task": "arith",
        "model": str(model),
        "seed": [0, 1],
        "timeout": 60,
        "limit": 4,
        "ray": {"address": address},
        **extra,
    }


def test_a_study_runs_on_a_ray_cluster_started_by_ray_start(
    fake_study: Path, ray_address: str, home: Path, tmp_path: Path
) -> None:
    from autorl.sweep import sweep

    report = sweep(_spec(tmp_path, ray_address), executor="ray")
    (cell,) = report["cells"]
    assert cell["runs"] == 2 and sorted(cell["values"]) == pytest.approx([10.0, 12.0])
    keys = home / "sweeps" / "ray-study" / "keys"
    assert not list(keys.glob("*/a2"))
    for folder in keys.glob("*/a1"):
        job = json.loads((folder / "job.json").read_text())
        assert job["executor"] == "ray" and job["address"] == ray_address and job["task"]
        assert json.loads((folder / "node.json").read_text())["pid"] != os.getpid()  # a Ray worker ran it
    for run in (json.loads(line) for line in fake_study.read_text().splitlines()):
        # the coordinator's AUTORL_SWEEP_SCRATCH reached the task: the run's home is on that scratch disk
        assert Path(run["home"]).is_relative_to(tmp_path / "scratch")


def test_a_lost_ray_worker_is_retried(fake_study: Path, ray_address: str, home: Path, tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    spec = tmp_path / "study.json"
    spec.write_text(json.dumps(_spec(tmp_path, ray_address, seed=0)))
    coordinator = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from autorl.cli import main; main()",
            "sweep",
            "run",
            str(spec),
            "--executor",
            "ray",
            "--json",
        ],
        env={
            **os.environ,
            "AUTORL_SWEEP_RUN_PROGRAM":  # held until let go
            f"env FAKE_RUN_HOLD={hold} {os.environ['AUTORL_SWEEP_RUN_PROGRAM']}",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        keys = home / "sweeps" / "ray-study" / "keys"
        deadline = time.time() + 120
        while time.time() < deadline and not list(keys.glob("*/a1/node.json")):
            time.sleep(0.2)
        (node,) = keys.glob("*/a1/node.json")
        worker = json.loads(node.read_text())["pid"]
        os.kill(worker, signal.SIGKILL)
        deadline = time.time() + 120
        while time.time() < deadline and not list(keys.glob("*/a2")):
            time.sleep(0.2)
        hold.unlink()
        out, err = coordinator.communicate(timeout=180)
    finally:
        coordinator.kill()
    assert coordinator.returncode == 0, err
    (cell,) = json.loads(out)["cells"]
    assert cell["runs"] == 1 and cell["per_run"][0]["attempts"] == 2
    first = json.loads((node.parent / "outcome.json").read_text())
    assert first["kind"] == "infra" and first["reason"].startswith("ray task failed: "), first
    assert cell["per_run"][0]["infra_failures"] == [first["reason"]]
