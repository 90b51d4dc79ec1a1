"""The figures the field reads, against hand-computed runs: the process metrics (the reference harness's names),
from the grader's records only."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from autorl.record.metrics import EFFICIENCY_COLUMNS, METRIC_NAMES, metric_means, process_metrics
from autorl.record.row import CSV_COLUMNS

from .conftest import cli, echo_answers, write_stub_checkpoint
from .scripted_llm import serve_in_thread
from .test_run import agent_folder, run_json


def _sub(i: int, at: float, status: str = "done", score: float | None = None, digest: str = "x") -> dict[str, Any]:
    return {
        "submission_id": i,
        "created_at": at,
        "status": status,
        "score": score,
        "content_hash": f"{digest}{i}" if digest == "x" else digest,
    }


def test_process_metrics_by_hand() -> None:
    # the agent starts at t=1000 with a 600 s budget and runs 450 s; dev baseline 25
    subs = [
        _sub(3, 1100.0, score=40.0),
        _sub(1, 1010.0, status="failed"),
        _sub(2, 1030.0, score=25.0, digest="base-digest"),  # the base model submitted as is
        _sub(4, 1200.0, score=30.0),
        _sub(5, 1300.0, score=55.0),
        _sub(6, 1400.0, status="failed", digest="base-digest"),
    ]
    # two refused attempts (a path outside the output folder at t=1005, an unreadable time: last)
    refused = [{"created_at": 1005.0, "kind": "outside_output"}, {"created_at": None, "kind": "invalid_checkpoint"}]
    m = process_metrics(
        subs,
        best={"submission_id": 5, "score": 55.0},
        baseline_score=25.0,
        agent_started=1000.0,
        deadline=1600.0,
        agent_duration_s=450.0,
        base_hash="base-digest",
        refusals=refused,
    )
    assert m.valid_submission_rate == pytest.approx(4 / 8, abs=1e-4)
    # attempts in order: refused (1005), 1 failed (1010), 2 scored (1030)
    assert m.first_valid_idx == 2 and m.first_valid_delay == pytest.approx(30.0)
    assert m.score_trajectory == [[30.0, 25.0], [100.0, 40.0], [200.0, 30.0], [300.0, 55.0]]
    # 25 is not above the baseline of 25: the first improvement is submission 3, at 100 s
    assert m.time_to_first_improvement == pytest.approx(100.0) and m.time_to_best == pytest.approx(300.0)
    # 25 -> 40 up, 40 -> 30 down, 30 -> 55 up
    assert m.monotonic_ratio == pytest.approx(2 / 3, abs=1e-4)
    assert m.copy_model_count == 2
    assert m.time_used_ratio == pytest.approx(0.75) and m.last_submit_gap == pytest.approx(200.0)


def test_process_metrics_of_a_run_without_submissions_or_clock() -> None:
    m = process_metrics([], best=None, baseline_score=None, agent_started=None, deadline=None, agent_duration_s=None)
    assert m.to_dict() == {**dict.fromkeys(METRIC_NAMES), "score_trajectory": [], "copy_model_count": 0}
    # a record's odd values (a string time, an infinite score) are left out, never raised on
    odd = [{"submission_id": 1, "created_at": "soon", "status": "done", "score": float("inf")}]
    m = process_metrics(odd, best=None, baseline_score=0.0, agent_started=0.0, deadline=10.0, agent_duration_s=99.0)
    assert m.valid_submission_rate == 0.0 and m.score_trajectory == [] and m.time_used_ratio == 1.0


def test_metric_means_over_seeds() -> None:
    rows = [
        {"monotonic_ratio": 0.5, "copy_model_count": 1, "time_to_best": None},
        {"monotonic_ratio": 1.0, "copy_model_count": 0, "time_to_best": 12.0},
        {},
    ]
    means = metric_means(rows)
    assert means["monotonic_ratio"] == 0.75 and means["copy_model_count"] == 0.5 and means["time_to_best"] == 12.0
    assert means["first_valid_idx"] is None and "score_trajectory" not in means


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One recorded run of a scripted agent whose submissions are known: the base model copied as is (25 on dev,
    20 on test), a broken checkpoint, a better one (60 on dev, 70 on test), a worse one on dev that is better
    on test (40, 90), submitted twice; it forges its own metrics files too."""
    tmp = tmp_path_factory.mktemp("numbers")
    home = tmp / "home"
    base = write_stub_checkpoint(tmp / "stub-base", {**echo_answers(5), **echo_answers(6, "test")})
    victim = tmp / "victim.txt"
    victim.write_text("untouched")
    agent = agent_folder(
        tmp / "agents",
        "numbers",
        f"""
        ln -s {victim} "$WORKSPACE/card.md"; ln -s {victim} "$WORKSPACE/trajectory.svg"
        cp -rL "$MODEL_PATH" "$OUTPUT_DIR/copy"
        submit copy
        mkdir -p "$OUTPUT_DIR/bad" && echo x > "$OUTPUT_DIR/bad/config.json"
        submit bad
        make_ckpt better 12 null 21
        submit better
        make_ckpt worse 8 null 27
        submit worse
        submit worse
        mkdir -p "$WORKSPACE/reports"
        echo '{{"valid_submission_rate": 1.0, "copy_model_count": 0}}' > "$WORKSPACE/reports/metrics.json"
        echo '{{"row": {{"valid_submission_rate": 1.0, "copy_model_count": 0}}}}' > "$WORKSPACE/result.json"
    """,
        env_vars={"CHAT_MODEL": "configured-model"},
    )
    row = run_json(
        home, "--agent", str(agent), "--task", "echo", "--model", str(base), "--timeout", "60", "--backend", "scripted"
    )
    result = json.loads((Path(str(row["workspace"])) / "result.json").read_text())
    db = sqlite3.connect(Path(result["meta"]["store_dir"]) / "grader.db")
    created = [r[0] for r in db.execute("SELECT created_at FROM submissions ORDER BY id")]
    db.close()
    return {"home": home, "row": row, "result": result, "created": created, "victim": victim}


@pytest.mark.e2e
def test_process_metrics_of_a_scripted_run(scripted_run: dict[str, Any]) -> None:
    row, meta, created = scripted_run["row"], scripted_run["result"]["meta"], scripted_run["created"]
    start, deadline = meta["agent_started"], meta["deadline"]
    statuses = [s["status"] for s in scripted_run["result"]["submissions"]]
    # the broken checkpoint was refused at the door: an attempt, not a submission
    assert statuses == ["done", "done", "done", "done"] and len(meta["refusals"]) == 1
    # the agent's forged figures are not the run's: the grader's records are
    assert row["valid_submission_rate"] == 0.8 and row["copy_model_count"] == 1
    assert row["first_valid_idx"] == 0 and row["first_valid_delay"] == pytest.approx(created[0] - start, abs=1e-3)
    assert row["score_trajectory"] == [
        [pytest.approx(created[i] - start, abs=1e-3), score]
        for i, score in ((0, 25.0), (1, 60.0), (2, 40.0), (3, 40.0))
    ]
    assert row["time_to_first_improvement"] == pytest.approx(created[1] - start, abs=1e-3)
    assert row["time_to_best"] == row["time_to_first_improvement"] and row["best_submission"] == 2
    # 25 -> 60 up, 60 -> 40 down, 40 -> 40 not down
    assert row["monotonic_ratio"] == pytest.approx(2 / 3, abs=1e-4)
    assert row["last_submit_gap"] == pytest.approx(deadline - created[3], abs=1e-3)
    ran = scripted_run["result"]["agent"]["duration_s"]
    assert row["time_used_ratio"] == pytest.approx(ran / (deadline - start), abs=1e-3)
    assert scripted_run["result"]["row"]["valid_submission_rate"] == 0.8


@pytest.mark.e2e
def test_process_metrics_in_results_csv_and_the_run_page(scripted_run: dict[str, Any]) -> None:
    # the new columns come last, after every column an older results.csv had
    tail = (
        *METRIC_NAMES,
        "beat_baseline",
        "driver_model",
        "test_best_of_k",
        "test_best_of_k_k",
        "test_best_of_k_submission",
        "test_selection_gap",
        *EFFICIENCY_COLUMNS,
        "off_target",
        "off_target_regressed",
        "timeout_s",
        "infra_failure",
        "judge_model",
        "judge_prompt_hash",
        "judge_samples",
        "limit",
    )
    assert CSV_COLUMNS[-len(tail) :] == tail
    proc = cli("results", "--format", "csv", env={"AUTORL_HOME": str(scripted_run["home"])})
    assert proc.returncode == 0, proc.stderr
    (line,) = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert float(line["valid_submission_rate"]) == 0.8 and line["copy_model_count"] == "1"
    assert len(json.loads(line["score_trajectory"])) == 4

    import httpx

    from autorl.ui.app import create_app

    with (
        serve_in_thread(create_app(scripted_run["home"] / "autorl.db")) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as client,
    ):
        page = client.get(f"/runs/{scripted_run['row']['run_id']}").text
    assert "<h2>Process (the grader's record)</h2>" in page and "valid submission rate" in page
    assert "finished with a test score (success)" in page and "beat baseline (95% CI above 0)" in page


# -- success named for what it is, beat_baseline ----------------------------------------------------------
def test_beat_baseline_is_the_headline_interval_above_zero() -> None:
    from autorl.record.display import beat_baseline
    from autorl.record.migrate import upgrade_row

    assert beat_baseline([0.5, 9.0]) is True
    # an interval touching or crossing 0, none, or a malformed one: no
    for ci in ([0.0, 3.0], [-1.0, 3.0], None, [1.0], ["1", 2.0], [True, 2.0], "[1, 2]"):
        assert beat_baseline(ci) is False, ci
    # rows recorded before the column get it from their headline interval (never from the dev one)
    assert upgrade_row({"dev_k": 2, "improvement_ci95": [1.0, 2.0]})["beat_baseline"] is True
    old = {
        "baseline": 20.0,
        "best_score": 30.0,
        "improvement": 10.0,
        "improvement_ci95": [2.0, 18.0],
        "test_score": None,
    }
    assert upgrade_row(old)["beat_baseline"] is False


def test_study_report_counts_beat_baseline_apart_from_success() -> None:
    from autorl.sweep.report import build_report

    def row(seed: int, imp: float | None, ci: list[float] | None) -> dict[str, Any]:
        return {
            "run_id": f"r{seed}",
            "task": "t",
            "agent": "a",
            "base_model": "m",
            "config_hash": "c",
            "seed": seed,
            "improvement": imp,
            "improvement_ci95": ci,
            "success": imp is not None,
            "beat_baseline": bool(ci and ci[0] > 0),
            "monotonic_ratio": 0.25 * seed,
        }

    # a finished run with a zero gain is a "success" (it has a test score), and does not beat the baseline
    (cell,) = build_report([row(0, 0.0, [-2.0, 2.0]), row(1, 6.0, [1.0, 11.0]), row(2, None, None)])["cells"]
    assert cell["success_rate"] == pytest.approx(2 / 3) and cell["beat_baseline_rate"] == pytest.approx(1 / 3)
    assert [r["beat_baseline"] for r in cell["per_run"]] == [False, True, False]
    assert cell["process_means"]["monotonic_ratio"] == pytest.approx(0.25)


@pytest.mark.e2e
def test_a_scripted_run_beats_its_baseline_and_says_what_success_means(scripted_run: dict[str, Any]) -> None:
    row = scripted_run["row"]
    # by hand: the best on dev (submission 2) answers 21 of 30 test items against the base's 6: 70 - 20
    assert row["improvement"] == pytest.approx(50.0) and row["improvement_ci95"][0] > 0
    assert row["success"] is True and row["beat_baseline"] is True
    # it called no model through the gateway: the driver model is the one its configuration names
    assert row["driver_model"] == "configured-model"


# -- driver_model ---------------------------------------------------------------------------------------------
def test_driver_model_from_the_gateway_record_most_tokens_first() -> None:
    from autorl.record.metrics import configured_model, driver_model

    summary = {
        "by_model": {
            "small": {"calls": 9, "prompt_tokens": 100, "completion_tokens": 20},
            "big": {"calls": 2, "prompt_tokens": 5000, "completion_tokens": 900},
            "refused-only": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0},
            "odd": "not counts",
        }
    }
    # the model the agent's configuration names does not override what it called
    assert driver_model(summary, "configured") == "big, small"
    assert driver_model({"by_model": {}}, "configured") == driver_model(None, "configured") == "configured"
    assert driver_model(None) is None
    assert configured_model({"MODEL_NAME": "m2", "CHAT_MODEL": "m1"}) == "m1"
    assert configured_model({"CHAT_MODEL": ""}) is None


def test_study_cells_are_split_by_driver_model() -> None:
    from autorl.sweep.report import build_report

    rows = [
        {
            "run_id": f"r{i}",
            "task": "t",
            "agent": "llm",
            "base_model": "m",
            "config_hash": "c",
            "seed": i,
            "improvement": 1.0,
            "improvement_ci95": None,
            "success": True,
            "driver_model": d,
        }
        for i, d in enumerate(["gpt-a", "gpt-a", "gpt-b"])
    ]
    cells = build_report(rows)["cells"]
    assert sorted((c["driver_model"], c["runs"]) for c in cells) == [("gpt-a", 2), ("gpt-b", 1)]


# -- the peers' protocol: best of k on test ----------------------------------------------------------------------
def test_best_of_k_by_hand() -> None:
    from autorl.record.metrics import test_best_of_k
    from autorl.runs.collect import distinct_scored

    tests = [
        {"submission_id": 2, "status": "done", "score": 70.0},
        {"submission_id": 1, "status": "done", "score": 20.0},
        {"submission_id": 4, "status": "done", "score": 90.0},
        {"submission_id": 5, "status": "failed", "score": None},
        {"submission_id": 6, "status": "done", "score": 90.0},
    ]
    assert test_best_of_k(tests, {"status": "done", "score": 70.0}) == {
        "test_best_of_k": 90.0,
        "test_best_of_k_k": 4,
        "test_best_of_k_submission": 4,
        "test_selection_gap": 20.0,
    }
    assert set(test_best_of_k(None, None).values()) == {None}
    subs = [
        {"submission_id": i, "status": st, "score": sc, "content_hash": h, "duplicate_of": d}
        for i, st, sc, h, d in [
            (1, "done", 1.0, "a", None),
            (2, "done", 2.0, "b", None),
            (3, "failed", None, "c", None),
            (4, "done", 2.0, "b", 2),
            (5, "done", 3.0, "a", None),
            (6, "done", 0.0, "d", None),
        ]
    ]
    # the best (2) is scored already; a submission whose content was seen is not scored again
    assert distinct_scored(subs, exclude=2) == [1, 6]


@pytest.mark.e2e
def test_best_of_k_on_test_beside_an_unchanged_headline(scripted_run: dict[str, Any]) -> None:
    row = scripted_run["row"]
    # the dev-selected checkpoint (2) is the headline; the worse one on dev (3) is the best on test: 90 - 70
    assert row["best_submission"] == 2 and row["best_score"] == pytest.approx(70.0)
    assert row["test_best_of_k"] == pytest.approx(90.0) and row["test_best_of_k_submission"] == 3
    # three distinct contents (the copy of the base, 2 and 3; 4 repeats 3): each scored on test once
    assert row["test_best_of_k_k"] == 3 and row["test_selection_gap"] == pytest.approx(20.0)
    db = sqlite3.connect(Path(scripted_run["result"]["meta"]["store_dir"]) / "grader.db")
    tested = sorted(r[0] for r in db.execute("SELECT submission_id FROM test_scores"))
    db.close()
    assert tested == [1, 2, 3]


@pytest.mark.e2e
def test_no_test_all_and_an_off_target_regression(tmp_path: Path) -> None:
    base = write_stub_checkpoint(tmp_path / "stub-base", {**echo_answers(5), **echo_answers(6, "test")})
    # the best on dev (a) forgot every test item the base knew
    agent = agent_folder(
        tmp_path / "agents",
        "two",
        """
        make_ckpt a 12
        submit a
        make_ckpt b 8 null 27
        submit b
    """,
    )
    home = tmp_path / "home"
    bad = cli(
        "run",
        "--agent",
        str(agent),
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "60",
        "--backend",
        "scripted",
        "--off-target",
        "no-such-task",
        env={"AUTORL_HOME": str(home)},
    )
    assert bad.returncode != 0 and "no-such-task" in bad.stderr and "Traceback" not in bad.stderr
    row = run_json(
        home,
        "--agent",
        str(agent),
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "60",
        "--backend",
        "scripted",
        "--no-test-all",
        "--no-audit",
        "--off-target",
        "echo",
        "--off-target",
        "basics",
        "--off-target",
        "echo",
    )
    assert row["best_score"] == pytest.approx(0.0) and row["test_best_of_k"] is None
    assert row["test_best_of_k_k"] is None and row["test_selection_gap"] is None
    echo, basics = row["off_target"]
    # by hand: the base answers 6 of 30 test items (20), the selected checkpoint none: -20, interval below 0
    assert echo["task"] == "echo" and echo["base"] == pytest.approx(20.0) and echo["selected"] == 0.0
    assert echo["change"] == pytest.approx(-20.0) and echo["ci95"][1] < 0 and echo["regressed"] is True
    # the built-in general set runs offline; neither stub answers it
    assert basics["task"] == "basics" and basics["base"] == 0.0 and basics["regressed"] is False
    assert row["off_target_regressed"] is True
    card = (Path(str(row["workspace"])) / "card.md").read_text()
    assert "| echo: change [95% CI] | -20 [" in card and "REGRESSED" in card


def test_the_basics_set_is_answerable() -> None:
    from autorl.builtin.basics import Basics, _questions
    from autorl.scoring import Item

    questions = _questions()
    assert len(questions) == 300 and len({q for _, q, _ in questions}) > 200
    bench = Basics({})
    for qid, question, answer in questions[:8]:
        item = Item(id=qid, input={"question": question}, reference=str(answer))
        assert bench.score(item, f" {answer}\n") == 1.0 and bench.score(item, f" {answer + 1}") == 0.0


def test_the_builtin_model_answers_some_of_basics_and_never_trained_on_its_items(
    tiny_model: Path, tmp_path: Path
) -> None:
    """The Quick start's `--off-target basics` read 0.00 before and after: a check that could never show a loss.
    The built-in model learns two of its skills from questions of its own, none of them one of the set's."""
    from autorl.builtin.basics import Basics, question_texts
    from autorl.builtin.tiny_model import general_example
    from autorl.evaluation.run import evaluate_model
    from autorl.inference.hf import HFBackend

    bench = Basics({})
    bench.prepare_eval_data(tmp_path)
    record = evaluate_model(bench, HFBackend(), tiny_model, split="test", hidden_dir=tmp_path)
    assert record.score > 0.0 and record.ci95[0] > 0.0, record.score
    rng, avoid = random.Random(1), question_texts()
    drawn = [general_example(rng, avoid)[0] for _ in range(2000)]
    assert not any(q.removeprefix("Q: ").removesuffix("\nA:") in avoid for q in drawn)


def test_a_study_spec_turns_the_peer_figure_off() -> None:
    from autorl.errors import UsageError
    from autorl.sweep.keys import Resolver
    from autorl.sweep.spec import expand_options

    base = {"agent": "llm", "task": "arith", "model": "autorl:tiny", "timeout": 60}
    resolver = Resolver()
    (off,) = expand_options({**base, "test_all": False})
    plain = resolver.identify(expand_options(base)[0])
    cell = resolver.identify(off)
    assert "--no-test-all" in cell.run_args() and "--no-test-all" not in plain.run_args()
    # existing studies keep their keys; turning it off is another key
    assert "test_all" not in plain.identity and cell.run_key != plain.run_key
    with pytest.raises(UsageError, match="test_all must be true or false"):
        expand_options({**base, "test_all": "no"})


# -- efficiency -------------------------------------------------------------------------------------------------
def test_efficiency_by_hand() -> None:
    from autorl.record.metrics import efficiency
    from autorl.runs.gpus import GpuAssignment, parse_gpus

    # 2 agent GPUs for 1800 s, 1 grader GPU for the run's 3600 s: 7200 GPU-seconds, 2 GPU-hours; +6 points, $3
    e = efficiency(gpu_counts={"agent": 2, "grader": 1}, agent_s=1800.0, run_s=3600.0, improvement=6.0, cost_usd=3.0)
    assert e == {
        "agent_gpu_seconds": 3600.0,
        "grader_gpu_seconds": 3600.0,
        "improvement_per_gpu_hour": 3.0,
        "improvement_per_usd": 2.0,
    }
    # no GPU, no cost, no headline: no ratio (never a division by 0)
    none = efficiency(gpu_counts={"agent": 0, "grader": 0}, agent_s=10.0, run_s=20.0, improvement=6.0, cost_usd=0.0)
    assert none["agent_gpu_seconds"] == 0.0 and none["improvement_per_gpu_hour"] is None
    assert none["improvement_per_usd"] is None
    assert efficiency(gpu_counts=None, agent_s=None, run_s=None, improvement=None, cost_usd=None) == dict.fromkeys(e)
    # what each role had: --gpus as given; without it the agent sees every GPU and the grader uses one
    assert parse_gpus("agent=0-2,grader=3", [(str(i), f"u{i}") for i in range(4)]).counts(4) == {
        "agent": 3,
        "grader": 1,
    }
    assert GpuAssignment().counts(8) == {"agent": 8, "grader": 1} and GpuAssignment().counts(0) == {
        "agent": 0,
        "grader": 0,
    }


@pytest.mark.e2e
def test_efficiency_of_a_scripted_run(scripted_run: dict[str, Any]) -> None:
    from autorl.inference.gpu_share import visible_gpus

    row = scripted_run["row"]
    n = len(visible_gpus())
    ran = scripted_run["result"]["agent"]["duration_s"]
    assert row["agent_gpu_seconds"] == pytest.approx(n * ran, abs=0.1)
    # no model called through the gateway: no cost, no gain per dollar
    assert row["llm_cost_usd"] is None and row["improvement_per_usd"] is None
    if n == 0:
        assert row["grader_gpu_seconds"] == 0.0 and row["improvement_per_gpu_hour"] is None


# -- the run card -----------------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_run_card_and_its_trajectory(scripted_run: dict[str, Any]) -> None:
    import xml.etree.ElementTree as ET

    ws = Path(str(scripted_run["row"]["workspace"]))
    # the agent left links at both names: they were replaced, never written through
    assert scripted_run["victim"].read_text() == "untouched"
    assert not (ws / "card.md").is_symlink() and not (ws / "trajectory.svg").is_symlink()
    card = (ws / "card.md").read_text()
    for needed in (
        "| test score | 70 |",
        "| improvement | 50 |",
        "| beat baseline (95% CI above 0) | yes |",
        "| driver model | configured-model |",
        "| dev k (scored submissions) | 4 |",
        "| best of k on test (optimistic peer figure) | 90 |",
        "| selection gap | 20 |",
        "scored once on the hidden test split",
        "| sandbox |",
        "| config hash |",
        "| autorl |",
        "| copy model count | 1 |",
        "![score trajectory](trajectory.svg)",
    ):
        assert needed in card, needed
    svg = ET.parse(ws / "trajectory.svg").getroot()
    assert svg.tag.endswith("svg") and svg.find(".//{http://www.w3.org/2000/svg}line[@id='baseline']") is not None
    # its times: "recorded" was the process's start, before the run began; now the start, the end and the record
    # each in its place, in order, beside when the agent started and its deadline
    meta, row = scripted_run["result"]["meta"], scripted_run["result"]["row"]
    utc = lambda t: dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")  # noqa: E731
    assert (
        f"started {row['timestamp']} UTC, finished {utc(meta['finished_at'])}, recorded {utc(meta['recorded_at'])}"
        in card
    )
    started = dt.datetime.strptime(row["timestamp"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc).timestamp()
    assert started - 1 <= meta["agent_started"] < meta["finished_at"] <= meta["recorded_at"]
    assert meta["finished_at"] - started == pytest.approx(row["duration_s"], abs=1.5)
    assert (
        f"| agent started | {utc(meta['agent_started'])} |" in card
        and f"| agent deadline | {utc(meta['deadline'])} |" in card
    )
    assert meta["prepare_s"] is not None and "| preparing the model and data before the run, s |" in card


def test_a_card_never_stops_a_run(tmp_path: Path) -> None:
    from autorl.record.card import card_markdown, write_card

    # odd values are shown on one line, without breaking the table
    odd = {"row": {"agent": "a|b\nc", "driver_model": "x`y", "run_id": "r"}, "meta": {"sandbox": "not a table"}}
    assert "| driver model | x'y |" in card_markdown(odd)
    # a run folder that cannot be written: no card, nothing raised
    (tmp_path / "file").write_text("")
    assert write_card({**odd, "run_dir": str(tmp_path / "file" / "below")}) is None
    assert write_card({"row": {}}) is None


# -- the noise floor --------------------------------------------------------------------------------------------
def test_spread_by_hand() -> None:
    from autorl.evaluation.noise import spread

    s = spread([50.0, 52.0, 54.0])
    assert s["mean"] == 52.0 and s["sd"] == pytest.approx(2.0) and s["range"] == 4.0 and s["min"] == 50.0


def test_noise_floor_of_a_greedy_evaluation_is_zero_and_kept(tmp_path: Path) -> None:
    from autorl.evaluation.noise import noise_path, read_floor

    home = tmp_path / "home"
    model = write_stub_checkpoint(tmp_path / "ckpt", echo_answers(9))
    proc = cli(
        "noise",
        "--task",
        "echo",
        "--model",
        str(model),
        "--repeats",
        "3",
        "--backend",
        "scripted",
        "--json",
        env={"AUTORL_HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    # greedy: three equal scores, item by item; each repeat had its own seed
    assert record["greedy"] is True and record["deterministic"] is True
    assert record["scores"] == [45.0, 45.0, 45.0] and record["sd"] == 0.0 and record["seeds"] == [0, 1, 2]
    floor = read_floor(home, "echo", str(model))
    assert floor is not None and floor["sd"] == 0.0 and floor["repeats"] == 3
    # a kept file that is not a record is no floor
    noise_path(home, "echo", str(model), "dev").write_text("[1, 2")
    assert read_floor(home, "echo", str(model)) is None
    bad = cli(
        "noise",
        "--task",
        "echo",
        "--model",
        str(model),
        "--repeats",
        "1",
        "--backend",
        "scripted",
        env={"AUTORL_HOME": str(home)},
    )
    assert bad.returncode != 0 and "--repeats must be between 2" in bad.stderr and "Traceback" not in bad.stderr


def test_study_card_shows_each_cell_beside_its_noise_floor(tmp_path: Path) -> None:
    from autorl.record.card import write_study_card
    from autorl.sweep.report import build_report

    rows = [
        {
            "run_id": f"r{i}",
            "task": "arith",
            "agent": "llm",
            "base_model": "autorl:tiny",
            "config_hash": "c",
            "seed": i,
            "improvement": imp,
            "improvement_ci95": [imp - 1, imp + 1],
            "success": True,
            "beat_baseline": imp > 1,
            "driver_model": "gpt-x",
            "off_target": [{"task": "basics"}],
            "off_target_regressed": i == 0,
            "monotonic_ratio": 0.5,
        }
        for i, imp in enumerate([4.0, 6.0])
    ]
    report = build_report(rows)
    report.update(sweep="s1")
    report["cells"][0]["noise_floor"] = {"sd": 0.75}
    path = write_study_card(report, tmp_path, {"agent": "llm", "seed": [0, 1]})
    assert path is not None
    card = path.read_text()
    # by hand: mean 5, beat baseline 2 of 2, off-target regressed 1 of 2
    assert "| arith | autorl:tiny | llm (gpt-x) | 2 | 1 | 1 | 5 |" in card
    assert "| 0.75 | 0.5 |" in card and '"seed": [' in card
    assert write_study_card(report, tmp_path / "missing" / "deeper") is not None  # parents are made
    (tmp_path / "file").write_text("")
    assert write_study_card(report, tmp_path / "file") is None


def test_every_recorded_run_gets_its_card_and_a_card_failure_loses_nothing(tmp_path: Path) -> None:
    """The card is written by the ledger's record step (a Python ``autorl.run()``, ``autorl recover``, a study's
    run and a re-audit all record through it); a folder where it cannot be written still gets the record."""
    from autorl.record.ledger import Ledger, record_run

    from .test_ui import fixture_result

    ws = tmp_path / "ws"
    ws.mkdir()
    result = fixture_result(
        "20261201T100000", "arith", "a", "tiny", "2026-12-01", [40.0, 55.0], test=52.0, workspace=ws
    )
    record_run(result, tmp_path / "home")
    assert "| test score | 52 |" in (ws / "card.md").read_text() and (ws / "trajectory.svg").read_text().startswith(
        "<svg"
    )
    other = tmp_path / "other"
    (other / "card.md").mkdir(parents=True)  # the agent left a folder at the card's name
    record_run(
        fixture_result("20261202T100000", "arith", "a", "tiny", "2026-12-02", [40.0], test=41.0, workspace=other),
        tmp_path / "home",
    )
    ledger = Ledger(tmp_path / "home" / "autorl.db")
    assert [r["run_id"] for r in ledger.rows()] == ["20261201T100000", "20261202T100000"]
    ledger.close()
    assert (other / "result.json").is_file() and (other / "card.md").is_dir()


def test_a_notebook_shows_the_run_with_the_dashboards_trajectory(tmp_path: Path) -> None:
    from autorl.record.result import RunResult

    from .test_ui import fixture_result

    r = fixture_result("20261201T100000", "arith", "a", "tiny", "2026-12-01", [40.0, 55.0], test=52.0)
    result = RunResult(
        r["run_id"], r["row"], r["submissions"], r["baseline"], r["test"], r["agent"], tmp_path, r["meta"]
    )
    html = result._repr_html_()
    assert html.count('class="point"') == 2 and 'id="test-score"' in html and "<table>" in html
    result.submissions.append({"submission_id": 3, "status": "done", "score": 1.0, "created_at": "soon"})
    assert "<table>" in result._repr_html_() and "<svg" not in result._repr_html_()  # drawn or left out, never raised
