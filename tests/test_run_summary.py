"""What `autorl run` prints at its end, as the Quick start shows it: the headline, finished with a test score beside
beat baseline, the duration without the time the model and data took to prepare, each off-target change, and a
warning when --limit leaves intervals wider than +-10 points; all of it within 80 columns."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pytest

from autorl.runs.services import limit_warning

from .conftest import cli, echo_answers, write_stub_checkpoint
from .test_run import agent_folder

#: echo whose data takes a while to prepare (as the built-in model's build or a download does), installed by
#: putting its folder on PYTHONPATH
SLOW_PLUGIN = '''
import time

from autorl import hookimpl
from autorl_example_plugin.stub import EchoBenchmark


class SlowEcho(EchoBenchmark):
    """echo, its data ready after PREPARE_S seconds."""

    name = "slow-echo"

    def prepare_train_data(self, target_dir):
        time.sleep(3.0)
        super().prepare_train_data(target_dir)


@hookimpl
def register_benchmarks(register):
    register(SlowEcho)
'''


def _slow_plugin(root: Path) -> Path:
    root.mkdir()
    (root / "autorl_slow_echo.py").write_text(SLOW_PLUGIN)
    info = root / "autorl_slow_echo-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: autorl-slow-echo\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[autorl]\nslow-echo = autorl_slow_echo\n")
    return root


@pytest.mark.e2e
def test_the_end_of_run_summary(tmp_path: Path) -> None:
    home = tmp_path / "home"
    base = write_stub_checkpoint(tmp_path / "stub-base", {**echo_answers(1), **echo_answers(2, "test")})
    agent = agent_folder(
        tmp_path / "agents",
        "one",
        """
        make_ckpt v1 4 null 4
        submit v1
    """,
    )
    began = time.time()
    proc = cli(
        "run",
        "--agent",
        str(agent),
        "--task",
        "slow-echo",
        "--model",
        str(base),
        "--backend",
        "scripted",
        "--timeout",
        "60",
        "--limit",
        "4",
        "--off-target",
        "echo",
        "--sandbox",
        "none",
        "--no-audit",
        env={"AUTORL_HOME": str(home), "PYTHONPATH": str(_slow_plugin(tmp_path / "plugin")), "COLUMNS": "80"},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # the words: a test score, and whether it beat the baseline, side by side
    assert "finished with a test score: yes; beat baseline: " in out
    # the off-target change, printed
    assert "off-target echo (test): base " in out and "change +" in out
    # the limit's warning, before the agent started
    assert "warning: --limit 4: a score on 4 items has a 95% interval up to +-49.0 points" in proc.stderr
    row = json.loads(cli("results", "--json", env={"AUTORL_HOME": str(home)}, check=True).stdout)[-1]
    result = json.loads((Path(row["workspace"]) / "result.json").read_text())
    meta = result["meta"]
    # the 3 s of preparation are timed apart: the run started after them and its duration leaves them out
    started = dt.datetime.strptime(row["timestamp"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc).timestamp()
    assert meta["prepare_s"] >= 3.0 and started >= began + 2.0
    assert row["duration_s"] == pytest.approx(meta["finished_at"] - started, abs=1.5)
    assert f"preparing the model and data took {meta['prepare_s']:.0f} s before it" in out
    assert row["limit"] == 4 and row["off_target"][0]["task"] == "echo"
    # 80 columns, but for the workspace's path, which stands whole on its line to be copied
    wide = [line for line in out.splitlines() if len(line) > 80]
    assert all(line.strip() == row["workspace"] for line in wide), wide


def test_the_limit_warning_is_given_where_intervals_pass_10_points() -> None:
    assert limit_warning(None, 20) is None and limit_warning(500, 500) is None
    assert limit_warning(97, 97) is None  # 1.96 * sqrt(0.25 / 97) = 9.95 points
    warned = limit_warning(30, 30)
    assert warned is not None and "+-17.9 points" in warned and "about 97 items give +-10" in warned
    # a limit beyond the split's size: the items there are what counts
    assert limit_warning(1000, 50) is not None and "on 50 items" in str(limit_warning(1000, 50))
