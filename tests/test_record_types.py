"""The run's typed records (`autorl.record.schema`) name the same fields, with the same types, as the values they
are made from (the row's dataclass, the run's facts, the agent's outcome, an audit flag), and the records built
from them are the dicts the code wrote before they were typed (``result.json`` and the ledger byte for byte)."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

from autorl.audit.flags import Flag
from autorl.procs.agent import AgentOutcome
from autorl.record.aggregate import GroupRecord, RunGroup
from autorl.record.metrics import BestOfK, MetricsRecord, ProcessMetrics
from autorl.record.result import RunResult
from autorl.record.row import RECORDED_COLUMNS, RunRow
from autorl.record.schema import FlagRecord, LedgerRow, LiveRecord, OutcomeRecord, ResultRecord, RowRecord
from autorl.runs.facts import RunFacts
from autorl.runs.liveness import OrchestratorStatus, StatusRecord


def _hints(cls: Any) -> dict[str, Any]:
    # the records name the lower layers' records under TYPE_CHECKING: resolved here as mypy resolves them
    from autorl.decoys import PlantedRecord
    from autorl.inference.gpu_share import GpuBudgetRecord

    return typing.get_type_hints(cls, localns={"PlantedRecord": PlantedRecord, "GpuBudgetRecord": GpuBudgetRecord})


def test_the_row_records_name_every_column_of_the_row_with_its_type() -> None:
    columns = _hints(RunRow)
    recorded = {k: v for k, v in columns.items() if k != "audit_flags"}
    assert _hints(RowRecord) == recorded
    assert _hints(LedgerRow) == {**columns, "audit_overridden": list[str]}
    row = RunRow("r", "2026-01-01 00:00:00", "t", "a", "m", improvement=1.5, off_target=[])
    assert list(row.to_dict()) == list(columns) and list(row.record()) == list(RECORDED_COLUMNS)
    assert row.to_dict() == dataclasses.asdict(row)


def test_the_records_of_a_run_in_flight_an_outcome_and_a_flag_are_their_dataclasses() -> None:
    assert _hints(LiveRecord) == _hints(RunFacts)
    facts = RunFacts("r", "t", "a", "m", 1.0, 60.0, benchmark_options={"k": [1]})
    assert facts.to_dict() == dataclasses.asdict(facts)
    assert RunFacts.from_live(facts.to_dict()) == facts
    assert _hints(OutcomeRecord) == {**_hints(AgentOutcome), "log_tail": str}
    flag = Flag("x", "high", "why", ["a", "b"])
    assert _hints(FlagRecord) == _hints(Flag)
    assert flag.to_dict() == dataclasses.asdict(flag) and flag.to_dict()["evidence"] is not flag.evidence
    status = OrchestratorStatus(False, 12.5, "gone")
    assert _hints(StatusRecord) == _hints(OrchestratorStatus)
    assert list(status.to_dict().items()) == list(dataclasses.asdict(status).items())


def test_a_group_as_data_is_what_it_was_before_it_was_typed() -> None:
    group = RunGroup(
        "arith", "a", "m", "h", 3, 1, 1.5, (0.5, 2.5), [1.0, 2.0, 0.0], ["r1", "r2", "r3"], "gpt", 60.0, "bwrap", None
    )
    before = dataclasses.asdict(group)
    before.update(ci95=[0.5, 2.5], scored=2, failure_rate=1 / 3)
    assert json.dumps(group.as_dict()) == json.dumps(before)
    assert set(_hints(GroupRecord)) == set(before)


def test_result_json_is_the_record_it_was_and_a_copy(tmp_path: Path) -> None:
    row = RunRow("r", "2026-01-01 00:00:00", "t", "a", "m", improvement=1.5, improvement_ci95=[0.5, 2.5]).record()
    result = RunResult(
        "r",
        row,
        [{"submission_id": 1, "score": 2.0}],
        {"score": 1.0},
        None,
        {"exit_code": 0, "timed_out": False, "duration_s": 3.0, "reason": "exit 0"},
        tmp_path,
        {"sandbox": {"mode": "bwrap"}},
        [Flag("x", "high", "why", ["e"]).to_dict()],
    )
    before = {("baseline" if k == "dev_baseline_record" else k): v for k, v in dataclasses.asdict(result).items()}
    before["run_dir"] = str(tmp_path)
    record = result.to_dict()
    assert json.dumps(record) == json.dumps(before)
    assert list(ResultRecord.__annotations__) == list(record)
    record["row"]["improvement"] = 9.0
    record["meta"]["sandbox"]["mode"] = "none"
    record["submissions"].append({"submission_id": 2})
    assert result.row["improvement"] == 1.5 and result.meta["sandbox"]["mode"] == "bwrap"
    assert len(result.submissions) == 1


def test_the_metrics_and_best_of_k_records_are_columns_of_the_row() -> None:
    assert _hints(MetricsRecord) == _hints(ProcessMetrics)
    metrics = ProcessMetrics(0.5, 0, 1.0, [[1.0, 2.0]], copy_model_count=1)
    assert metrics.to_dict() == dataclasses.asdict(metrics)
    columns = _hints(RunRow)
    for name, hint in {**_hints(MetricsRecord), **_hints(BestOfK)}.items():
        assert _members(hint) <= _members(columns[name]), name


def _members(hint: Any) -> set[Any]:
    return set(typing.get_args(hint)) if isinstance(hint, types.UnionType) else {hint}
