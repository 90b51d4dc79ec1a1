"""`autorl ui`: every page and JSON endpoint over a ledger of fixture runs, a live run, and headless Chromium."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from autorl.grader.process import grader_log_path
from autorl.record.ledger import Ledger
from autorl.sandbox import bwrap_available
from autorl.ui import create_app

from .conftest import cli, echo_answers, write_stub_checkpoint
from .scripted_llm import serve_in_thread

SVG = "{http://www.w3.org/2000/svg}"
T0 = 1_790_000_000.0


def fixture_result(
    run_id: str,
    task: str,
    agent: str,
    model: str,
    day: str,
    scores: list[float],
    *,
    baseline: float = 25.0,
    test: float | None = None,
    success: bool = True,
    workspace: Path | None = None,
    flags: list[dict[str, Any]] | None = None,
    config_hash: str | None = None,
    sandbox: str = "bwrap",
    store_dir: Path | None = None,
) -> dict[str, Any]:
    """A result record as the runner writes it: the headline (``baseline``, ``best_score``, ``improvement``) is
    the held-out test, ``dev_*`` the best of k dev scores; the test baseline is one point below the dev one."""
    subs = [
        {
            "submission_id": i + 1,
            "status": "done",
            "score": s,
            "ci95": [s - 5, s + 5],
            "n": 300,
            "improvement": s - baseline,
            "model_path": f"/ws/output/v{i + 1}",
            "created_at": T0 + 30 * (i + 1),
            "finished_at": T0 + 30 * (i + 1) + 5,
            "error": None,
        }
        for i, s in enumerate(scores)
    ]
    best = max(scores) if scores else None
    test_improvement = None if test is None else test - baseline + 1
    row = {
        "run_id": run_id,
        "timestamp": f"{day} 10:00:00",
        "task": task,
        "agent": agent,
        "base_model": model,
        "baseline": None if test is None else baseline - 1,
        "best_score": test,
        "improvement": test_improvement,
        "improvement_ci95": None if test is None else [test_improvement - 4, test_improvement + 4],
        "p_value": None if test is None else 0.01,
        "success": success and test is not None,
        "dev_baseline": baseline,
        "dev_best": best,
        "dev_improvement": None if best is None else best - baseline,
        "dev_improvement_ci95": None if best is None else [best - baseline - 4, best - baseline + 4],
        "dev_k": len(scores),
        "best_submission": 1 if scores else None,
        "submissions": len(scores),
        "duration_s": 300.0,
        "workspace": str(workspace or f"/nowhere/{run_id}"),
        "test_baseline": None if test is None else baseline - 1,
        "test_score": test,
        "test_improvement": test_improvement,
        "test_improvement_ci95": None,
        "end_reason": "agent finished",
        "seed": 3,
        "config_hash": config_hash or "cfg" + run_id[-4:],
        "sandbox": sandbox,
    }
    return {
        "run_id": run_id,
        "row": row,
        "submissions": subs,
        "baseline": {"score": baseline, "ci95": [baseline - 4, baseline + 4], "n": 300},
        "test": None
        if test is None
        else {"submission_id": 1, "score": test, "ci95": [test - 4, test + 4], "baseline_score": baseline - 1},
        "agent": {"exit_code": 0},
        "run_dir": row["workspace"],
        "meta": {
            "agent_started": T0,
            "timeout_s": 300,
            "backend": "hf",
            "autorl_version": "0.1.0",
            "python": "3.11",
            "model_source": "local",
            "sandbox": {"mode": sandbox, "network": "on"},
            "store_dir": str(store_dir) if store_dir else None,
            "llm_usage": {"prompt_tokens": 1200, "completion_tokens": 300, "cost_usd": 0.02, "steps": 2}
            if agent == "llm"
            else None,
        },
        "audit": flags or [],
    }


def make_ledger(path: Path, results: list[dict[str, Any]]) -> Path:
    led = Ledger(path)
    for r in results:
        led.ingest(r)
    led.close()
    return path


@pytest.fixture
def ledger_db(tmp_path: Path) -> Path:
    ws = tmp_path / "ws-llm"
    ws.mkdir()
    (ws / "agent.log").write_text("line one\nTRAINING STEP 42 done\n")
    (ws / "grading_server.log").write_text("PLANTED BY THE AGENT\n")  # the grader's log is not read from here
    store = tmp_path / "grader-store"
    store.mkdir()
    grader_log_path(store).write_text("INFO: POST /submit 200\n")
    turns = [
        {
            "time": T0,
            "step": 1,
            "message": {
                "role": "assistant",
                "content": "I will train with SFT.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "shell", "arguments": json.dumps({"command": "python train.py"})},
                    }
                ],
            },
            "tool_results": [{"tool_call_id": "c1", "content": "loss 0.3"}],
            "usage": {"prompt_tokens": 700, "completion_tokens": 120},
            "latency_s": 1.5,
        },
        {"time": T0 + 1, "event": "compaction", "estimated_tokens": 9000},
        {
            "time": T0 + 2,
            "step": 2,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "submit", "arguments": '{"path": "output/v1"}'},
                    }
                ],
            },
            "tool_results": [{"tool_call_id": "c2", "content": '{"score": 40.0}'}],
            "usage": {"prompt_tokens": 500, "completion_tokens": 180},
            "latency_s": 2.0,
        },
    ]
    (ws / "trajectory.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns) + "not json\n")
    db = tmp_path / "autorl.db"
    results = [
        fixture_result(
            "20261101T100000", "arith", "example", "autorl:tiny", "2026-11-01", [40.0, 55.0, 50.0], test=52.0
        ),
        fixture_result("20261102T100000", "arith", "example", "autorl:tiny", "2026-11-02", [45.0, 61.0], test=58.0),
        fixture_result(
            "20261103T100000",
            "arith",
            "llm",
            "autorl:tiny",
            "2026-11-03",
            [30.0, 40.0],
            test=38.0,
            workspace=ws,
            store_dir=store,
            flags=[
                {"name": "test_overlap", "severity": "high", "detail": "12 items overlap", "evidence": {"items": 12}}
            ],
        ),
        fixture_result("20261104T100000", "arith", "llm", "autorl:tiny", "2026-11-04", [26.0], test=27.0),
        fixture_result("20261105T100000", "echo", "example", "stub", "2026-11-05", [], success=False, sandbox="none"),
    ]
    return make_ledger(db, results)


@pytest.fixture
def ui(ledger_db: Path) -> Iterator[httpx.Client]:
    with (
        serve_in_thread(create_app(ledger_db)) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as client,
    ):
        yield client


def run_ids(html: str) -> list[str]:
    return re.findall(r'<tr data-run="([^"]+)"', html)


def test_runs_table_filters_and_sorts(ui: httpx.Client) -> None:
    page = ui.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert run_ids(page.text) == [
        "20261105T100000",
        "20261104T100000",
        "20261103T100000",
        "20261102T100000",
        "20261101T100000",
    ]  # newest first
    assert "<script src" not in page.text and "http://" not in page.text.split("<main>")[0]  # nothing from elsewhere
    assert run_ids(ui.get("/?task=echo").text) == ["20261105T100000"]
    assert set(run_ids(ui.get("/?agent=llm").text)) == {"20261103T100000", "20261104T100000"}
    assert run_ids(ui.get("/?model=stub").text) == ["20261105T100000"]
    assert run_ids(ui.get("/?since=2026-11-02&until=2026-11-03").text) == ["20261103T100000", "20261102T100000"]
    assert run_ids(ui.get("/?status=no+test+score").text) == ["20261105T100000"]
    # only a run whose interval lies above 0 is green; the others say what their interval says
    assert set(run_ids(ui.get("/?status=beat+baseline").text)) == {
        "20261101T100000",
        "20261102T100000",
        "20261103T100000",
    }
    assert run_ids(ui.get("/?status=no+clear+change").text) == ["20261104T100000"]
    assert "status-success" not in page.text and page.text.count('class="status status-beat-baseline"') == 3
    by_improvement = run_ids(ui.get("/?sort=improvement&order=desc").text)
    assert by_improvement[:4] == ["20261102T100000", "20261101T100000", "20261103T100000", "20261104T100000"]
    assert by_improvement[-1] == "20261105T100000"  # no improvement at all: last either way
    assert run_ids(ui.get("/?sort=improvement&order=asc").text)[0] == "20261104T100000"
    assert run_ids(ui.get("/?sort=nonsense").text)[0] == "20261105T100000"
    assert "⚑" in page.text  # the audit flag shows
    fragment = ui.get("/fragment/runs?task=arith")
    assert fragment.status_code == 200 and len(run_ids(fragment.text)) == 4 and "<html" not in fragment.text
    api = ui.get("/api/runs?agent=example&sort=best_score&order=desc").json()
    assert [r["run_id"] for r in api] == ["20261102T100000", "20261101T100000", "20261105T100000"]
    assert api[0]["best_score"] == 58.0 and api[0]["status"] == "beat baseline" and api[2]["status"] == "no test score"


def test_runs_table_headline_is_test_dev_is_labelled_with_k_and_no_sandbox_is_marked(ui: httpx.Client) -> None:
    page = ui.get("/").text
    heads = re.findall(r"<th>(?:<a [^>]*>)?([^<]+?)(?: [▲▼])?(?:</a>)?</th>", page)
    assert heads[4:10] == [
        "sandbox",
        "test baseline",
        "test score",
        "improvement (test)",
        "95% CI",
        "dev: best of k, optimistic",
    ]
    cells = {
        rid: re.findall(r"<td[^>]*>(.*?)</td>", row)
        for rid, row in re.findall(r'<tr data-run="([^"]+)">(.*?)</tr>', page, re.S)
    }
    # the example run of 2026-11-02: test 58 against a test baseline of 24; dev best 61 against 25, of k=2
    assert cells["20261102T100000"][4:10] == [
        "bwrap",
        "24.00",
        "58.00",
        "34.00",
        "[+30.0, +38.0]",
        "36.00 <span class=muted>(k=2)</span>",
    ]
    # a run without a test score has no headline improvement (not its dev one)
    assert cells["20261105T100000"][7] == "&ndash;"
    assert "sandbox-none" in cells["20261105T100000"][4] and "sandbox-none" not in cells["20261102T100000"][4]
    unsandboxed = ui.get("/runs/20261105T100000").text
    assert "without a sandbox" in unsandboxed and "no headline: this run has no held-out test score" in unsandboxed
    run = ui.get("/runs/20261102T100000").text
    assert "Headline: held-out test" in run and "Dev: best of k on dev, optimistic" in run
    assert "without a sandbox" not in run


def svg_root(text: str) -> ET.Element:
    root = ET.fromstring(text)
    assert root.tag == f"{SVG}svg"
    return root


def by_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(f"{SVG}{tag}") if cls in (e.get("class") or "").split()]


def test_run_page_timeline_metadata_logs_and_trajectory(ui: httpx.Client) -> None:
    page = ui.get("/runs/20261103T100000")
    assert page.status_code == 200
    svg = svg_root(re.search(r"<svg.*?</svg>", page.text, re.S).group(0))  # type: ignore[union-attr]
    assert len(by_class(svg, "circle", "point")) == 2
    ids = {e.get("id") for e in svg.iter()}
    assert {"baseline", "baseline-band", "test-score", "deadline"} <= ids
    assert len(by_class(svg, "path", "best-line")) == 1
    for text in (
        "cfg0000",
        "bwrap (network on)",
        "1200 in / 300 out",
        "TRAINING STEP 42 done",
        "POST /submit 200",
        "test_overlap",
        "I will train with SFT.",
        "python train.py",
        "loss 0.3",
        "compaction",
        "grader log (grader's store)",
        "1 malformed line(s) skipped",
    ):
        assert text in page.text, text
    # the grader's log comes from the grader's store, never from the workspace the agent writes
    assert "PLANTED BY THE AGENT" not in page.text
    # what the agent wrote is framed as untrusted: its log and its trajectory
    assert page.text.count('<section class="untrusted">') == 2
    untrusted = "".join(re.findall(r'<section class="untrusted">.*?</section>', page.text, re.S))
    assert "TRAINING STEP 42 done" in untrusted and "I will train with SFT." in untrusted
    assert "POST /submit 200" not in untrusted
    assert page.text.count('<details class="turn"') == 2
    assert "2 turns, 1200 in / 300 out tokens" in page.text
    # a run without a trajectory or logs still renders
    other = ui.get("/runs/20261105T100000")
    assert other.status_code == 200 and "no scored submission yet" in other.text and "Trajectory" not in other.text
    missing = ui.get("/runs/nope")
    assert missing.status_code == 404 and "no run nope" in missing.text


def test_run_json_timeline_and_svg_export(ui: httpx.Client) -> None:
    d = ui.get("/api/runs/20261101T100000").json()
    assert d["live"] is False and d["row"]["dev_best"] == 55.0 and d["row"]["best_score"] == 52.0
    assert len(d["result"]["submissions"]) == 3
    tl = ui.get("/api/runs/20261101T100000/timeline").json()
    assert [p["t_s"] for p in tl["points"]] == [30.0, 60.0, 90.0] and [p["score"] for p in tl["points"]] == [40, 55, 50]
    assert tl["baseline"] == {"score": 25.0, "ci95": [21.0, 29.0]} and tl["test"]["score"] == 52.0
    assert ui.get("/api/runs/nope").status_code == 404 and ui.get("/api/runs/nope/timeline").status_code == 404
    exported = ui.get("/runs/20261101T100000/timeline.svg?download=1")
    assert exported.headers["content-type"].startswith("image/svg+xml")
    assert "attachment" in exported.headers["content-disposition"]
    assert len(by_class(svg_root(exported.text), "circle", "point")) == 3
    assert ui.get("/runs/nope/timeline.svg").status_code == 404


def test_compare_page_json_and_svg(ui: httpx.Client) -> None:
    cmp = ui.get("/api/compare?task=arith").json()
    assert cmp["metric"] == "improvement"  # the held-out test improvement, always
    by_agent = {g["agent"]: g for g in cmp["groups"]}
    # example: test improvements 52 - 24 and 58 - 24; t(0.975, 1) = 12.706204736174698
    assert by_agent["example"]["mean"] == pytest.approx(31.0) and by_agent["example"]["runs"] == 2
    assert by_agent["example"]["ci95"] == pytest.approx(
        [31.0 - 12.706204736174698 * 3.0, 31.0 + 12.706204736174698 * 3.0]
    )
    assert ui.get("/api/compare?task=arith&metric=improvement").json() == cmp  # no metric switch any more
    page = ui.get("/compare?task=arith")
    assert page.status_code == 200 and "counts as improvement 0" in page.text
    svg = svg_root(re.search(r"<svg.*?</svg>", page.text, re.S).group(0))  # type: ignore[union-attr]
    assert len(by_class(svg, "rect", "bar")) == 2 and len(by_class(svg, "path", "errorbar")) == 2
    assert len(by_class(svg, "circle", "run")) == 4
    exported = ui.get("/compare.svg?task=arith&download=1")
    assert "attachment" in exported.headers["content-disposition"]
    assert len(by_class(svg_root(exported.text), "rect", "bar")) == 2
    echo = ui.get("/api/compare?task=echo").json()
    assert echo["groups"][0]["mean"] == 0.0 and echo["groups"][0]["failures"] == 1  # a failed run counts as 0
    assert ui.get("/compare").status_code == 200  # the first task by default


def test_compare_counts_failures_never_switches_to_dev_and_never_pools_models_or_configs(tmp_path: Path) -> None:
    """One failed run once flipped the whole page to dev improvement, and was left out of the mean."""
    results = [
        fixture_result("20261101T100000", "arith", "a", "tiny", "2026-11-01", [40.0], test=30.0, config_hash="h1"),
        fixture_result("20261102T100000", "arith", "a", "tiny", "2026-11-02", [50.0], test=33.0, config_hash="h1"),
        fixture_result(
            "20261103T100000", "arith", "a", "tiny", "2026-11-03", [90.0], test=None, config_hash="h1", success=False
        ),  # dev 65 points up, no test score: a failure
        fixture_result("20261104T100000", "arith", "a", "other", "2026-11-04", [30.0], test=26.0, config_hash="h1"),
        fixture_result("20261105T100000", "arith", "a", "tiny", "2026-11-05", [30.0], test=28.0, config_hash="h2"),
    ]
    db = make_ledger(tmp_path / "autorl.db", results)
    with (
        serve_in_thread(create_app(db)) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as ui,
    ):
        cmp = ui.get("/api/compare?task=arith").json()
        page = ui.get("/compare?task=arith").text
    groups = {(g["base_model"], g["config_hash"]): g for g in cmp["groups"]}
    assert set(groups) == {("tiny", "h1"), ("other", "h1"), ("tiny", "h2")}
    main = groups[("tiny", "h1")]
    # by hand: test improvements 30 - 24 = 6, 33 - 24 = 9 and the failure as 0: mean 5, sd sqrt(21),
    # half-width t(0.975, 2) * sd / sqrt(3) with t(0.975, 2) = 4.302652729911275
    assert main["values"] == [6.0, 9.0, 0.0] and main["failures"] == 1 and main["runs"] == 3
    assert main["mean"] == pytest.approx(5.0)
    half = 4.302652729911275 * math.sqrt(21.0) / math.sqrt(3.0)
    assert main["ci95"] == pytest.approx([5.0 - half, 5.0 + half])
    assert groups[("other", "h1")]["values"] == [2.0] and groups[("other", "h1")]["ci95"] is None
    assert groups[("tiny", "h2")]["values"] == [4.0]
    assert "1 (33%)" in page and "counts as improvement 0" in page and page.count("<tr><td>a</td>") == 3


def test_results_formats(tmp_path: Path, ledger_db: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ledger_db, home / "autorl.db")
    env = {"AUTORL_HOME": str(home)}
    as_csv = cli("results", "--format", "csv", env=env, check=True).stdout.splitlines()
    assert as_csv[0].startswith("run_id,timestamp,task,agent,base_model,baseline,best_score,improvement")
    assert len(as_csv) == 6
    md = cli("results", "--format", "markdown", "--task", "arith", env=env, check=True).stdout.splitlines()
    assert md[0].startswith("| run_id | task |") and md[1].startswith("| --- |") and len(md) == 6
    assert len(json.loads(cli("results", "--format", "json", env=env, check=True).stdout)) == 5
    bad = cli("results", "--format", "xml", env=env)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --format must be table, csv, json or markdown, not 'xml'"
    ]


def test_a_live_run_shows_and_updates_without_reload(tmp_path: Path) -> None:
    home = tmp_path / "home"
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    agent = tmp_path / "agents" / "slow"
    agent.mkdir(parents=True)
    (agent / "config.yaml").write_text("name: slow\nstart: start.sh\n")
    root = Path(__file__).resolve().parent.parent
    (agent / "start.sh").write_text(f"""
ckpt() {{ "$AUTORL_PYTHON" -c "import sys; sys.path.insert(0, '{root}'); from pathlib import Path; \\
  from tests.conftest import write_stub_checkpoint, echo_answers; \\
  write_stub_checkpoint(Path('$OUTPUT_DIR') / '$1', echo_answers($2))"; }}
submit() {{ curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Authorization: Bearer $AUTORL_TOKEN" \\
  -H "Content-Type: application/json" -d "{{\\"model_path\\": \\"$OUTPUT_DIR/$1\\"}}"; }}
ckpt v1 8; submit v1; sleep 6; ckpt v2 14; submit v2; sleep 4
""")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from autorl.cli import main; main()",
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
            "--json",
        ],
        env={**os.environ, "AUTORL_HOME": str(home), "AUTORL_SANDBOX_RO": str(root / "tests")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        home.mkdir(parents=True, exist_ok=True)
        with (
            serve_in_thread(create_app(home / "autorl.db")) as port,
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as ui,
        ):
            seen: list[int] = []
            run_id = None
            end = time.time() + 120
            while time.time() < end and proc.poll() is None:
                live = ui.get("/api/live").json()
                if live:
                    run_id = live[0]["run_id"]
                    d = ui.get(f"/api/runs/{run_id}").json()
                    assert d["live"] is True and d["row"]["status"] == "running"
                    scored = [p for p in d["timeline"]["points"] if p["score"] is not None]
                    if not seen or len(scored) != seen[-1]:
                        seen.append(len(scored))
                    page = ui.get(f"/runs/{run_id}").text
                    assert 'data-live="1"' in page and "updates every 2 s" in page
                    listing = ui.get("/").text
                    if ui.get(f"/api/runs/{run_id}").json()["live"]:  # still live after the list was read
                        assert 'class="status status-running"' in listing
                time.sleep(0.5)
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            assert run_id is not None and seen[-1] == 2 and 1 in seen, seen  # it grew while we watched
            final = ui.get(f"/api/runs/{run_id}").json()
            assert final["live"] is False and final["row"]["dev_best"] == pytest.approx(70.0)
            assert ui.get("/api/live").json() == []
    finally:
        if proc.poll() is None:
            proc.kill()


# -- hostile run folders ------------------------------------------------------------------------------------

SECRET = "admin-token-7c41d9e2b0"  # stands for the grader's admin token in its config.json
XSS = [
    '<script>alert("xss")</script>',
    "<img src=x onerror=alert(1)>",
    '"><svg onload=alert(2)>',
    "']]></text><script>alert(3)</script>",
    "</pre></section><iframe src=//evil.example>",
]


def hostile_trajectory() -> str:
    lines = [
        {
            "step": XSS[0],
            "message": {
                "role": "assistant",
                "content": XSS[1],
                "tool_calls": [{"id": XSS[2], "function": {"name": XSS[3], "arguments": XSS[4]}}],
            },
            "tool_results": [XSS[0], {"content": XSS[1]}],
            "usage": {"prompt_tokens": XSS[2]},
            "latency_s": XSS[3],
        },
        {"event": XSS[4], "detail": XSS[0]},
        {"type": XSS[1], "payload": XSS[2]},
        {"event": 1},
        {"event": {"nested": [XSS[0]]}},
        [1, 2],
        42,
        "text",
        None,
        {"step": {"x": XSS[0]}, "message": {"tool_calls": "not a list", "content": [XSS[1]]}},
        {
            "step": 2,
            "message": {"tool_calls": [1, None, {"function": "f"}, {"function": {"name": 3, "arguments": {}}}]},
            "tool_results": "not a list",
            "usage": "lots",
            "latency_s": float("nan"),
        },
    ]
    text = "".join(json.dumps(x) + "\n" for x in lines)
    text += "[" * 100_000 + "\n" + '{"a":' * 5000 + "1" + "}" * 5000 + "\n" + '{"k": "' + "x" * 3_000_000 + '"}\n'
    return text + "\x00\xff garbage\n" + json.dumps({"step": 3, "message": {"content": "the last turn"}}) + "\n"


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, Any]:
    store = tmp_path / "grader-store"
    store.mkdir()
    config = store / "config.json"
    config.write_text(json.dumps({"admin_token": SECRET, "token": SECRET}))
    grader_log_path(store).write_text(f"{XSS[0]} grader line\n")
    flag = [{"name": "refusals", "severity": "high", "detail": XSS[1], "evidence": {}}]
    runs: dict[str, Path] = {}
    for name in ("links", "devices", "xss", "malformed", "dirlink"):
        runs[name] = tmp_path / "runs" / name
        runs[name].mkdir(parents=True)
    os.symlink(config, runs["links"] / "agent.log")
    os.symlink(config, runs["links"] / "trajectory.jsonl")
    os.symlink("/dev/zero", runs["devices"] / "agent.log")
    os.mkfifo(runs["devices"] / "trajectory.jsonl")
    (runs["xss"] / "agent.log").write_text("\n".join(XSS) + "\n")
    (runs["xss"] / "trajectory.jsonl").write_text(hostile_trajectory())
    (runs["malformed"] / "trajectory.jsonl").write_text(hostile_trajectory())
    (runs["malformed"] / "agent.log").write_bytes(b"\xff\xfe\x00" * 1000 + b"\n" + b"y" * 200_000)
    os.symlink(store, runs["dirlink"] / "logs")  # nothing reads through a linked directory either
    os.symlink(runs["links"] / "trajectory.jsonl", runs["dirlink"] / "transcript.jsonl")
    results = [
        fixture_result(
            "20261101T100000",
            "arith",
            "links",
            "tiny",
            "2026-11-01",
            [40.0],
            test=30.0,
            workspace=runs["links"],
            flags=flag,
        ),
        fixture_result(
            "20261102T100000",
            "arith",
            "devices",
            "tiny",
            "2026-11-02",
            [40.0],
            test=31.0,
            workspace=runs["devices"],
            flags=flag,
        ),
        fixture_result(
            "20261103T100000",
            XSS[0],
            XSS[1],
            XSS[2],
            "2026-11-03",
            [40.0],
            test=33.0,
            workspace=runs["xss"],
            flags=flag,
            store_dir=store,
            config_hash=XSS[3],
        ),
        fixture_result(
            "20261104T100000",
            "arith",
            "malformed",
            "tiny",
            "2026-11-04",
            [40.0],
            test=32.0,
            workspace=runs["malformed"],
            flags=flag,
        ),
        fixture_result(
            "20261105T100000",
            "arith",
            "dirlink",
            "tiny",
            "2026-11-05",
            [40.0],
            test=32.0,
            workspace=runs["dirlink"],
            flags=flag,
        ),
    ]
    return {"db": make_ledger(tmp_path / "autorl.db", results), "runs": runs, "store": store}


def every_page(ui: httpx.Client, run_ids: list[str], tasks: list[str]) -> list[httpx.Response]:
    paths = ["/", "/fragment/runs", "/api/runs", "/api/live", "/compare", "/api/compare", "/compare.svg"]
    for rid in run_ids:
        paths += [f"/runs/{rid}", f"/api/runs/{rid}", f"/api/runs/{rid}/timeline", f"/runs/{rid}/timeline.svg"]
    for task in tasks:
        q = httpx.QueryParams({"task": task})
        paths += [f"/compare?{q}", f"/compare.svg?{q}", f"/api/compare?{q}"]
    return [ui.get(p) for p in paths]


HOSTILE_IDS = ["20261101T100000", "20261102T100000", "20261103T100000", "20261104T100000", "20261105T100000"]


def test_links_devices_and_fifos_in_a_run_folder_neither_leak_nor_hang(hostile: dict[str, Any]) -> None:
    with (
        serve_in_thread(create_app(hostile["db"])) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as ui,
    ):
        responses = every_page(ui, HOSTILE_IDS, ["arith", XSS[0]])
        for r in responses:
            assert r.status_code == 200, (r.request.url, r.status_code)
            assert SECRET not in r.text, r.request.url
        links = ui.get("/runs/20261101T100000").text
        assert links.count("not shown (not a regular file, or reached through a link)") == 2
        devices = ui.get("/runs/20261102T100000").text  # /dev/zero and a FIFO with no writer: answered at once
        assert devices.count("not shown (not a regular file, or reached through a link)") == 2
        assert "trajectory.jsonl&#x27; is not a regular file" in devices
        assert "<li><b>refusals</b>" in devices  # the audit still shows
        dirlink = ui.get("/runs/20261105T100000").text
        assert "not shown (not a regular file" in dirlink and SECRET not in dirlink


def test_markup_anywhere_is_escaped_in_html_and_svg(hostile: dict[str, Any]) -> None:
    with (
        serve_in_thread(create_app(hostile["db"])) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as ui,
    ):
        responses = every_page(ui, HOSTILE_IDS, ["arith", XSS[0]])
        page = ui.get("/runs/20261103T100000")
    assert page.status_code == 200
    for text in ("the last turn", "grader line", "&lt;script&gt;alert(&quot;xss&quot;)&lt;/script&gt;"):
        assert text in page.text, text
    for r in responses:
        kind = r.headers["content-type"]
        if kind.startswith("application/json"):
            assert r.headers["x-content-type-options"] == "nosniff"
            continue
        for payload in XSS:
            assert payload not in r.text, (r.request.url, payload)
        if kind.startswith("image/svg+xml") or "<svg" in r.text:
            for svg in [r.text] if kind.startswith("image/svg") else re.findall(r"<svg.*?</svg>", r.text, re.S):
                root = svg_root(svg)  # still well-formed XML
                assert not [e for e in root.iter() if e.tag.endswith("script") or e.tag.endswith("foreignObject")]
                assert not [a for e in root.iter() for a in e.attrib if a.lower().startswith("on")]
        if kind.startswith("text/html") and "<html" in r.text:
            assert r.text.count("<script") == 1 and "<iframe" not in r.text
            nonce = re.search(r'<script nonce="([^"]+)">', r.text).group(1)  # type: ignore[union-attr]
            assert f"script-src 'nonce-{nonce}'" in r.headers["content-security-policy"]


def test_malformed_trajectory_lines_are_skipped_and_the_page_and_audit_render(hostile: dict[str, Any]) -> None:
    with (
        serve_in_thread(create_app(hostile["db"])) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as ui,
    ):
        page = ui.get("/runs/20261104T100000")
    assert page.status_code == 200
    assert "<li><b>refusals</b>" in page.text and "Headline: held-out test" in page.text
    assert "the last turn" in page.text and "event: 1" in page.text
    bad = int(re.search(r"(\d+) malformed line\(s\) skipped", page.text).group(1))  # type: ignore[union-attr]
    assert bad == 8  # [1, 2], 42, "text", null, the 100,000 "[", the deep object, the 3 MB line, the garbage
    assert "last part only" in page.text  # the 200 kB line of the log is cut to its tail


def test_requests_for_another_host_name_are_refused(ledger_db: Path) -> None:
    with (
        serve_in_thread(create_app(ledger_db, hosts=["dash.lan"])) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as ui,
    ):

        def status(host: str) -> int:
            return ui.get("/api/runs", headers={"Host": host}).status_code

        for host in (
            f"127.0.0.1:{port}",
            f"localhost:{port}",
            f"LOCALHOST:{port}",
            f"[::1]:{port}",
            f"dash.lan:{port}",
        ):
            assert status(host) == 200, host
        for host in (
            "evil.example",
            f"evil.example:{port}",
            f"127.0.0.1:{port + 1}",
            f"localhost.evil.example:{port}",
            f"127.0.0.1.nip.io:{port}",
            "127.0.0.1",
            f"localhost:{port}x",
        ):
            assert status(host) in (400, 421), host
        refused = ui.get("/runs/20261103T100000", headers={"Host": "evil.example"})
        assert refused.status_code == 421 and "TRAINING" not in refused.text
    import socket

    from autorl.ui.app import served_names

    assert served_names("10.1.2.3") == ["10.1.2.3"]
    assert socket.gethostname() in served_names("0.0.0.0") and "evil.example" not in served_names("0.0.0.0")


needs_bwrap = pytest.mark.skipif(
    bwrap_available()[0] is None, reason=f"bubblewrap cannot run here: {bwrap_available()[1]}"
)


@needs_bwrap
def test_an_agent_planting_links_in_its_workspace_gets_nothing_from_a_live_dashboard(tmp_path: Path) -> None:
    """The agent swaps its agent.log for a link to the grader's config.json (the admin token), its trajectory for
    /dev/zero, plants a FIFO and markup, while the dashboard serves the live run and then the finished one."""
    home = tmp_path / "home"
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    agent = tmp_path / "agents" / "plant"
    agent.mkdir(parents=True)
    (agent / "config.yaml").write_text("name: plant\nstart: start.sh\n")
    root = Path(__file__).resolve().parent.parent
    (agent / "start.sh").write_text(f"""
config="{home}/grader/echo_$(basename "$PWD")/config.json"
rm -f agent.log && ln -s "$config" agent.log
ln -s "$config" transcript.jsonl
ln -s /dev/zero trajectory.jsonl
mkfifo grading_server.log
printf '%s\\n' '<script>alert(1)</script>' > notes.txt
ckpt() {{ "$AUTORL_PYTHON" -c "import sys; sys.path.insert(0, '{root}'); from pathlib import Path; \\
  from tests.conftest import write_stub_checkpoint, echo_answers; \\
  write_stub_checkpoint(Path('$OUTPUT_DIR') / '$1', echo_answers($2))"; }}
submit() {{ curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Authorization: Bearer $AUTORL_TOKEN" \\
  -H "Content-Type: application/json" -d "{{\\"model_path\\": \\"$OUTPUT_DIR/$1\\"}}"; }}
ckpt v1 9; submit v1; sleep 6
""")
    home.mkdir(parents=True)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from autorl.cli import main; main()",
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
            "--sandbox",
            "bwrap",
            "--json",
        ],
        env={**os.environ, "AUTORL_HOME": str(home), "AUTORL_SANDBOX_RO": str(root / "tests")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[httpx.Response] = []
    try:
        with (
            serve_in_thread(create_app(home / "autorl.db")) as port,
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as ui,
        ):
            run_id = None
            live_pages = 0
            end = time.time() + 120
            while time.time() < end and proc.poll() is None:
                live = ui.get("/api/live").json()
                if live:
                    run_id = live[0]["run_id"]
                    ws = Path(live[0]["workspace"])
                    assert live[0]["sandbox"] == "bwrap"
                    if (ws / "agent.log").is_symlink():  # planted: the dashboard must not follow it
                        seen += every_page(ui, [run_id], ["echo"])
                        live_pages += 1
                        live_page = ui.get(f"/runs/{run_id}").text
                        assert "not shown (not a regular file" in live_page, live_page[-3000:]
                time.sleep(0.5)
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            assert run_id is not None and live_pages > 0
            seen += every_page(ui, [run_id], ["echo"])
            final = ui.get(f"/runs/{run_id}").text
    finally:
        if proc.poll() is None:
            proc.kill()
    ws = next((home / "runs" / "echo").iterdir())
    config = next((home / "grader").glob("echo_*/config.json"))
    assert os.readlink(ws / "agent.log") == str(config)  # the attack was real: the link names the admin token
    token = json.loads(config.read_text())["admin_token"]
    assert len(token) >= 16
    for r in seen:
        assert r.status_code == 200, (r.request.url, r.status_code)
        assert token not in r.text, r.request.url
    assert final.count("not shown (not a regular file, or reached through a link)") == 2
    assert '<section class="untrusted">' in final and "bwrap" in final


# -- headless Chromium ---------------------------------------------------------------------------------------


def chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Rows of RGB(A) pixels of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, ihdr = 8, b"", b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            ihdr = chunk
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", ihdr[:10])
    assert depth == 8 and color in (2, 6)
    bpp = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


def count_color(path: Path, rgb: tuple[int, int, int], tol: int = 40) -> int:
    width, bpp, rows = png_pixels(path)
    return sum(1 for row in rows for x in range(width) if all(abs(row[x * bpp + k] - rgb[k]) <= tol for k in range(3)))


@pytest.mark.skipif(chromium() is None, reason="headless Chromium is not installed (Debian: apt-get install chromium)")
def test_pages_render_in_headless_chromium(ui: httpx.Client, tmp_path: Path) -> None:
    exe = chromium()
    assert exe is not None
    base = str(ui.base_url).rstrip("/")

    def browse(path: str, *extra: str) -> subprocess.CompletedProcess[str]:
        profile = tmp_path / f"profile-{abs(hash((path, extra)))}"
        return subprocess.run(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-dev-shm-usage",
                f"--user-data-dir={profile}",
                "--window-size=1400,1100",
                "--enable-logging=stderr",
                "--v=0",
                *extra,
                base + path,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )

    dom = browse("/runs/20261101T100000", "--dump-dom", "--virtual-time-budget=3000")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('class="point"') == 3 and 'id="baseline"' in dom.stdout and 'id="test-score"' in dom.stdout
    assert "Uncaught" not in dom.stderr
    shot = tmp_path / "run.png"
    result = browse("/runs/20261101T100000", f"--screenshot={shot}")
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    assert count_color(shot, (0x1C, 0x7E, 0xD6), tol=30) > 100  # the submission points and the best-so-far line
    assert count_color(shot, (0xE8, 0x59, 0x0C), tol=30) > 40  # the test-score marker
    compare = tmp_path / "compare.png"
    result = browse("/compare?task=arith", f"--screenshot={compare}")
    assert result.returncode == 0 and compare.is_file()
    assert count_color(compare, (0x63, 0xB6, 0x73), tol=25) > 200  # the improvement bars (#2f9e44 at 75%)
    table = browse("/", "--dump-dom")
    assert table.stdout.count("<tr data-run=") == 5
    if os.environ.get("AUTORL_SCREENSHOT_DIR"):  # keep the pictures for a look
        for png in (shot, compare):
            shutil.copy(png, Path(os.environ["AUTORL_SCREENSHOT_DIR"]) / png.name)


def test_autorl_ui_command_serves_the_ledger(tmp_path: Path, ledger_db: Path) -> None:
    from autorl.procs.group import free_port

    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ledger_db, home / "autorl.db")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from autorl.cli import main; main()", "ui", "--port", str(port)],
        env={**os.environ, "AUTORL_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        end = time.time() + 60
        while True:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/", timeout=5, trust_env=False)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.time() < end, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.3)
        assert page.status_code == 200 and len(run_ids(page.text)) == 5
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    bad = cli("ui", "--port", "0", env={"AUTORL_HOME": str(home)})
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --port must be between 1 and 65535, not 0"
    ]
    # a busy port: one line, and no URL printed as if it served
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        busy = taken.getsockname()[1]
        proc_busy = cli("ui", "--port", str(busy), env={"AUTORL_HOME": str(home)})
    assert proc_busy.returncode == 2 and proc_busy.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{busy}: Address already in use"
    ], proc_busy.stderr
    unknown = cli("ui", "--host", "no-such-host.invalid", env={"AUTORL_HOME": str(home)})
    assert unknown.returncode == 2 and len(unknown.stderr.strip().splitlines()) == 1
    assert unknown.stderr.startswith("error: cannot listen on no-such-host.invalid:8501")


HOSTILE = "code/<img src=x onerror=\"document.title='pwned'\">.jsonl"


@pytest.mark.skipif(chromium() is None, reason="headless Chromium is not installed (Debian: apt-get install chromium)")
def test_decoys_and_what_differs_render_in_headless_chromium(tmp_path: Path) -> None:
    """The run page of a run that took the bait lists each use of a decoy (an agent-written file name shown as
    text, never markup); the runs table says which runs took it and which only read one; the compare page says
    what differs."""
    exe = chromium()
    assert exe is not None
    bait = fixture_result("20261201T100000", "arith", "cheat", "tiny", "2026-12-01", [60.0], test=70.0)
    bait["row"].update(
        decoys=["decoop:x", "decoy:token:test-answers@grader:path", f"decoy:canary:dev-answers@{HOSTILE}"],
        decoys_read=["decoy:opened:upstream-key"],
        timeout_s=300.0,
    )
    bait["meta"]["decoys"] = {"planted": [{"name": "test-answers"}, {"name": "dev-answers"}], "watch": "inotify"}
    clean = fixture_result("20261202T100000", "arith", "cheat", "tiny", "2026-12-02", [40.0], test=30.0)
    clean["row"].update(
        decoys=[], decoys_read=["decoy:opened:test-answers"], timeout_s=120.0, config_hash=bait["row"]["config_hash"]
    )
    old = fixture_result("20261203T100000", "arith", "honest", "tiny", "2026-12-03", [40.0], test=31.0)
    db = make_ledger(tmp_path / "autorl.db", [bait, clean, old])

    with serve_in_thread(create_app(db)) as port:

        def browse(path: str, *extra: str) -> subprocess.CompletedProcess[str]:
            profile = tmp_path / f"profile-{abs(hash((path, extra)))}"
            return subprocess.run(
                [
                    exe,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-dev-shm-usage",
                    f"--user-data-dir={profile}",
                    "--window-size=1400,2600",
                    *extra,
                    f"http://127.0.0.1:{port}{path}",
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )

        dom = browse("/runs/20261201T100000", "--dump-dom", "--virtual-time-budget=2000").stdout
        shot, clean_shot = tmp_path / "bait.png", tmp_path / "clean.png"
        assert browse("/runs/20261201T100000", f"--screenshot={shot}").returncode == 0
        assert browse("/runs/20261202T100000", f"--screenshot={clean_shot}").returncode == 0
        clean_dom = browse("/runs/20261202T100000", "--dump-dom").stdout
        table = browse("/", "--dump-dom").stdout
        compare = browse("/compare?task=arith", "--dump-dom").stdout
    touched = re.search(r'<ul id="decoys-touched">(.*?)</ul>', dom, re.S)
    assert touched is not None and touched.group(1).count("<li>") == 3
    # the agent's file name is text: no element came of it, and the page title is the page's own
    assert "<img" not in dom and "&lt;img src=x" in touched.group(1) and "<title>pwned" not in dom
    assert "the agent took the bait of 2 planted decoy(s)" in dom and "unreadable entry" in dom
    assert "No bait taken." not in dom and "read 1 decoy(s)" in dom
    # a run that only read a decoy says so, apart, and took no bait
    assert "No bait taken." in clean_dom and 'id="decoys-touched"' not in clean_dom and "read 1 decoy(s)" in clean_dom
    # the bait's dark red shows on the page of the run that took it, and not on the other
    assert (
        count_color(shot, (0x82, 0x07, 0x1E), tol=40) > 50 and count_color(clean_shot, (0x82, 0x07, 0x1E), tol=40) < 5
    )
    cells = dict(re.findall(r'<tr data-run="([^"]+)">.*?<td class="audit wrap">(.*?)</td>', table, re.S))
    assert "took the bait (2)" in cells["20261201T100000"] and "read (1)" in cells["20261202T100000"]
    assert "bait" not in cells["20261202T100000"]
    assert "no decoys" in cells["20261203T100000"]
    assert "not pooled, the runs differ in timeout_s" in compare
    if os.environ.get("AUTORL_SCREENSHOT_DIR"):
        shutil.copy(shot, Path(os.environ["AUTORL_SCREENSHOT_DIR"]) / shot.name)


def _headless(exe: str, tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{abs(hash((url, extra)))}"
    return subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            "--window-size=1400,900",
            *extra,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


#: the badge of a run whose interval lies above 0 (``.status-beat-baseline``), and nothing else's
GREEN_BADGE = (0xDA, 0xFB, 0xE1)


@pytest.mark.skipif(chromium() is None, reason="headless Chromium is not installed (Debian: apt-get install chromium)")
def test_a_run_at_minus_18_points_is_never_a_green_success_in_headless_chromium(tmp_path: Path) -> None:
    """The runs page showed a green "success" on runs at -18.0, -16.7 and -6.7 points: "success" only says a run
    finished with a test score. The badge now says what the interval says, the table has both columns, and only
    a run whose interval lies above 0 is green."""
    exe = chromium()
    assert exe is not None
    worse = fixture_result("20261201T100000", "arith", "a", "tiny", "2026-12-01", [40.0], test=7.0)
    worse["row"].update(improvement=-18.0, improvement_ci95=[-25.0, -11.0], beat_baseline=False)
    flat = fixture_result("20261202T100000", "arith", "a", "tiny", "2026-12-02", [40.0], test=20.0)
    flat["row"].update(improvement=-6.7, improvement_ci95=[-14.0, 0.6], beat_baseline=False)
    better = fixture_result("20261203T100000", "arith", "a", "tiny", "2026-12-03", [60.0], test=50.0)
    better["row"].update(improvement=26.0, improvement_ci95=[19.0, 33.0], beat_baseline=True)
    shots = {}
    for name, results in (("losers", [worse, flat]), ("all", [worse, flat, better])):
        db = make_ledger(tmp_path / f"{name}.db", results)
        with serve_in_thread(create_app(db)) as port:
            url = f"http://127.0.0.1:{port}"
            dom = _headless(exe, tmp_path, url + "/", "--dump-dom").stdout
            shot = tmp_path / f"{name}.png"
            assert _headless(exe, tmp_path, url + "/", f"--screenshot={shot}").returncode == 0
            run_dom = _headless(exe, tmp_path, url + "/runs/20261201T100000", "--dump-dom").stdout
        shots[name] = shot
        badges = dict(
            re.findall(r'<tr data-run="([^"]+)">.*?<span class="status status-[a-z-]+">([^<]+)</span>', dom, re.S)
        )
        assert badges["20261201T100000"] == "below baseline" and badges["20261202T100000"] == "no clear change"
        assert "success" not in badges.values()
        assert "finished with a test score" in dom and "beat baseline (95% CI above 0)" in dom
        cells = re.search(r'<tr data-run="20261201T100000">(.*?)</tr>', dom, re.S).group(1)  # type: ignore[union-attr]
        assert re.findall(r"<td>(yes|no)</td>", cells) == ["yes", "no"]  # test-scored, not beating the base
        assert '<span class="status status-below-baseline">below baseline</span>' in run_dom
    assert count_color(shots["losers"], GREEN_BADGE, tol=6) == 0
    assert count_color(shots["all"], GREEN_BADGE, tol=6) > 50  # the one run that beat its baseline


def test_the_compare_page_pools_only_runs_on_the_same_items(tmp_path: Path) -> None:
    """Runs on 20, 50 and all items once shared a config hash and a row of the compare page."""
    results = []
    for i, limit in enumerate([20, 20, 50, None]):
        r = fixture_result(
            f"2026110{i + 1}T100000", "arith", "a", "tiny", f"2026-11-0{i + 1}", [40.0], test=30.0, config_hash="h1"
        )
        r["row"]["limit"] = limit
        results.append(r)
    db = make_ledger(tmp_path / "autorl.db", results)
    with (
        serve_in_thread(create_app(db)) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False) as ui,
    ):
        cmp = ui.get("/api/compare?task=arith").json()
        page = ui.get("/compare?task=arith").text
    assert sorted((g["limit"] or 0, g["runs"]) for g in cmp["groups"]) == [(0, 1), (20, 2), (50, 1)]
    assert cmp["differs"] == {"arith · a": ["limit"]}
    assert "items per split" in page and "not pooled, the runs differ in limit" in page
