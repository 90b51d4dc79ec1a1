"""``autorl export eee``: recorded runs as Every Eval Ever records, checked by the ``every-eval-ever`` package's own
validator (``every_eval_ever validate``: the schema's models and the datastore's checks).

The validator needs Python >= 3.12 and its own environment: ``nox -s exports`` builds one and names its command in
``AUTORL_EEE``; without it the validator's test skips and the rest checks the records' content."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from autorl.errors import UsageError
from autorl.record.ledger import Ledger

from .conftest import cli
from .recorded_run import ESCAPE, LONG, MARKUP, RecordedRuns

EEE = os.environ.get("AUTORL_EEE", "")
needs_validator = pytest.mark.skipif(
    not EEE or not Path(EEE).is_file(), reason="needs every_eval_ever (Python >= 3.12): run `nox -s exports`"
)


def export(runs: RecordedRuns, target: str, out: Path, home: Path | None = None) -> list[Path]:
    proc = cli("export", "eee", target, "--out", str(out), "--json", env={"AUTORL_HOME": str(home or runs.home)})
    assert proc.returncode == 0, proc.stderr
    return [Path(p) for p in json.loads(proc.stdout)]


def validate(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EEE, "validate", "--format", "json", f"{out}/data/*/*/*/*.json*"], capture_output=True, text=True, timeout=300
    )


def load(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def samples(aggregate: Path) -> list[dict[str, Any]]:
    lines = aggregate.with_name(aggregate.stem + "_samples.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_run_is_two_evaluations_with_their_items(recorded_runs: RecordedRuns, tmp_path: Path) -> None:
    runs = recorded_runs
    paths = export(runs, runs.run_id, tmp_path / "out")
    assert len(paths) == 2
    base, ckpt = (load(p) for p in paths)
    assert (
        base["model_info"]["id"] == "local/base" and base["source_metadata"]["evaluator_relationship"] == "third_party"
    )
    assert ckpt["model_info"]["id"] == f"autorl/base-hostile-{runs.run_id}"
    assert paths[1].parent == tmp_path / "out" / "data" / "echo" / "autorl" / f"base-hostile-{runs.run_id}"
    row = runs.result["row"]
    score = ckpt["evaluation_results"][0]["score_details"]
    assert score["score"] == pytest.approx(row["best_score"]) and score["uncertainty"]["num_samples"] == 30
    assert base["evaluation_results"][0]["score_details"]["score"] == pytest.approx(row["baseline"])
    improvement = ckpt["evaluation_results"][1]
    assert improvement["evaluation_result_id"] == "improvement"
    assert improvement["score_details"]["score"] == pytest.approx(row["improvement"])
    ci = improvement["score_details"]["uncertainty"]["confidence_interval"]
    assert [ci["lower"], ci["upper"]] == pytest.approx(row["improvement_ci95"])
    assert ckpt["model_info"]["additional_details"]["agent"] == "hostile"
    assert ckpt["evaluation_results"][0]["generation_config"]["generation_args"] == {
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 4,
        "prompt_template": "{question}",
    }
    rows = samples(paths[1])
    assert len(rows) == 30 and {r["evaluation_id"] for r in rows} == {ckpt["evaluation_id"]}
    by_id = {r["sample_id"]: r for r in rows}
    assert by_id["test-30"]["input"] == {"raw": "say 30", "reference": ["30"]}
    assert by_id["test-30"]["evaluation"] == {"score": 1.0, "is_correct": True}
    assert by_id["test-30"]["metadata"]["base_model_score"] == "0.0"
    assert by_id["test-40"]["output"]["raw"] == [MARKUP] and by_id["test-41"]["output"]["raw"] == [ESCAPE + "tail"]
    assert by_id["test-43"]["output"]["raw"] == [LONG]
    detail = ckpt["detailed_evaluation_results"]
    text = paths[1].with_name(paths[1].stem + "_samples.jsonl").read_bytes()
    assert detail["total_rows"] == 30 and detail["checksum"] == hashlib.sha256(text).hexdigest()
    assert (
        detail["file_path"]
        == paths[1].with_name(paths[1].stem + "_samples.jsonl").relative_to(tmp_path / "out").as_posix()
    )
    # the same run again: the same files, rewritten
    assert export(runs, runs.run_id, tmp_path / "out") == paths
    assert sorted(p.name for p in (tmp_path / "out").rglob("*") if p.is_file()) == sorted(
        [p.name for p in paths] + [p.stem + "_samples.jsonl" for p in paths]
    )


def study_home(runs: RecordedRuns, root: Path) -> Path:
    """A home whose ledger holds both recorded runs as the study ``s1`` (as `autorl sweep` ingests them)."""
    home = root / "home"
    home.mkdir()
    ledger = Ledger(home / "autorl.db")
    try:
        for k, result in enumerate(Ledger(runs.home / "autorl.db").runs()):
            copied = copy.deepcopy(result)
            copied["meta"]["runner_run_id"] = result["row"]["run_id"]
            copied["row"].update(run_id=f"s1-k{k}", sweep="s1", run_key=f"k{k}")
            ledger.ingest(copied)
    finally:
        ledger.close()
    return home


def test_a_study_is_every_run_and_a_wrong_name_is_one_line(recorded_runs: RecordedRuns, tmp_path: Path) -> None:
    home = study_home(recorded_runs, tmp_path)
    paths = export(recorded_runs, "s1", tmp_path / "out", home=home)
    assert len(paths) == 4
    assert {load(p)["source_metadata"]["additional_details"]["study"] for p in paths} == {"s1"}
    proc = cli("export", "eee", "s2", "--out", str(tmp_path / "x"), env={"AUTORL_HOME": str(home)})
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"error: no run or study 's2' in {home / 'autorl.db'} (see `autorl results`; a study's runs are there once "
        "`autorl sweep ingest` recorded them)"
    ]
    assert not (tmp_path / "x").exists()


@needs_validator
def test_the_records_pass_every_eval_evers_own_validator(recorded_runs: RecordedRuns, tmp_path: Path) -> None:
    out = tmp_path / "out"
    export(recorded_runs, recorded_runs.run_id, out)
    export(recorded_runs, "s1", out, home=study_home(recorded_runs, tmp_path))
    proc = validate(out)
    reports = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert len(reports) == 12 and all(r["valid"] and not r["warnings"] for r in reports), reports
    assert sorted(r["line_count"] for r in reports if r["file_type"] == "instance") == [30] * 6
    # the validator is not a rubber stamp: a count that disagrees with its samples file fails
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    first = sorted(bad.rglob("*-*.json"))[0]
    first.write_text(first.read_text().replace('"total_rows": 30', '"total_rows": 31'))
    failed = validate(bad)
    assert failed.returncode == 1 and "declared 31, found 30" in failed.stdout


def test_an_episode_is_multi_turn_and_a_judged_benchmark_names_its_judge(tmp_path: Path) -> None:
    """A judged benchmark's records (its evaluation record names the judge, as autorl-alpacaeval's does) and an
    episode benchmark's items (their turns), from a store written as the grader writes one."""
    from autorl.export.eee import export_eee
    from autorl.export.recorded import select
    from autorl.grader.items import per_item_path

    from .test_ui import fixture_result, make_ledger

    store = tmp_path / "store"
    turns = [
        {"observation": "You are in a kitchen.", "action": "open fridge"},
        {"observation": "The fridge is open.", "action": "take apple"},
    ]
    for tag, score in (("baseline", 0.0), ("sub1", 1.0)):
        path = per_item_path(store, tag, "test")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                {
                    "id": "game-1",
                    "score": score,
                    "completions": [t["action"] for t in turns],
                    "error": None,
                    "prompt": '{"game": "kitchen"}',
                    "reference": None,
                    "extra": {"steps": 2, "trajectory": turns},
                }
            )
            + "\n"
        )
    judged = fixture_result(
        "20261101T100000", "alfworld", "a", "Qwen/Qwen2.5-0.5B@main", "2026-11-01", [40.0], test=60.0, store_dir=store
    )
    judged["meta"]["model_source"] = "hub"
    judged["test"].update(
        n=1,
        extra={
            "judge": {
                "model": "gpt-4o-mini",
                "base_url": "https://api.example/v1",
                "annotator": "alpaca_eval_gpt4_turbo_fn",
            },
            "judge_cost_usd": 0.0123,
            "judge_prompt_tokens": 900,
        },
    )
    failed = fixture_result("20261102T100000", "alfworld", "b", "m", "2026-11-02", [], test=None, success=False)
    make_ledger(tmp_path / "autorl.db", [judged, failed])
    said: list[str] = []
    paths = export_eee(select("20261101", tmp_path), tmp_path / "out", log=said.append)
    base, ckpt = (load(p) for p in paths)
    assert (
        base["model_info"]["id"] == "Qwen/Qwen2.5-0.5B"
        and base["model_info"]["additional_details"]["model_availability"] == "open_weights"
    )
    scoring = ckpt["evaluation_results"][0]["metric_config"]["llm_scoring"]
    assert base["evaluation_results"][0]["metric_config"]["llm_scoring"] == scoring
    assert scoring["judges"][0]["model_info"]["id"] == "gpt-4o-mini"
    assert scoring["input_prompt"] == "alpaca_eval_gpt4_turbo_fn"
    assert scoring["additional_details"]["judge_cost_usd"] == "0.0123"
    [sample] = samples(paths[1])
    assert sample["interaction_type"] == "multi_turn" and sample["output"] is None
    assert [(m["role"], m["content"]) for m in sample["messages"]] == [
        ("user", "You are in a kitchen."),
        ("assistant", "open fridge"),
        ("user", "The fridge is open."),
        ("assistant", "take apple"),
    ]
    assert sample["evaluation"] == {"score": 1.0, "is_correct": True, "num_turns": 2}
    assert sample["input"] == {"raw": '{"game": "kitchen"}', "reference": []}
    with pytest.raises(UsageError, match="nothing exported: no selected run has a test score"):
        export_eee(select("20261102T100000", tmp_path), tmp_path / "none", log=said.append)
    assert said[-1] == "run 20261102T100000: no test score, nothing to export"
    if EEE and Path(EEE).is_file():
        proc = validate(tmp_path / "out")
        assert proc.returncode == 0, proc.stdout[-3000:]
