"""The ``slurm`` executor on a real single-node Slurm cluster (tests/slurm_cluster.py: munged, slurmctld and
slurmd of the distribution's packages): a study through submitit's job arrays, a job that ``scancel`` kills
mid-run retried, a refused array as a one-line error, and a real tiny ``autorl run``. Marked ``cluster``:
``nox -s cluster`` runs them; they skip where Slurm is not installed or the tests do not run as root."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import cli
from .slurm_cluster import missing, single_node_slurm
from .test_sweep import FAKE_RUN, _agents
from .test_sweep_e2e import SUBMIT_COPY, _agent, study_home  # noqa: F401 (a fixture)
from .test_sweep_e2e import _spec as _e2e_spec

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(missing() is not None, reason=str(missing()))]
pytest.importorskip("submitit")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A single-node cluster for this module's tests; the environment that points Slurm's commands at it."""
    with single_node_slurm(tmp_path_factory.mktemp("slurm")) as env:
        yield env


@pytest.fixture
def fake_study(slurm: dict[str, str], home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake `autorl run` of tests/test_sweep.py as the run program; Slurm's commands find this cluster."""
    for key, value in slurm.items():
        monkeypatch.setenv(key, value)
    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    monkeypatch.setenv("AUTORL_SWEEP_RUN_PROGRAM", f"{sys.executable} {script}")
    monkeypatch.setenv("FAKE_RUN_LOG", str(tmp_path / "fake_runs.jsonl"))
    monkeypatch.setenv("AUTORL_SWEEP_SCRATCH", str(tmp_path / "scratch"))
    return tmp_path / "fake_runs.jsonl"


def _spec(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    from .conftest import write_stub_checkpoint

    model = write_stub_checkpoint(tmp_path / "base-model")
    return {
        "name": "slurm-study",
        "agent": _agents(tmp_path / "agents", "a")[0],
        "task": "arith",
        "model": str(model),
        "seed": [0, 1],
        "timeout": 60,
        "limit": 4,
        "slurm": {"cpus_per_task": 1, "time_margin_s": 60},
        **extra,
    }


def _squeue(job_id: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True).stdout.strip()


def test_a_study_runs_as_a_slurm_job_array(fake_study: Path, home: Path, tmp_path: Path) -> None:
    from autorl.sweep import sweep

    report = sweep(_spec(tmp_path), executor="slurm", max_parallel=2)
    (cell,) = report["cells"]
    assert cell["runs"] == 2 and cell["values"] == pytest.approx([10.0, 12.0])  # the fake's 10 + 2 x seed
    keys = home / "sweeps" / "slurm-study" / "keys"
    jobs = [json.loads(p.read_text()) for p in keys.glob("*/a1/job.json")]
    assert len(jobs) == 2 and not list(keys.glob("*/a2"))
    # one array of two tasks: <array id>_0 and <array id>_1, ran by the cluster's node
    assert (
        sorted(j["job_id"].split("_")[1] for j in jobs) == ["0", "1"]
        and len({j["job_id"].split("_")[0] for j in jobs}) == 1
    )
    for node in keys.glob("*/a1/node.json"):
        assert json.loads(node.read_text())["pid"] != os.getpid()
    state = subprocess.run(["scontrol", "show", "job", jobs[0]["job_id"]], capture_output=True, text=True).stdout
    assert "JobState=COMPLETED" in state and "Partition=autorl" in state


def test_a_job_killed_by_scancel_is_retried(fake_study: Path, home: Path, tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    spec = tmp_path / "study.json"
    spec.write_text(json.dumps(_spec(tmp_path, seed=0)))
    coordinator = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from autorl.cli import main; main()",
            "sweep",
            "run",
            str(spec),
            "--executor",
            "slurm",
            "--json",
        ],
        env={**os.environ, "FAKE_RUN_HOLD": str(hold)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        keys = home / "sweeps" / "slurm-study" / "keys"
        deadline = time.time() + 120
        while time.time() < deadline and not list(keys.glob("*/a1/node.json")):
            time.sleep(0.2)
        (node,) = keys.glob("*/a1/node.json")
        job = json.loads((node.parent / "job.json").read_text())
        assert _squeue(job["job_id"]) == "RUNNING"
        subprocess.run(["scancel", job["job_id"]], check=True)
        deadline = time.time() + 120
        while time.time() < deadline and not list(keys.glob("*/a2")):
            time.sleep(0.2)
        hold.unlink()
        out, err = coordinator.communicate(timeout=180)
    finally:
        coordinator.kill()
    assert coordinator.returncode == 0, err
    report = json.loads(out)
    (cell,) = report["cells"]
    assert cell["runs"] == 1 and cell["per_run"][0]["attempts"] == 2
    first = json.loads((node.parent / "outcome.json").read_text())
    assert first["kind"] == "infra", first
    assert cell["per_run"][0]["infra_failures"] == [first["reason"]]
    second = json.loads((node.parent.parent / "a2" / "outcome.json").read_text())
    assert second["kind"] == "result" and second["success"] is True


def test_a_refused_array_is_a_one_line_error(fake_study: Path, home: Path, tmp_path: Path) -> None:
    spec = tmp_path / "study.json"
    spec.write_text(json.dumps(_spec(tmp_path, seed=0)))
    proc = cli("sweep", "run", str(spec), "--executor", "slurm", "--option", "partition=nowhere")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: slurm refused the job array: ") and proc.stderr.count("\n") == 1
    assert "partition" in proc.stderr.lower()


@pytest.fixture
def real_study(
    slurm: dict[str, str],
    study_home: Path,  # noqa: F811 (the fixture of test_sweep_e2e)
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    for key, value in slurm.items():
        monkeypatch.setenv(key, value)
    return study_home


def test_a_real_tiny_run_through_slurm(real_study: Path, tmp_path: Path) -> None:
    from autorl.sweep import sweep

    agent = _agent(tmp_path / "agents", "copier", SUBMIT_COPY)
    spec = {**_e2e_spec(tmp_path, [agent], [0], "real"), "slurm": {"cpus_per_task": 1, "time_margin_s": 600}}
    report = sweep(spec, executor="slurm")
    (cell,) = report["cells"]
    assert cell["runs"] == 1 and cell["success_rate"] == 1.0, report["cells"]


def test_a_job_killed_outright_is_seen_gone_without_an_accounting_database(
    fake_study: Path, home: Path, tmp_path: Path
) -> None:
    """SIGKILL to the job's worker (as a node lost): no result file, and this cluster's sacct knows
    nothing; the controller's word ends the attempt, which is retried."""
    hold = tmp_path / "hold"
    hold.touch()
    spec = tmp_path / "study.json"
    spec.write_text(json.dumps(_spec(tmp_path, seed=0)))
    coordinator = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from autorl.cli import main; main()",
            "sweep",
            "run",
            str(spec),
            "--executor",
            "slurm",
            "--json",
        ],
        env={**os.environ, "FAKE_RUN_HOLD": str(hold)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        keys = home / "sweeps" / "slurm-study" / "keys"
        deadline = time.time() + 120
        while time.time() < deadline and not list(keys.glob("*/a1/node.json")):
            time.sleep(0.2)
        (node,) = keys.glob("*/a1/node.json")
        job = json.loads((node.parent / "job.json").read_text())
        os.kill(json.loads(node.read_text())["pid"], signal.SIGKILL)  # the worker, as a lost node would
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
    assert first["kind"] == "infra" and first["reason"].startswith(f"slurm job {job['job_id']} ended "), first


#: submits, then the first attempt's agent waits (its workspace path names the attempt: <run_key>-<sweep>-a1)
SUBMIT_THEN_WAIT = SUBMIT_COPY + 'case "$WORKSPACE" in *-a1/*) sleep 120;; esac\n'


def test_a_real_run_stopped_by_scancel_is_retried(real_study: Path, tmp_path: Path) -> None:
    """Slurm's SIGTERM reaches the run itself, which starts its orderly finish; the cluster's KillWait (5 s)
    ends the job before the run is recorded, and the attempt is the infrastructure's failure, seen through the
    controller (this cluster has no accounting database), and retried."""
    agent = _agent(tmp_path / "agents", "waiter", SUBMIT_THEN_WAIT)
    spec = tmp_path / "study.json"
    spec.write_text(
        json.dumps(
            {**_e2e_spec(tmp_path, [agent], [0], "stopped"), "slurm": {"cpus_per_task": 1, "time_margin_s": 600}}
        )
    )
    coordinator = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from autorl.cli import main; main()",
            "sweep",
            "run",
            str(spec),
            "--executor",
            "slurm",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        keys = real_study / "sweeps" / "stopped" / "keys"
        deadline = time.time() + 300
        while time.time() < deadline and not any(
            "submission 1:" in p.read_text(errors="replace") for p in keys.glob("*/a1/run.log")
        ):
            time.sleep(0.5)
        (log,) = keys.glob("*/a1/run.log")
        job = json.loads((log.parent / "job.json").read_text())
        subprocess.run(["scancel", job["job_id"]], check=True)
        out, err = coordinator.communicate(timeout=400)
    finally:
        coordinator.kill()
    assert coordinator.returncode == 0, err
    first = json.loads((log.parent / "outcome.json").read_text())
    assert first["kind"] == "infra", first
    (cell,) = json.loads(out)["cells"]
    assert cell["runs"] == 1 and cell["per_run"][0]["attempts"] == 2 and cell["success_rate"] == 1.0
