"""The README's walk-through, run as written: from a CSV file through `autorl smith generate`, `validate`,
`autorl eval` to an `autorl run` of the example agent that records a test score. Only what cannot run here is
replaced: the driver model (a scripted OpenAI-compatible server), the home folder (a temporary one) and the
run's time budget (shorter)."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from smith_folders import folder_reply, scripted_driver

from autorl.sandbox import bwrap_available

README = Path(__file__).resolve().parents[1] / "README.md"
#: the walk-through's time budget here: the example agent trains, submits, and the run scores its pick
TIMEOUT_S = 90


def walkthrough() -> str:
    """The bash block under the README's walk-through heading, verbatim."""
    text = README.read_text()
    section = text[text.index("### Walk-through") :]
    match = re.search(r"```bash\n(.*?)```", section, flags=re.S)
    assert match, "the README's walk-through has no bash block"
    return match.group(1)


def test_the_readme_walkthrough_runs_to_a_recorded_test_score(tmp_path: Path) -> None:
    for module in ("torch", "trl"):
        pytest.importorskip(module, reason="the walk-through's run trains with the example agent (autorl[train])")
    script = walkthrough()
    assert "OPENAI_API_KEY=sk-..." in script and "--timeout 600" in script and "# round 1: valid" in script
    script = script.replace("OPENAI_API_KEY=sk-...", "OPENAI_API_KEY=sk-operator-walkthrough")
    script = script.replace("--timeout 600", f"--timeout {TIMEOUT_S}")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTORL_", "SMITH_", "OPENAI_"))}
    env.update(
        HOME=str(home), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", HF_HUB_OFFLINE="1"
    )
    with scripted_driver([folder_reply()]) as (url, seen):
        env["OPENAI_BASE_URL"] = url
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S + 600,
        )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    folder = home / "rl-smith" / "benchmarks" / "products"
    # what the README's comments say each step shows
    assert len(seen) == 1 and "round 1: valid" in proc.stderr
    assert f"{folder}: ok" in proc.stdout and "smith-products" in proc.stdout
    # the run recorded a test score for its pick, and the example agent loaded the benchmark in its sandbox
    runs = sorted((home / ".cache" / "autorl" / "runs" / "smith-products").glob("*/result.json"))
    assert len(runs) == 1, proc.stderr[-3000:]
    result = json.loads(runs[0].read_text())
    assert isinstance(result["test"]["score"], float) and result["test"]["split"] == "test"
    assert result["meta"]["sandbox"]["mode"].startswith("bwrap") or bwrap_available()[0] is None
    with (home / ".cache" / "autorl" / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["task"], r["agent"]) for r in rows] == [("smith-products", "example")] and rows[0]["test_score"]
    log = (runs[0].parent / "agent.log").read_text()
    assert "400 training rows" in log and "submitted v1" in log and "Traceback" not in log, log[-3000:]
