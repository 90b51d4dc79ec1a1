"""bench/h200/study.sh in its CPU mode (STUDY_CPU=1): the phases the GPU machine runs, on autorl:tiny with the hf
backend and one seed, and the summary they add up to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.e2e
def test_the_study_script_runs_its_phases_and_summarises_them(
    tmp_path: Path, shared_home: Path, tiny_model: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "models").symlink_to(shared_home / "models", target_is_directory=True)
    out = tmp_path / "out"
    env = {
        **os.environ,
        "STUDY_CPU": "1",
        "STUDY_SEEDS": "0",
        "STUDY_PYTHON": sys.executable,
        "AUTORL_HOME": str(home),
        "AUTORL_SWEEP_SCRATCH": str(tmp_path / "scratch"),
    }
    for phase in ("study", "first", "gsm-hf", "summary"):
        proc = subprocess.run(
            ["bash", str(ROOT / "bench" / "h200" / "study.sh"), phase, str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    (run,) = summary["study"]["runs"]
    assert run["outcome"] == "result" and run["seed"] == 0 and run["test_score"] is not None
    assert len(run["submissions"]) == 3
    assert all(s["latency_s"] is not None and s["latency_s"] >= 0 for s in run["submissions"])
    assert summary["study"]["wall"]["wall_s"] >= 0 and summary["study"]["report"]["cells"][0]["runs"] == 1
    # the study's run scored the baseline and found its engine loaded by it; the `first` phase's run (another
    # study) read the baseline from the shared cache, so its warm-up loaded the engine while the agent started
    assert not run["baseline_cached"] and run["warm_up"] == {**run["warm_up"], "skipped": "an engine is loaded already"}
    (first,) = summary["first"]["runs"]
    assert first["outcome"] == "result" and first["baseline_cached"]
    assert first["warm_up"]["engine"] == "fresh" and first["warm_up"]["load_s"] > 0
    assert first["submissions"][0]["engine"] != "fresh"  # the first submission found the warm engine
    assert summary["gsm_hf"] == {"skipped": "STUDY_CPU=1"}
    md = (out / "summary.md").read_text()
    assert run["run_id"] in md and "submission latencies" in md
    bad = subprocess.run(
        ["bash", str(ROOT / "bench" / "h200" / "study.sh"), "nonsense", str(out)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "unknown phase" in bad.stderr
