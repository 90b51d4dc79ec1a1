"""A run's items, base beside checkpoint: ``autorl items``, the reader of the grader's per-item files and the run
page's items section (paged, escaped; rendered in headless Chromium), over real recorded runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from autorl.errors import UsageError
from autorl.grader.items import per_item_path, read_run_items
from autorl.record.ledger import Ledger
from autorl.ui import create_app
from autorl.ui.items import PER_PAGE, TEXT_LIMIT

from .conftest import cli
from .recorded_run import BIDI, ESCAPE, LOSSES, MARKUP, WINS, RecordedRuns
from .scripted_llm import serve_in_thread
from .test_ui import chromium, fixture_result, make_ledger


def items(runs: RecordedRuns, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    return cli("items", *args, env={**runs.env, "COLUMNS": str(columns)})


def blocks(text: str) -> list[tuple[str, str]]:
    """(outcome, item id) of each item block `autorl items` printed, in order."""
    return re.findall(r"^(win|loss|same|unpaired) +(\S+) ", text, re.M)


def test_items_lists_wins_then_losses_with_both_answers_from_the_grader_store(recorded_runs: RecordedRuns) -> None:
    runs = recorded_runs
    proc = items(runs, runs.run_id[:-1] + runs.run_id[-1])
    assert proc.returncode == 0, proc.stderr
    shown = blocks(proc.stdout)
    assert [i for o, i in shown[:10]] == WINS and [o for o, _ in shown[:10]] == ["win"] * 10
    assert [i for _, i in shown[10:15]] == LOSSES and {o for o, _ in shown[15:]} == {"same"}
    assert len(shown) == 30 and "30 items: 10 wins, 5 losses, 15 unchanged · score 33.3 → 50.0" in proc.stdout
    win = proc.stdout.split("win      test-30")[1].split("\n\n")[0]
    assert re.search(r"prompt +say 30\n", win) and re.search(r"reference +30\n", win)
    assert re.search(r"base +\(empty\)\n", win) and re.search(r"checkpoint +30$", win)
    # the agent's planted items/ in its workspace is not what is read: test-40 is a 0 for both
    assert ("same", "test-40") in shown
    flipped = items(runs, runs.run_id, "--flipped")
    assert [i for _, i in blocks(flipped.stdout)] == WINS + LOSSES
    dev = items(runs, runs.run_id, "--split", "dev", "--flipped")
    assert [i for _, i in blocks(dev.stdout)] == [f"dev-{k}" for k in range(5, 12)]
    assert "dev: submission 1 vs the base model" in dev.stdout


def test_model_text_reaches_the_terminal_as_text_within_80_columns(recorded_runs: RecordedRuns) -> None:
    proc = items(recorded_runs, recorded_runs.run_id)
    assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout and "\x07" not in proc.stdout
    assert "\\x1b]0;owned\\x07\\x1b[2Jtail" in proc.stdout and "\\u202eevil" in proc.stdout
    assert MARKUP[:40] in proc.stdout  # a terminal shows markup as text: kept, cut to the width
    from rich.cells import cell_len

    assert max(cell_len(line) for line in proc.stdout.splitlines()) <= 80
    wide = items(recorded_runs, recorded_runs.run_id, columns=200)
    assert max(cell_len(line) for line in wide.stdout.splitlines()) <= 200
    assert max(cell_len(line) for line in wide.stdout.splitlines()) > 80  # COLUMNS is honoured


def test_items_json_holds_every_answer_whole(recorded_runs: RecordedRuns) -> None:
    proc = items(recorded_runs, recorded_runs.run_id, "--json", "--flipped")
    data = json.loads(proc.stdout)
    assert data["counts"] == {"items": 30, "win": 10, "loss": 5, "same": 15, "unpaired": 0}
    assert [i["item_id"] for i in data["items"]] == WINS + LOSSES
    first = data["items"][0]
    assert first == {
        **first,
        "outcome": "win",
        "change": 1.0,
        "prompt": "say 30",
        "reference": "30",
        "base_score": 0.0,
        "score": 1.0,
        "base_answer": "",
        "answer": "30",
        "answers": ["30"],
    }
    every = {i["item_id"]: i for i in json.loads(items(recorded_runs, recorded_runs.run_id, "--json").stdout)["items"]}
    assert every["test-40"]["answer"] == MARKUP and every["test-41"]["answer"] == ESCAPE + "tail"
    assert every["test-42"]["answer"] == BIDI and len(every["test-43"]["answer"]) == 120_000


def test_a_reused_baseline_brings_its_items_into_the_run_store(recorded_runs: RecordedRuns) -> None:
    # the second run's baselines came from the first run's cache entries: their items came along
    assert (recorded_runs.result["baseline"].get("extra") or {}).get("cached") is True
    for split in ("dev", "test"):
        assert per_item_path(recorded_runs.store, "baseline", split).is_file()
    found = read_run_items(recorded_runs.result, "test")
    assert not found.notes and all(p.base is not None and p.base.prompt for p in found.items)


def test_a_wrong_run_split_or_submission_is_one_line(recorded_runs: RecordedRuns) -> None:
    runs = recorded_runs
    common = next(runs.first[:k] for k in range(len(runs.first), -1, -1) if runs.run_id.startswith(runs.first[:k]))
    for args, message in [
        (("nope",), f"error: no run 'nope' in {runs.home / 'autorl.db'} (see `autorl results`)"),
        ((common,), f"error: '{common}' is the start of 2 run ids ({runs.first}, {runs.run_id}): give more of it"),
        ((runs.run_id, "--split", "train"), "error: --split must be dev or test, not 'train'"),
        ((runs.run_id, "--submission", "7"), f"error: run {runs.run_id}: submission 7 was never scored on test"),
    ]:
        proc = items(runs, *args)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith(message), proc.stderr
    empty = cli("items", "x", env={"AUTORL_HOME": str(runs.home / "nowhere")})
    assert empty.returncode == 2 and "no run 'x'" in empty.stderr


def write_items(store: Path, tag: str, rows: list[Any]) -> None:
    path = per_item_path(store, tag, "test")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def test_the_reader_follows_no_link_and_skips_what_is_not_an_item(tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = fixture_result("20261101T100000", "echo", "a", "stub", "2026-11-01", [40.0], test=50.0, store_dir=store)
    write_items(
        store,
        "sub1",
        [
            {"id": "a", "score": 1.0, "completions": ["x", "y", 3], "prompt": "p", "reference": 7},
            {"id": "b", "score": 7.5, "completions": "no list"},
            "not json",
            [1, 2],
            {"score": 1.0},
            {"id": True, "score": 1.0},
            {"id": "c", "score": float("nan")},
        ],
    )
    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"id": "a", "score": 0.0, "completions": ["LEAKED"]}) + "\n")
    per_item_path(store, "baseline", "test").symlink_to(secret)
    found = read_run_items(result, "test")
    assert [p.id for p in found.items] == ["a", "b", "c"]
    a, b, c = found.items
    assert a.reference == "7" and a.base is None and a.outcome == "unpaired"  # the link was not followed
    assert a.to_dict()["answer"] == "x" and a.to_dict()["answers"] == ["x", "y", "3"]  # every sample, as text
    assert b.checkpoint is not None and b.checkpoint.score is None and b.checkpoint.answers == ()
    assert c.checkpoint is not None and c.checkpoint.score is None
    assert any("4 line(s) that are not item records skipped" in n for n in found.notes), found.notes
    assert any("baseline-test.jsonl not read" in n and "cannot be opened safely" in n for n in found.notes)
    assert len(found.notes) == 2
    assert "LEAKED" not in json.dumps([p.to_dict() for p in found.items])
    with pytest.raises(UsageError, match="recorded no grader store"):
        read_run_items({**result, "meta": {}}, "test")
    with pytest.raises(UsageError, match="is not on this machine"):
        read_run_items({**result, "meta": {"store_dir": str(tmp_path / "gone")}}, "test")


# -- the dashboard ------------------------------------------------------------------------------------------


@pytest.fixture
def dashboard(recorded_runs: RecordedRuns) -> Iterator[httpx.Client]:
    with (
        serve_in_thread(create_app(recorded_runs.home / "autorl.db")) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60, trust_env=False) as client,
    ):
        yield client


def rows_of(html: str) -> list[tuple[str, str]]:
    return re.findall(r"<tr data-item='([^']+)' class='outcome-(\w+)'>", html)


def test_the_run_page_shows_items_flipped_first_and_escapes_model_text(
    recorded_runs: RecordedRuns, dashboard: httpx.Client
) -> None:
    page = dashboard.get(f"/runs/{recorded_runs.run_id}")
    assert page.status_code == 200
    shown = rows_of(page.text)
    assert [i for i, _ in shown[:15]] == WINS + LOSSES and len(shown) == 30
    assert "30 items: <b>10</b> wins, <b>5</b> losses, 15 unchanged" in page.text
    assert MARKUP not in page.text and "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page.text
    assert page.text.count("<script") == 1  # the page's own, with its nonce
    assert f"… ({120_000 - TEXT_LIMIT} more characters)" in page.text and "x" * (TEXT_LIMIT + 1) not in page.text
    assert "the models&#x27; answers (the checkpoint is the agent&#x27;s work): untrusted" in page.text
    flipped = dashboard.get(f"/runs/{recorded_runs.run_id}", params={"items_flipped": "1", "items_split": "dev"})
    assert [i for i, _ in rows_of(flipped.text)] == [f"dev-{k}" for k in range(5, 12)]
    api = dashboard.get(f"/api/runs/{recorded_runs.run_id}/items", params={"flipped": "1"}).json()
    assert [i["item_id"] for i in api["items"]] == WINS + LOSSES and api["counts"]["win"] == 10
    missing = dashboard.get("/api/runs/nope/items")
    assert missing.status_code == 404 and missing.json() == {"error": "no run nope"}


def test_ten_thousand_items_are_served_a_page_at_a_time(tmp_path: Path) -> None:
    store = tmp_path / "store"
    n = 10_000
    # the checkpoint wins every 7th item and loses every 11th (77 both: a win), the rest unchanged
    base = [
        {
            "id": f"i{k:05d}",
            "score": float(k % 11 == 0 and k % 7 != 0),
            "completions": [f"b{k}"],
            "prompt": f"question {k}",
            "reference": str(k),
        }
        for k in range(n)
    ]
    ckpt = [{**b, "score": float(k % 7 == 0), "completions": [f"c{k}"]} for k, b in enumerate(base)]
    write_items(store, "baseline", base)
    write_items(store, "sub1", ckpt)
    db = make_ledger(
        tmp_path / "autorl.db",
        [fixture_result("20261101T100000", "echo", "a", "stub", "2026-11-01", [40.0], test=50.0, store_dir=store)],
    )
    wins = [f"i{k:05d}" for k in range(n) if k % 7 == 0]
    losses = [f"i{k:05d}" for k in range(n) if k % 11 == 0 and k % 7 != 0]
    with (
        serve_in_thread(create_app(db)) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60, trust_env=False) as ui,
    ):
        first = ui.get("/runs/20261101T100000")
        last = ui.get("/runs/20261101T100000", params={"items_page": "200"})
        beyond = ui.get("/runs/20261101T100000", params={"items_page": "999", "items_flipped": "1"})
        api = ui.get("/api/runs/20261101T100000/items", params={"page": "2", "flipped": "1"}).json()
    assert [i for i, _ in rows_of(first.text)] == wins[:PER_PAGE] and "page 1 of 200" in first.text
    assert len(first.text) < 200_000  # one page, never the whole table
    unchanged = [f"i{k:05d}" for k in range(n) if k % 7 != 0 and k % 11 != 0]
    assert [i for i, _ in rows_of(last.text)] == unchanged[-PER_PAGE:] and "page 200 of 200" in last.text
    flipped_pages = -(-(len(wins) + len(losses)) // PER_PAGE)
    assert f"page {flipped_pages} of {flipped_pages}" in beyond.text
    assert [i for i, _ in rows_of(beyond.text)] == (wins + losses)[(flipped_pages - 1) * PER_PAGE :]
    assert api["page"] == 2 and api["pages"] == flipped_pages
    assert [i["item_id"] for i in api["items"]] == wins[PER_PAGE : 2 * PER_PAGE]
    assert api["counts"] == {"items": n, "win": len(wins), "loss": len(losses), "same": len(unchanged), "unpaired": 0}


def test_no_items_are_served_while_a_run_on_the_task_is_in_progress(
    recorded_runs: RecordedRuns, tmp_path: Path
) -> None:
    # a copy of the ledger, with a run on echo in progress: its agent could reach a dashboard (a sandbox sharing
    # the host's network, a dashboard on a public address) and must not read echo's hidden items from it
    db = tmp_path / "autorl.db"
    shutil.copy(recorded_runs.home / "autorl.db", db)
    ledger = Ledger(db)
    ledger.start_run(
        {
            "run_id": "20990101T000000",
            "task": "echo",
            "agent": "x",
            "base_model": "m",
            "started": time.time(),
            "timeout_s": 600.0,
        }
    )
    ledger.close()
    with (
        serve_in_thread(create_app(db)) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60, trust_env=False) as ui,
    ):
        page = ui.get(f"/runs/{recorded_runs.run_id}")
        api = ui.get(f"/api/runs/{recorded_runs.run_id}/items").json()
    assert page.status_code == 200 and not rows_of(page.text) and "say 30" not in page.text
    assert "the items are hidden while run 20990101T000000 on echo is in progress" in page.text
    assert api["items"] == [] and api["error"].startswith("the items are hidden while run 20990101T000000")


@pytest.mark.skipif(chromium() is None, reason="headless Chromium is not installed (Debian: apt-get install chromium)")
def test_the_items_section_renders_in_headless_chromium(
    recorded_runs: RecordedRuns, dashboard: httpx.Client, tmp_path: Path
) -> None:
    exe = chromium()
    assert exe is not None
    url = f"{str(dashboard.base_url).rstrip('/')}/runs/{recorded_runs.run_id}"
    dom = subprocess.run(
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
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1400,1100",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            "--virtual-time-budget=3000",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<title>hostile on echo" in dom.stdout and "pwned</title>" not in dom.stdout
    assert "Uncaught" not in dom.stderr
    assert [i for i, _ in rows_of(dom.stdout.replace('"', "'"))][:15] == WINS + LOSSES
    # the markup arrived as text in its cell: the browser parsed no element out of it
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in dom.stdout
    assert '<img src="x"' not in dom.stdout and unicodedata.normalize("NFC", BIDI) in dom.stdout
