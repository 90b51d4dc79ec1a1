"""``autorl.runs()`` and ``autorl.items()``: every recorded run, and a run's items, as typed pandas DataFrames."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import autorl
from autorl.export.frames import ITEM_COLUMNS
from autorl.record.frames import column_kinds
from autorl.record.row import CSV_COLUMNS

from .recorded_run import LOSSES, WINS, RecordedRuns
from .test_ui import fixture_result, make_ledger

pd = pytest.importorskip("pandas")


def test_runs_is_every_recorded_run_with_the_results_csv_columns_typed(recorded_runs: RecordedRuns) -> None:
    df = autorl.runs(home=recorded_runs.home)
    assert list(df.columns) == list(CSV_COLUMNS)
    assert list(df.run_id) == [recorded_runs.first, recorded_runs.run_id]
    assert str(df.timestamp.dt.tz) == "UTC" and pd.api.types.is_datetime64_any_dtype(df.timestamp)
    for name in ("baseline", "best_score", "improvement", "p_value", "duration_s", "timeout_s", "dev_best"):
        assert df[name].dtype == "float64", name
    for name in ("submissions", "dev_k", "seed"):
        assert df[name].dtype == "int64", name
    assert df.best_submission.dtype == "Int64" and df.llm_tokens.isna().all()
    assert df.success.dtype == bool and df.beat_baseline.dtype == bool and df.success.all()
    assert df.off_target_regressed.dtype == "boolean"
    last = df.iloc[-1]
    assert last.improvement == pytest.approx(16.6667, abs=1e-3) and last.baseline == pytest.approx(33.3333, abs=1e-3)
    assert isinstance(last.improvement_ci95, list) and len(last.improvement_ci95) == 2
    assert list(autorl.runs(agent="hostile", home=recorded_runs.home).run_id) == [recorded_runs.run_id]
    assert autorl.runs(task="gsm8k", home=recorded_runs.home).empty
    assert autorl.runs(study="nope", home=recorded_runs.home).empty


def test_numbers_recorded_as_text_are_numbers_and_a_study_filters(tmp_path: Path) -> None:
    a = fixture_result("20261101T100000", "arith", "a", "tiny", "2026-11-01", [40.0], test=52.0)
    b = fixture_result("20261102T100000", "arith", "b", "tiny", "2026-11-02", [40.0], test=None, success=False)
    a["row"].update(timeout_s="60", sweep="s1", dev_k="2", llm_tokens=1200, off_target_regressed=True)
    b["row"].update(timeout_s="60.0", sweep="s1", submissions=3.0, p_value="n/a")
    make_ledger(tmp_path / "autorl.db", [a, b])
    df = autorl.runs(study="s1", home=tmp_path)
    assert list(df.timeout_s) == [60.0, 60.0] and df.timeout_s.dtype == "float64"
    assert list(df.dev_k) == [2, 1] and list(df.submissions) == [1, 3] and df.submissions.dtype == "int64"
    assert df.p_value.isna().iloc[1] and df.llm_tokens.dtype == "Int64" and df.llm_tokens.iloc[0] == 1200
    assert df.best_score.isna().iloc[1] and list(df.success) == [True, False]
    assert df.off_target_regressed.iloc[0] is True or bool(df.off_target_regressed.iloc[0])
    assert df.off_target_regressed.isna().iloc[1]
    assert autorl.runs(home=tmp_path, agent="b").shape == (1, len(CSV_COLUMNS))


def test_kinds_come_from_the_row_definition() -> None:
    kinds = column_kinds()
    assert list(kinds) == list(CSV_COLUMNS)
    assert kinds["timestamp"] == "datetime" and kinds["baseline"] == "float" and kinds["success"] == "bool"
    assert kinds["best_submission"] == "int?" and kinds["off_target_regressed"] == "bool?"
    assert kinds["improvement_ci95"] == "object" and kinds["task"] == "str"


def test_items_is_a_runs_items_in_the_benchmarks_order(recorded_runs: RecordedRuns) -> None:
    df = autorl.items(recorded_runs.run_id[:12] + recorded_runs.run_id[12:], home=recorded_runs.home)
    assert list(df.columns) == list(ITEM_COLUMNS) and len(df) == 30
    assert list(df.item_id) == [f"test-{k}" for k in range(20, 50)]
    assert list(df[df.outcome == "win"].item_id) == WINS and list(df[df.outcome == "loss"].item_id) == LOSSES
    assert df.score.dtype == "float64" and df.score.mean() == pytest.approx(0.5)
    assert df.attrs["submission"] == 1 and df.attrs["split"] == "test"
    dev = autorl.items(recorded_runs.run_id, "dev", home=recorded_runs.home)
    assert len(dev) == 20 and (dev.outcome == "win").sum() == 7
    with pytest.raises(autorl.UsageError, match="no run or study 'nope'"):
        autorl.items("nope", home=recorded_runs.home)
    with pytest.raises(autorl.UsageError, match="does not exist"):
        autorl.runs(home=recorded_runs.home / "empty")


def test_the_entry_points_survive_the_run_wing_being_imported(recorded_runs: RecordedRuns) -> None:
    import autorl.runs.plan
    import autorl.runs.runner  # imports autorl.runs.plan & co: autorl.runs is the package from then on

    assert callable(autorl.runs) and autorl.runs.plan.__name__ == "autorl.runs.plan"
    assert len(autorl.runs(home=recorded_runs.home)) == 2
    code = (
        "import autorl; f = autorl.runs; import autorl.runs.finish; "
        f"print(len(f(home={str(recorded_runs.home)!r})), len(autorl.runs(home={str(recorded_runs.home)!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["2", "2"]


def test_without_pandas_the_error_names_the_install(tmp_path: Path) -> None:
    code = "import sys; sys.modules['pandas'] = None\nfrom autorl.cli import main\nimport autorl\nautorl.runs()"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "autorl.errors.MissingDependencyError: autorl.runs() needs an optional dependency that is not installed: "
        "run `pip install -c constraints.txt 'autorl[data]'`"
    )
