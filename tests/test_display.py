"""What a researcher reads: one p-value rule on every screen, full precision in every file."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from autorl.record.display import fmt_ci, fmt_p, fmt_signed
from autorl.record.ledger import Ledger
from autorl.record.result import RunResult
from autorl.record.row import RunRow, run_row

from .conftest import cli

TINY_P = 4.65e-06


@pytest.mark.parametrize(
    ("p", "shown"),
    [
        (TINY_P, "4.7e-06"),
        (0.0321, "0.032"),
        (0.5, "0.5"),
        (1.0, "1"),
        (0.001, "0.001"),
        (0.00099, "9.9e-04"),
        (0.0, "<1e-300"),
        (5e-324, "<1e-300"),
        (None, "-"),
        (float("nan"), "-"),
        (-0.1, "-"),
        (True, "-"),
        ("0.1", "-"),
    ],
)
def test_one_p_value_rule(p: object, shown: str) -> None:
    assert fmt_p(p) == shown


def test_differences_and_intervals_keep_their_sign() -> None:
    assert fmt_signed(2.5) == "+2.5" and fmt_signed(-0.04, 2) == "-0.04" and fmt_signed(None) == "-"
    assert fmt_ci([-7.14, 7.14]) == "[-7.1, +7.1]" and fmt_ci([1.0]) == "-" and fmt_ci(["a", 1]) == "-"


def _record_tiny_p(home: Path) -> None:
    ledger = Ledger(home / "autorl.db")
    row = RunRow(
        "20260101-000000-tiny",
        "2026-01-01 00:00:00",
        "arith",
        "a",
        "m",
        baseline=20.0,
        best_score=22.123456789,
        improvement=2.123456789,
        improvement_ci95=[0.123456789, 4.5],
        p_value=TINY_P,
        dev_k=1,
    )
    ledger.ingest({"row": row.record(), "submissions": []})
    ledger.export_csv(home / "results.csv")
    ledger.close()


def test_files_keep_full_precision_and_screens_share_the_rule(home: Path) -> None:
    """p = 4.65e-06 was written as 0.0 in results.csv and `--format csv`: files keep every digit."""
    home.mkdir(parents=True)
    _record_tiny_p(home)
    with (home / "results.csv").open() as f:
        row = next(csv.DictReader(f))
    assert float(row["p_value"]) == TINY_P and float(row["improvement"]) == 2.123456789
    assert json.loads(row["improvement_ci95"]) == [0.123456789, 4.5]
    out = cli("results", "--format", "csv", check=True).stdout
    assert float(next(csv.DictReader(io.StringIO(out)))["p_value"]) == TINY_P
    assert json.loads(cli("results", "--json", check=True).stdout)[0]["p_value"] == TINY_P
    table = cli("results", check=True, env={"COLUMNS": "200"}).stdout
    assert "4.7e-06" in table and "<0.001" not in table
    md = cli("results", "--format", "markdown", check=True).stdout
    assert "4.7e-06" in md


def test_the_dashboard_shows_p_by_the_same_rule(tmp_path: Path) -> None:
    import httpx

    from autorl.ui import create_app

    from .scripted_llm import serve_in_thread

    _record_tiny_p(tmp_path)
    with (
        serve_in_thread(create_app(tmp_path / "autorl.db")) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as client,
    ):
        page = client.get("/runs/20260101-000000-tiny").text
    assert "<dt>p value</dt><dd>4.7e-06</dd>" in page and "0.00</dd>" not in page.split("p value")[1][:40]


def _run_result(tmp_path: Path) -> RunResult:
    """A run's result as the run's finish builds it: the row from the grader's state and test evaluation."""
    subs = [
        {"submission_id": 1, "status": "done", "score": 40.0, "improvement": 15.0, "improvement_ci95": [5.0, 25.0]},
        {"submission_id": 2, "status": "done", "score": 55.0, "improvement": 30.0, "improvement_ci95": [20.0, 40.0]},
        {"submission_id": 3, "status": "failed", "score": None},
    ]
    dev_base = {"split": "dev", "score": 25.0, "config_hash": "c0ffee"}
    state = {
        "submissions": subs,
        "best": {"submission_id": 2, "score": 55.0},
        "baseline_score": 25.0,
        "baseline": dev_base,
    }
    test = {
        "status": "done",
        "score": 52.0,
        "baseline_score": 20.0,
        "improvement": 32.0,
        "improvement_ci95": [24.9, 39.1],
        "p_value": TINY_P,
    }
    row = run_row(
        run_id="20261201T100000-a1",
        started=0.0,
        finished=60.0,
        task="arith",
        agent="example",
        base_model="autorl:tiny",
        workspace=str(tmp_path),
        seed=0,
        sandbox="bwrap",
        state=state,
        test=test,
        outcome={"timed_out": True, "exit_code": None, "reason": "timeout"},
    )
    return RunResult(row.run_id, row.record(), subs, dev_base, test, {"exit_code": None}, tmp_path)


def test_a_run_result_reads_in_a_notebook(tmp_path: Path) -> None:
    """The repr was a 5,080-character dump; now one line with the test headline, and named figures."""
    r = _run_result(tmp_path)
    text = repr(r)
    assert text == (
        "<RunResult 20261201T100000-a1 arith agent=example model=autorl:tiny: test 20.0 -> 52.0, "
        "improvement +32.0 [+24.9, +39.1], p=4.7e-06, k=2>"
    )
    assert (r.test_baseline, r.test_score, r.improvement, r.improvement_ci95, r.p_value) == (
        20.0,
        52.0,
        32.0,
        (24.9, 39.1),
        TINY_P,
    )
    assert (r.dev_baseline, r.dev_best, r.dev_improvement, r.dev_improvement_ci95, r.k) == (
        25.0,
        55.0,
        30.0,
        (20.0, 40.0),
        2,
    )
    html = r._repr_html_()
    assert "<th>p</th><td>4.7e-06</td>" in html and "dev (best of 2, optimistic)" in html and "#2: 55.0" in html
    # the ambiguous names keep their values and say what to use instead
    with pytest.warns(DeprecationWarning, match="dev_baseline_record"):
        assert r.baseline == {"split": "dev", "score": 25.0, "config_hash": "c0ffee"}
    with pytest.warns(DeprecationWarning, match="test_baseline"):
        assert r.baseline_score == 20.0
    # result.json keeps its key
    assert r.to_dict()["baseline"] == r.dev_baseline_record and "dev_baseline_record" not in r.to_dict()


def test_a_run_without_a_test_score_says_so_and_hostile_rows_do_not_break_the_repr(tmp_path: Path) -> None:
    r = _run_result(tmp_path)
    r.row.update(baseline=None, best_score=None, improvement=None, improvement_ci95=None, p_value=None)
    assert "no test score, improvement - -, p=-, k=2" in repr(r)
    # a row ingested from another machine's result.json: wrong types, markup in names
    r.row.update(improvement="32", improvement_ci95=[1, "x"], p_value=True, dev_k="2", agent="<script>x</script>")
    r.submissions.append({"submission_id": "<b>", "status": "done", "score": "NaN"})
    assert r.improvement is None and r.improvement_ci95 is None and r.p_value is None and r.k == 0
    assert "<script>" not in r._repr_html_() and "&lt;script&gt;" in r._repr_html_()


def _record_runs(home: Path, ids: list[str]) -> None:
    ledger = Ledger(home / "autorl.db")
    for i, run_id in enumerate(ids):
        row = RunRow(
            run_id,
            "2026-01-01 00:00:00",
            "gsm8k",
            "claude-code-with-a-long-name",
            "Qwen/Qwen2.5-0.5B-Instruct",
            baseline=20.0,
            best_score=52.0,
            improvement=-32.0 + i,
            improvement_ci95=[-24.9, 39.1],
            p_value=TINY_P,
            dev_k=12,
            success=True,
            sandbox="bwrap",
            dev_best=61.0,
            dev_improvement=35.5,
        )
        ledger.ingest({"row": row.record(), "submissions": []})
    ledger.close()


def test_results_fit_80_columns_and_show_each_run_id_or_a_prefix_that_names_it(home: Path) -> None:
    """At 80 columns each of 15 columns was 1-2 characters, and a long run id crowded out every other cell: the
    default is the compact table, an id longer than 20 characters shows as the shortest prefix no other run id
    starts with (at least 12), which `audit` and `recover` take; `--wide` shows one block per run."""
    home.mkdir(parents=True)
    ids = ["20261201T100000", "20261201T100000-1", "20261201T100000-an-unusually-long-ingested-id"]
    shown = {ids[0]: ids[0], ids[1]: ids[1], ids[2]: "20261201T100000-a"}
    _record_runs(home, ids)
    for width in ("80", "60"):
        out = cli("results", check=True, env={"COLUMNS": width}).stdout
        lines = out.splitlines()
        assert max(len(line) for line in lines) <= int(width), out
        for run_id in ids:
            assert any(line.split() and line.split()[0] == shown[run_id] for line in lines), (run_id, out)
        assert "4.7e-06" in out and "--wide" in out and "dev best" not in out and "run ids shortened" in out
        assert "no clear" in out and "success" not in out  # the interval spans 0: no "ok" for -32 points
    wide = cli("results", "--wide", check=True, env={"COLUMNS": "80"}).stdout
    assert max(len(line) for line in wide.splitlines()) <= 80, wide
    assert "dev best (k)" in wide and "61.00 (12)" in wide and all(shown[i] in wide for i in ids)
    assert cli("recover", shown[ids[2]], check=True).stdout.startswith(f"run {ids[2]}: already recorded")


def test_an_empty_home_says_no_runs_yet(home: Path) -> None:
    proc = cli("results", env={"COLUMNS": "400"})
    assert proc.returncode == 0 and proc.stdout.strip() == f"no runs yet in {home / 'autorl.db'}"
    # on a narrow screen the path, one to copy, moves whole to a line of its own
    narrow = cli("results", env={"COLUMNS": "40"}).stdout.splitlines()
    assert narrow[0] == "no runs yet in" and narrow[1].strip() == str(home / "autorl.db")
    assert cli("results", "--json", check=True).stdout.strip() == "[]"


def test_runs_with_different_time_budgets_are_not_pooled_and_the_page_says_why(tmp_path: Path) -> None:
    """The compare page pooled a 120 s run with a 60 s run; a study cell pools by the same key."""
    import httpx

    from autorl.sweep.report import build_report
    from autorl.ui import create_app

    from .scripted_llm import serve_in_thread

    rows = []
    ledger = Ledger(tmp_path / "autorl.db")
    for i, (budget, improvement) in enumerate([(120.0, 10.0), (120.0, 12.0), (60.0, 2.0), (None, 4.0)]):
        row = RunRow(
            f"2026010{i + 1}T000000",
            f"2026-01-0{i + 1} 00:00:00",
            "arith",
            "a",
            "tiny",
            baseline=20.0,
            best_score=20.0 + improvement,
            improvement=improvement,
            success=True,
            config_hash="h1",
            sandbox="bwrap",
            timeout_s=budget,
            dev_k=1,
        )
        rows.append(row.to_dict())
        ledger.ingest({"row": row.record(), "submissions": []})
    ledger.close()
    with (
        serve_in_thread(create_app(tmp_path / "autorl.db")) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as ui,
    ):
        cmp = ui.get("/api/compare?task=arith").json()
        page = ui.get("/compare?task=arith").text
        svg = ui.get("/compare.svg?task=arith").text
    by_budget = {g["timeout_s"]: g["values"] for g in cmp["groups"]}
    assert by_budget == {120.0: [10.0, 12.0], 60.0: [2.0], None: [4.0]}  # an older row without a budget: alone
    assert cmp["differs"] == {"arith · a": ["timeout_s"]}
    assert "not pooled, the runs differ in timeout_s" in page and "2.0 min" in page and "60 s" in page
    assert "a · tiny · h1 · 120 s" in svg and "a · tiny · h1 · 60 s" in svg
    # a study's report pools by the same key
    assert sorted(len(c["per_run"]) for c in build_report(rows)["cells"]) == [1, 1, 2]


def test_a_study_result_reads_in_a_notebook_and_flattens_to_records(tmp_path: Path) -> None:
    from autorl.sweep import StudyResult
    from autorl.sweep.report import build_report

    rows = [
        RunRow(
            f"2026010{i}T000000",
            "2026-01-01 00:00:00",
            "arith",
            agent,
            "tiny",
            improvement=imp,
            improvement_ci95=None if imp is None else [imp - 7.1, imp + 7.1],
            success=imp is not None,
            config_hash="h1",
            timeout_s=120.0,
            seed=i,
            run_key=f"k{i}",
        ).to_dict()
        for i, (agent, imp) in enumerate([("a", 3.0), ("a", 3.0), ("b", None)])
    ]
    missing = [
        {
            "agent": "b",
            "task": "arith",
            "model": "tiny",
            "seed": 1,
            "run_key": "k9",
            "status": "failed",
            "reasons": ["node lost"],
        }
    ]
    study = StudyResult({**build_report(rows, missing), "sweep": "s1"})
    assert study["cells"][0]["runs"] == 2  # still the report dict
    text = repr(study)
    assert text.splitlines()[0] == (
        "<StudyResult s1: 2 cells, 3 runs, 1 without a result; mean test improvement [95% CI] per cell:"
    )
    assert "a on arith (tiny, 120 s)  +3.0  [+3.0, +3.0]  2 runs, 0 failed" in text
    assert "b on arith (tiny, 120 s)  +0.0  -  1 runs, 1 failed" in text
    records = study.to_records()
    assert [r["status"] for r in records] == ["done", "done", "done", "failed"]
    assert {k for r in records for k, v in r.items() if isinstance(v, list | dict)} == set()  # flat: a DataFrame
    assert records[0]["improvement_ci95_low"] == pytest.approx(-4.1) and records[3]["end_reason"] == "node lost"
    # test-scored beside beat baseline, and the items each run was scored on, in every record
    assert [(r["success"], r["beat_baseline"]) for r in records] == [
        (True, False),
        (True, False),
        (False, False),
        (None, None),
    ]
    assert [r["limit"] for r in records] == [None] * 4
    assert "<td>a on arith (tiny, 120 s)</td>" in study._repr_html_()


def test_the_runs_table_shows_run_id_p_audit_and_study_and_the_run_page_a_clean_audit(tmp_path: Path) -> None:
    """The runs table had no run id, p-value or study column, and a clean run's audit result appeared nowhere."""
    import re

    import httpx

    from autorl.ui import create_app

    from .scripted_llm import serve_in_thread

    _record_tiny_p(tmp_path)
    ledger = Ledger(tmp_path / "autorl.db")
    flagged = RunRow(
        "20260102T000000", "2026-01-02 00:00:00", "arith", "b", "m", improvement=1.0, sweep="s1", p_value=0.0321
    ).record()
    ledger.ingest(
        {
            "row": {**flagged, "decoys": 3},
            "submissions": [],
            "audit": [{"name": "test_overlap", "severity": "high", "detail": "12 items", "evidence": []}],
        }
    )
    ledger.close()
    with (
        serve_in_thread(create_app(tmp_path / "autorl.db")) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as client,
    ):
        table = client.get("/").text
        clean = client.get("/runs/20260101-000000-tiny").text
        flagged_page = client.get("/runs/20260102T000000").text
    heads = re.findall(r"<th>(?:<a [^>]*>)?([^<]+?)(?: [▲▼])?(?:</a>)?</th>", table)
    assert heads[0] == "run" and {"p", "audit", "study"} <= set(heads) and "duration" not in heads
    cells = {
        rid: dict(zip(heads, re.findall(r"<td[^>]*>(.*?)</td>", row), strict=True))
        for rid, row in re.findall(r'<tr data-run="([^"]+)">(.*?)</tr>', table, re.S)
    }
    assert cells["20260101-000000-tiny"]["run"].endswith(">20260101-000000-tiny</a>")
    assert cells["20260101-000000-tiny"]["p"] == "4.7e-06" and cells["20260101-000000-tiny"]["audit"] == (
        "no flags · <span class='muted decoys'>no decoys</span>"
    )
    assert cells["20260102T000000"]["p"] == "0.032" and cells["20260102T000000"]["study"] == "s1"
    assert (
        "test_overlap(high)</span> · <span class='decoys'>decoys: unreadable record"
        in cells["20260102T000000"]["audit"]
    )
    # names wrap, the run id and the numbers do not: every cell's class says which
    assert '<td class="wrap">m</td>' in table and '<td><a href="/runs/20260102T000000">' in table
    assert "td.wrap { white-space: normal;" in table
    assert "<h2>Audit</h2><p id='audit'>no flags</p>" in clean
    assert "<ul id='audit'><li><b>test_overlap</b> (high)" in flagged_page


def test_the_grader_log_panel_leaves_out_the_orchestrators_polling(tmp_path: Path) -> None:
    """The grader-log panel was mostly `GET /admin/state` lines."""
    from autorl.grader.process import grader_log_path
    from autorl.ui.data import grader_log
    from autorl.ui.run_page import _log_html

    store = tmp_path / "store"
    store.mkdir()
    poll = 'INFO:     127.0.0.1:40000 - "GET /admin/state HTTP/1.1" 200 OK\n'
    submit = 'INFO:     127.0.0.1:40001 - "POST /submit HTTP/1.1" 200 OK\n'
    grader_log_path(store).write_text(poll * 50 + "evaluating submission 1\n" + submit + poll * 20)
    log = grader_log(str(store))
    assert log is not None and log["hidden"] == 70
    assert log["text"] == "evaluating submission 1\n" + submit
    html = _log_html("grader", log)
    assert "70 polling lines (GET /admin/state) not shown" in html and "/admin/state HTTP" not in html


def test_a_study_cell_of_equal_runs_does_not_show_a_zero_width_interval() -> None:
    """Two equal improvements gave "[+0.0, +0.0]" although each run's own interval was +-7.1."""
    from autorl.ui.sweep import sweep_page

    dots = [{"value": 3.0, "seed": s, "success": True, "href": f"/runs/r{s}", "run_ci95": [-4.1, 10.1]} for s in (0, 1)]
    cell = {
        "agent": "a",
        "config_hash": "h1",
        "mean": 3.0,
        "ci95": [3.0, 3.0],
        "runs": 2,
        "failures": 0,
        "success_rate": 1.0,
        "dots": dots,
    }
    data = {
        "sweep": "s1",
        "rows": [{"task": "arith", "model": "tiny", "agents": [cell]}],
        "comparisons": [],
        "missing": [],
        "failure_rule": "x",
    }
    page = sweep_page(data)
    assert "no spread over runs (equal improvements); each run&#x27;s own interval ±7.1" in page
    assert "[+3.0, +3.0]" not in page
    cell["ci95"] = [1.0, 5.0]
    assert "[+1.0, +5.0]" in sweep_page(data)


def test_the_run_timeline_shows_the_test_point_against_its_own_baseline(tmp_path: Path) -> None:
    """The timeline drew the dev baseline and the test point on one axis without the test baseline."""
    import xml.etree.ElementTree as ET

    from autorl.record.charts import timeline_svg
    from autorl.record.timeline import timeline_of_result

    from .test_ui import fixture_result

    result = fixture_result(
        "20261101T100000", "arith", "a", "tiny", "2026-11-01", [40.0, 55.0], baseline=25.0, test=52.0
    )
    result["test"]["baseline_score"] = 12.0  # the test split is harder than dev: a reference far from dev's
    root = ET.fromstring(timeline_svg(timeline_of_result(result)))
    ns = "{http://www.w3.org/2000/svg}"
    by_id = {e.get("id"): e for e in root.iter() if e.get("id")}
    dev_y, test_y = float(by_id["baseline"].get("y1") or 0), float(by_id["test-baseline"].get("y1") or 0)
    assert test_y > dev_y  # lower on the chart: 12 < 25
    texts = [t.text or "" for t in root.iter(f"{ns}text")]
    assert "dev baseline 25" in texts and "test baseline 12" in texts and "test 52" in texts


def test_the_compare_chart_title_fits_its_figure() -> None:
    """The title started over the plot (x=290 of 860) and its ~90 characters ran past the right edge."""
    import xml.etree.ElementTree as ET

    from autorl.record.charts import compare_svg

    group = {
        "agent": "a",
        "base_model": "tiny",
        "config_hash": "h1",
        "timeout_s": 120.0,
        "mean": 3.0,
        "ci95": [1.0, 5.0],
        "values": [1.0, 5.0],
        "runs": 2,
        "failures": 0,
        "failure_rate": 0.0,
    }
    root = ET.fromstring(compare_svg({"task": "arith", "groups": [group]}))
    title = next(t for t in root.iter("{http://www.w3.org/2000/svg}text") if t.get("class") == "title")
    # 14 px bold text averages under 8 px a character
    assert float(title.get("x") or 0) + 8 * len(title.text or "") <= float(root.get("width") or 0)
