"""``autorl export mlflow``: recorded runs logged into a real local MLflow store (SQLite) and read back with MLflow's
own client. mlflow is an optional extra: ``nox -s exports`` installs it beside autorl and runs these tests (the
first export through the command line, as a user runs it; the others in this process, which imports mlflow once)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autorl.errors import UsageError
from autorl.export.mlflow import export_mlflow
from autorl.export.recorded import select

from .conftest import cli
from .recorded_run import RecordedRuns
from .test_export_eee import study_home

mlflow = pytest.importorskip("mlflow")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """One SQLite store for the module (making its tables takes seconds), each test in its own experiment."""
    folder = tmp_path_factory.mktemp("mlflow")
    return f"sqlite:///{folder / 'mlflow.db'}", folder


@pytest.fixture(autouse=True)
def in_store(store: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test in the store's folder: MLflow's client resolves ``./mlruns`` once per store and process."""
    monkeypatch.chdir(store[1])


def export(home: Path, target: str, store: tuple[str, Path], experiment: str) -> list[str]:
    # cwd: an sqlite store keeps artifacts in ./mlruns, as MLflow does for any client
    proc = cli(
        "export",
        "mlflow",
        target,
        "--tracking-uri",
        store[0],
        "--experiment",
        experiment,
        "--json",
        env={"AUTORL_HOME": str(home)},
        cwd=store[1],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return list(json.loads(proc.stdout))


def export_here(home: Path, target: str, store: tuple[str, Path], experiment: str) -> list[str]:
    return export_mlflow(select(target, home), store[0], experiment=experiment)


def test_a_run_is_one_mlflow_run_with_params_metrics_trajectory_and_artifacts(
    recorded_runs: RecordedRuns, store: tuple[str, Path], tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    [rid] = export(recorded_runs.home, recorded_runs.run_id, store, "one")
    client = MlflowClient(tracking_uri=store[0])
    run = client.get_run(rid)
    row = recorded_runs.result["row"]
    assert run.info.run_name == recorded_runs.run_id and run.info.status == "FINISHED"
    assert run.data.tags["autorl.run_id"] == recorded_runs.run_id
    params = run.data.params
    assert params["task"] == "echo" and params["agent"] == "hostile" and params["backend"] == "scripted"
    assert params["timeout_s"] == "60.0" and params["config_hash"] == row["config_hash"]
    metrics = run.data.metrics
    for key in ("baseline", "best_score", "improvement", "p_value", "dev_best", "dev_k", "submissions"):
        assert metrics[key] == pytest.approx(float(row[key])), key
    assert metrics["improvement_ci95_low"] == pytest.approx(row["improvement_ci95"][0])
    assert metrics["beat_baseline"] == float(row["beat_baseline"]) and "seed" not in metrics
    history = client.get_metric_history(rid, "dev_score")
    assert [(m.step, m.value) for m in history] == [
        (s["submission_id"], s["score"]) for s in recorded_runs.result["submissions"]
    ]
    assert {a.path for a in client.list_artifacts(rid)} == {"card.md", "trajectory.svg", "result.json"}
    card = Path(client.download_artifacts(rid, "card.md", str(tmp_path / "dl"))).read_text()
    assert recorded_runs.run_id in card and "hostile" in card
    svg = Path(client.download_artifacts(rid, "trajectory.svg", str(tmp_path / "dl"))).read_text()
    assert svg.startswith("<svg") and "<script" not in svg
    # again: the run is there already and is not logged twice
    assert export_here(recorded_runs.home, recorded_runs.run_id, store, "one") == [rid]
    experiment = client.get_experiment_by_name("one")
    assert len(client.search_runs([experiment.experiment_id])) == 1


def test_a_study_is_a_parent_run_with_a_child_per_run(
    recorded_runs: RecordedRuns, store: tuple[str, Path], tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    home = study_home(recorded_runs, tmp_path)
    ids = export_here(home, "s1", store, "study")
    client = MlflowClient(tracking_uri=store[0])
    experiment = client.get_experiment_by_name("study")
    everything = client.search_runs([experiment.experiment_id])
    parents = [r for r in everything if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1 and parents[0].info.run_name == "s1" and parents[0].data.params["runs"] == "2"
    children = {r.info.run_id: r for r in everything if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id}
    assert set(children) == set(ids) and {r.info.run_name for r in children.values()} == {"s1-k0", "s1-k1"}
    again = export_here(home, "s1", store, "study")
    assert again == ids and len(client.search_runs([experiment.experiment_id])) == 3


def test_a_store_that_cannot_be_opened_is_one_line(recorded_runs: RecordedRuns, tmp_path: Path) -> None:
    proc = cli(
        "export",
        "mlflow",
        recorded_runs.run_id,
        "--tracking-uri",
        "nosuchscheme://x",
        env=recorded_runs.env,
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: MLflow store nosuchscheme://x: ")
    # a server that does not answer fails at once (MLflow's own client would retry for minutes)
    from autorl.procs.group import free_port

    uri = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(UsageError, match=f"MLflow store {uri}: the server does not answer"):
        export_here(recorded_runs.home, recorded_runs.run_id, (uri, tmp_path), "x")
