"""`autorl sweep` with real `autorl run`s: a 2x2 study through `local --slots 2`, one run through the `slurm`
executor (submitit's own local executor: the real submitit code path) and one through `ray` on a local
`ray.init(num_cpus=2)` cluster. Folder agents, `arith`, `autorl:tiny`, short timeouts and few items."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .conftest import cli

SUBMIT_COPY = textwrap.dedent("""\
    #!/usr/bin/env bash
    env > "$WORKSPACE/code/env.txt"
    cp -rL "$MODEL_PATH" "$OUTPUT_DIR/v1"
    curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Content-Type: application/json" \\
        -H "Authorization: Bearer $AUTORL_TOKEN" -d "{\\"model_path\\": \\"$OUTPUT_DIR/v1\\"}"
""")


def _agent(root: Path, name: str, script: str) -> str:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(json.dumps({"name": name, "start": "start.sh"}))
    (folder / "start.sh").write_text(script)
    return str(folder)


@pytest.fixture
def study_home(tmp_path: Path, shared_home: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ledger whose models/ is the session's (the tiny model is built once)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "models").symlink_to(shared_home / "models", target_is_directory=True)
    monkeypatch.setenv("AUTORL_HOME", str(home))
    monkeypatch.setenv("AUTORL_SWEEP_SCRATCH", str(tmp_path / "scratch"))
    return home


def _spec(tmp_path: Path, agents: list[str], seeds: list[int], name: str) -> dict[str, Any]:
    return {
        "name": name,
        "agent": agents,
        "task": "arith",
        "model": "autorl:tiny",
        "seed": seeds,
        "timeout": 60,
        "limit": 8,
        "audit": False,
    }


@pytest.mark.e2e
def test_two_by_two_through_local_slots(study_home: Path, tmp_path: Path) -> None:
    from scipy import stats

    agents = [
        _agent(tmp_path / "agents", "copier", SUBMIT_COPY),
        _agent(tmp_path / "agents", "idler", "#!/usr/bin/env bash\necho nothing\n"),
    ]
    spec = tmp_path / "two.json"
    spec.write_text(json.dumps(_spec(tmp_path, agents, [0, 1], "two")))
    proc = cli("sweep", "run", str(spec), "--slots", "2", "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    keys = study_home / "sweeps" / "two" / "keys"
    results = [json.loads(p.read_text()) for p in keys.glob("*/a1/result.json")]
    assert len(results) == 4 and not list(keys.glob("*/a2"))
    for r in results:  # the grader's store came back from the node's disk into the sweep folder
        assert Path(r["meta"]["store_dir"]).is_relative_to(keys) and Path(r["meta"]["store_dir"]).is_dir()
        sweep_id = json.loads((Path(r["meta"]["store_dir"]).parent / "payload.json").read_text())["sweep_id"]
        assert r["row"]["run_id"] == f"{r['row']['run_key']}-{sweep_id}-a1" and r["row"]["sweep"] == "two"
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_agent.setdefault(r["row"]["agent"], []).append(r["row"])
    assert {row["success"] for row in by_agent["copier"]} == {True}
    assert {row["success"] for row in by_agent["idler"]} == {False}
    for cell in report["cells"]:
        values = [row["improvement"] if row["improvement"] is not None else 0.0 for row in by_agent[cell["agent"]]]
        mean = sum(values) / 2
        sd = math.sqrt(sum((v - mean) ** 2 for v in values))
        half = float(stats.t.ppf(0.975, 1)) * sd / math.sqrt(2)
        assert cell["runs"] == 2 and cell["mean"] == pytest.approx(mean)
        assert cell["ci95"] == pytest.approx([mean - half, mean + half])
        assert cell["failures"] == sum(1 for row in by_agent[cell["agent"]] if row["improvement"] is None)
        assert cell["success_rate"] == (1.0 if cell["agent"] == "copier" else 0.0)
        assert {r["end_reason"] for r in cell["per_run"]} == {row["end_reason"] for row in by_agent[cell["agent"]]}
    (diff,) = report["comparisons"]
    assert diff["pairs"] == 2 and {diff["agent_a"], diff["agent_b"]} == {"copier", "idler"}
    # the ledger holds one row per key, with its run key
    rows = json.loads(cli("results", "--json", check=True).stdout)
    assert sorted(r["run_id"] for r in rows) == sorted(r["row"]["run_id"] for r in results)
    assert {r.get("run_key") for r in rows} == {r["row"]["run_key"] for r in results}


@pytest.mark.e2e
def test_one_run_through_slurm_via_submitits_local_executor(study_home: Path, tmp_path: Path) -> None:
    pytest.importorskip("submitit")
    from autorl.sweep import sweep

    agent = _agent(tmp_path / "agents", "copier", SUBMIT_COPY)
    report = sweep(
        _spec(tmp_path, [agent], [0], "slurm-study"),
        executor="slurm",
        executor_options={"cluster": "local", "time_margin_s": 600},
    )
    (cell,) = report["cells"]
    assert cell["runs"] == 1 and cell["success_rate"] == 1.0
    (attempt,) = (study_home / "sweeps" / "slurm-study" / "keys").glob("*/a1")
    job = json.loads((attempt / "job.json").read_text())
    assert job["executor"] == "slurm" and job["job_id"] and Path(job["folder"]).is_dir()


@pytest.mark.e2e
def test_one_run_through_ray_on_a_local_cluster(study_home: Path, tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    from autorl.sweep import sweep

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        agent = _agent(tmp_path / "agents", "copier", SUBMIT_COPY)
        report = sweep(_spec(tmp_path, [agent], [0], "ray-study"), executor="ray", executor_options={"shutdown": False})
    finally:
        ray.shutdown()
    (cell,) = report["cells"]
    assert cell["runs"] == 1 and cell["success_rate"] == 1.0
    (attempt,) = (study_home / "sweeps" / "ray-study" / "keys").glob("*/a1")
    assert json.loads((attempt / "job.json").read_text())["executor"] == "ray"
    result = json.loads((attempt / "result.json").read_text())
    env = (Path(result["row"]["workspace"]) / "code" / "env.txt").read_text()
    assert "RAY_" not in env  # the agent gets nothing of the cluster
