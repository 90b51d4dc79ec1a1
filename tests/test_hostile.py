"""Agents that attack the grader's handling of their files, run through `autorl run --sandbox bwrap`: each
attack ends in a recorded refusal (or in nothing at all), and the run is recorded from its honest submission."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from autorl.grader.validation import OUTSIDE_OUTPUT

from .conftest import ROOT, cli, echo_answers, write_stub_checkpoint
from .test_sandbox import needs_bwrap

HOSTILE = Path(__file__).with_name("hostile")


def run_hostile(
    tmp_path: Path,
    name: str,
    attack: dict[str, Any],
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    home = tmp_path / "autorl-home"
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    proc = cli(
        "run",
        "--agent",
        str(HOSTILE / name),
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "90",
        "--backend",
        "scripted",
        "--sandbox",
        "bwrap",
        "--network",
        "off",
        "--json",
        "--agent-env",
        "ATTACK=" + json.dumps({"tests_root": str(ROOT), **attack}),
        env={"AUTORL_HOME": str(home), **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    ws = Path(row["workspace"])
    result = json.loads((ws / "result.json").read_text())
    attempts = json.loads((ws / "code" / "attempts.json").read_text())
    return row, result, attempts


def dev_best(row: dict[str, Any]) -> Any:
    return row.get("dev_best", row.get("best_score"))


@needs_bwrap
def test_output_replaced_by_a_link_to_root_reaches_no_other_run_and_no_hub_model(tmp_path: Path) -> None:
    home = tmp_path / "autorl-home"
    # another run's snapshot in the grader store, and a model in the hub cache: both would score 100
    other = write_stub_checkpoint(home / "grader" / "echo_other_run" / "snapshots" / "1", echo_answers(20))
    hub = write_stub_checkpoint(
        tmp_path / "hf" / "hub" / "models--org--instruct" / "snapshots" / "abc", echo_answers(20)
    )
    row, result, attempts = run_hostile(
        tmp_path, "output_swap", {"targets": [str(other), str(hub)]}, env={"HF_HOME": str(tmp_path / "hf")}
    )
    honest, *attacks = attempts
    assert honest["status"] == 200 and honest["body"]["score"] == pytest.approx(60.0)
    assert len(attacks) == 8
    for a in attacks:
        assert a["status"] == 400, a
        assert list(a["body"]) == ["error"] and "\n" not in a["body"]["error"]
    refusals = result["meta"]["refusals"]
    assert len(refusals) == 8 and {r["kind"] for r in refusals} == {OUTSIDE_OUTPUT}
    flags = {f["name"]: f for f in result["audit"]}
    assert "submissions-outside-output" in flags
    assert str(other) in json.dumps(flags["submissions-outside-output"]["evidence"])
    # the run is recorded from the honest submission alone
    assert row["submissions"] == 1 and dev_best(row) == pytest.approx(60.0)


@needs_bwrap
def test_links_planted_at_scores_json_never_carry_a_write(tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text("ORIGINAL")
    victim.chmod(0o640)
    row, result, attempts = run_hostile(tmp_path, "scores_link", {"victim": str(victim)})
    planted = attempts.pop()
    assert planted["label"] == "planted" and planted["count"] > 0
    assert len(attempts) >= 3 and all(a["status"] == 200 for a in attempts), attempts
    assert victim.read_text() == "ORIGINAL" and (victim.stat().st_mode & 0o777) == 0o640
    assert row["submissions"] == len(attempts) and dev_best(row) == pytest.approx(60.0)
    assert result["meta"]["refusals"] == []


@needs_bwrap
def test_fifo_dev_zero_and_sparse_files_are_refused_and_the_run_goes_on(tmp_path: Path) -> None:
    row, result, attempts = run_hostile(tmp_path, "special_files", {})
    by_label = {a["label"]: a for a in attempts}
    assert by_label["fifo"]["status"] == 422 and "not a regular file" in by_label["fifo"]["body"]["error"]
    assert by_label["dev-zero"]["status"] == 400 and "link" in by_label["dev-zero"]["body"]["error"]
    assert by_label["sparse"]["status"] == 413
    assert by_label["honest"]["status"] == 200 and by_label["honest"]["body"]["score"] == pytest.approx(60.0)
    kinds = [r["kind"] for r in result["meta"]["refusals"]]
    assert kinds == ["invalid_checkpoint", OUTSIDE_OUTPUT, "too_large"]
    assert row["submissions"] == 1 and dev_best(row) == pytest.approx(60.0)
    store = Path(result["meta"]["store_dir"])
    assert sorted(p.name for p in (store / "snapshots").iterdir()) == ["1"]
    assert not os.path.exists(store / "snapshots" / "1" / "model-00002.safetensors")
    # the grader's log is in its store, not in the workspace where the agent could write to it
    assert (store / "grader.log").is_file() and "POST /submit" in (store / "grader.log").read_text()
    assert not (Path(row["workspace"]) / "grading_server.log").exists()
