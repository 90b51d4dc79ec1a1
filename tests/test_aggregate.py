"""`aggregate_runs`: one figure per (task, agent, base model, config hash), checked against numbers by hand."""

from __future__ import annotations

import math
from typing import Any

import pytest

from autorl.record.aggregate import FAILURE_RULE, aggregate_runs, differences

# Student t quantiles t(0.975, df), from a printed table
T975 = {1: 12.706204736174698, 2: 4.302652729911275, 3: 3.182446305284263}


def row(
    run_id: str,
    improvement: float | None,
    *,
    agent: str = "a",
    model: str = "tiny",
    cfg: str = "h1",
    task: str = "arith",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "task": task,
        "agent": agent,
        "base_model": model,
        "config_hash": cfg,
        "improvement": improvement,
        "dev_improvement": 50.0,
        **extra,
    }


def test_failures_count_as_zero_and_the_interval_is_a_t_interval_over_runs() -> None:
    groups = aggregate_runs([row("1", 2.0), row("2", 4.0), row("3", None), row("4", 6.0)])
    assert len(groups) == 1
    g = groups[0]
    # values 2, 4, 0, 6: mean 3; squared deviations 1 + 1 + 9 + 9 = 20; sd = sqrt(20 / 3)
    assert g.values == [2.0, 4.0, 0.0, 6.0] and g.runs == 4 and g.failures == 1 and g.scored == 3
    assert g.failure_rate == 0.25 and g.mean == pytest.approx(3.0)
    half = T975[3] * math.sqrt(20 / 3) / math.sqrt(4)
    assert g.ci95 == pytest.approx((3.0 - half, 3.0 + half))
    assert g.run_ids == ["1", "2", "3", "4"]
    d = g.as_dict()
    assert d["ci95"] == pytest.approx([3.0 - half, 3.0 + half]) and d["failure_rate"] == 0.25 and d["scored"] == 3
    assert "improvement 0" in FAILURE_RULE


def test_the_metric_is_the_test_improvement_never_dev() -> None:
    # every run's dev improvement is 50: none of it may show
    g = aggregate_runs([row("1", 1.0), row("2", None, dev_best=99.0)])[0]
    assert g.values == [1.0, 0.0] and g.mean == pytest.approx(0.5)
    assert g.ci95 == pytest.approx(
        (0.5 - T975[1] * math.sqrt(0.5) / math.sqrt(2), 0.5 + T975[1] * math.sqrt(0.5) / math.sqrt(2))
    )


def test_different_base_models_config_hashes_agents_and_tasks_are_never_pooled() -> None:
    rows = [
        row("1", 1.0),
        row("2", 3.0),
        row("3", 10.0, model="other"),
        row("4", 20.0, cfg="h2"),
        row("5", 30.0, agent="b"),
        row("6", 40.0, task="gsm8k"),
        row("7", 99.0, live=True),
    ]
    groups = aggregate_runs(rows)
    keys = [(g.task, g.agent, g.base_model, g.config_hash, g.values) for g in groups]
    assert keys == [
        ("arith", "a", "other", "h1", [10.0]),
        ("arith", "a", "tiny", "h1", [1.0, 3.0]),
        ("arith", "a", "tiny", "h2", [20.0]),
        ("arith", "b", "tiny", "h1", [30.0]),
        ("gsm8k", "a", "tiny", "h1", [40.0]),
    ]  # the live run is not finished: left out
    assert [g.values for g in aggregate_runs(rows, task="gsm8k")] == [[40.0]]


def test_one_run_has_no_interval_and_equal_runs_a_zero_width_one() -> None:
    assert aggregate_runs([row("1", 5.0)])[0].ci95 is None
    assert aggregate_runs([row("1", 5.0), row("2", 5.0)])[0].ci95 == (5.0, 5.0)
    only_failures = aggregate_runs([row("1", None), row("2", None)])[0]
    assert only_failures.mean == 0.0 and only_failures.failure_rate == 1.0


def test_non_numbers_in_the_improvement_are_failures() -> None:
    g = aggregate_runs([row("1", float("nan")), row("2", True), row("3", "7"), row("4", 8)])[0]  # type: ignore[arg-type]
    assert g.values == [0.0, 0.0, 0.0, 8.0] and g.failures == 3


def test_runs_on_other_items_are_never_pooled_and_numbers_compare_as_numbers() -> None:
    """Runs on 20, 30, 50 and all items shared one hash and one group; a budget stored as 60 and as 60.0 (a
    script's int, the command line's float, a CSV's text) made two groups said to differ in timeout_s."""
    rows = [
        row("1", 1.0, limit=20, timeout_s=60),
        row("2", 3.0, limit=20, timeout_s=60.0),
        row("3", 5.0, limit=20.0, timeout_s="60"),
        row("4", 7.0, limit=50, timeout_s=60),
        row("5", 9.0, limit=None, timeout_s="60.0"),
        row("6", 11.0, timeout_s=60),
    ]
    groups = aggregate_runs(rows)
    assert [(g.limit, g.timeout_s, g.run_ids) for g in groups] == [
        (None, 60.0, ["5", "6"]),
        (20, 60.0, ["1", "2", "3"]),
        (50, 60.0, ["4"]),
    ]
    assert differences(groups) == {"arith · a": ["limit"]}
    # a budget really different is named, and only it
    assert differences(aggregate_runs([row("1", 1.0, timeout_s=60), row("2", 2.0, timeout_s=120)])) == {
        "arith · a": ["timeout_s"]
    }


def test_an_old_row_takes_its_limit_from_its_record_and_is_not_pooled_with_all_items(tmp_path: Any) -> None:
    """A row recorded before the limit was a column (its config hash, too, the same for 20 items as for all)
    reads its limit from the record's meta: it stays out of the group of runs on every item."""
    from autorl.record.ledger import Ledger
    from autorl.record.row import RunRow

    ledger = Ledger(tmp_path / "autorl.db")
    old = RunRow(
        "old", "2026-01-01 00:00:00", "arith", "a", "tiny", config_hash="h1", improvement=4.0, success=True
    ).record()
    del old["limit"]
    new = RunRow(
        "new", "2026-01-02 00:00:00", "arith", "a", "tiny", config_hash="h1", improvement=2.0, success=True
    ).record()
    ledger.ingest({"row": old, "submissions": [], "meta": {"limit": 20}})
    ledger.ingest({"row": new, "submissions": [], "meta": {"limit": None}})
    ledger.ingest({"row": {**new, "run_id": "odd"}, "submissions": [], "meta": ["not", "a", "dict"]})
    rows = ledger.rows()
    ledger.close()
    assert [r.get("limit") for r in rows] == [20, None, None]
    assert [(g.limit, g.run_ids) for g in aggregate_runs(rows)] == [(None, ["new", "odd"]), (20, ["old"])]
