"""The dashboard's sweep pages over a synthetic study folder written by the sweep store's own writers."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from autorl.sweep.coordinator import open_study
from autorl.sweep.report import sweep_page_data, t_interval
from autorl.sweep.store import SweepDir, write_json
from autorl.ui import create_app

from .scripted_llm import serve_in_thread
from .test_ui import chromium, count_color

XSS = "<script>alert(1)</script>"
#: (agent, seed) -> test improvement (None: the run failed, no test score)
RESULTS: dict[tuple[str, int], float | None] = {
    ("a", 0): 4.0,
    ("a", 1): 6.0,
    ("a", 2): None,
    (XSS, 0): 1.0,
    (XSS, 1): 2.5,
    (XSS, 2): -1.0,
}


def _cell(agent: str, task: str, model: str, seed: int) -> dict[str, Any]:
    key = f"k-{abs(hash((agent, task, model, seed))) % 10**8:08d}"
    return {"run_key": key, "identity": {}, "options": {"agent": agent, "task": task, "model": model, "seed": seed}}


def _result(folder: SweepDir, cell: dict[str, Any], improvement: float | None, run_id: str | None = None) -> None:
    o, key = cell["options"], cell["run_key"]
    attempt = folder.attempt_dir(key, 1)
    row = {
        "run_id": run_id or f"{key}-a1",
        "timestamp": "2026-12-01 00:00:00",
        "task": o["task"],
        "agent": o["agent"],
        "base_model": o["model"],
        "seed": o["seed"],
        "config_hash": "cfg1",
        "success": improvement is not None,
        "improvement": improvement,
        "run_key": key,
        "sweep": folder.name,
        "end_reason": "agent finished" if improvement is not None else "no scored submission",
    }
    write_json(attempt / "job.json", {"executor": "local", "pid": 1})
    write_json(attempt / "result.json", {"row": row, "submissions": [], "meta": {}})
    write_json(attempt / "outcome.json", {"kind": "result", "success": row["success"], "reason": row["end_reason"]})


@pytest.fixture
def study(tmp_path: Path) -> dict[str, Any]:
    """A study of two agents x three seeds on one (task, model), one key that gave up, and then links planted in
    its folder: a result.json pointing outside, a key folder that is a link, a study folder that is a link."""
    home = tmp_path / "home"
    folder = SweepDir(home / "sweeps" / "study1")
    cells = [_cell(agent, "arith", "tiny", seed) for agent, seed in RESULTS]
    gave_up, linked_file, linked_dir = (_cell("a", "arith", "tiny", s) for s in (7, 8, 9))
    folder.create({"name": "study1", "retries": 1}, [*cells, gave_up, linked_file, linked_dir])
    for cell, value in zip(cells, RESULTS.values(), strict=True):
        _result(folder, cell, value)
    for n in (1, 2):
        write_json(
            folder.attempt_dir(gave_up["run_key"], n) / "outcome.json",
            {"kind": "infra", "reason": f"node lost <b>{n}</b>"},
        )
    expected = sweep_page_data(open_study(folder.root))
    # links planted by a run that could write the folder: none of them is followed
    outside = SweepDir(tmp_path / "elsewhere")
    _result(outside, linked_file, 99.0, run_id="LEAKED-FILE")
    _result(outside, linked_dir, 98.0, run_id="LEAKED-DIR")
    attempt = folder.attempt_dir(linked_file["run_key"], 1)
    write_json(attempt / "outcome.json", {"kind": "result", "success": True, "reason": "agent finished"})
    os.symlink(outside.attempt_dir(linked_file["run_key"], 1) / "result.json", attempt / "result.json")
    os.symlink(outside.keys_dir / linked_dir["run_key"], folder.keys_dir / linked_dir["run_key"])
    os.symlink(folder.root, home / "sweeps" / "evil")
    client = TestClient(create_app(home / "autorl.db"), base_url="http://127.0.0.1")
    return {"client": client, "expected": expected, "folder": folder, "cells": cells}


def _page_cells(page: str) -> dict[str, dict[str, Any]]:
    out = {}
    for m in re.finditer(
        r'<div class="cell" data-agent="([^"]*)" data-config="([^"]*)" data-mean="([^"]*)" '
        r'data-ci="([^"]*)">(.*?)</div></div>',
        page,
        re.S,
    ):
        ci = [float(v) for v in m[4].split(",")] if m[4] else None
        out[html.unescape(m[1])] = {"mean": float(m[3]), "ci95": ci, "body": m[5]}
    return out


def test_the_grid_shows_each_cells_mean_and_interval_and_links_every_run(study: dict[str, Any]) -> None:
    client, expected = study["client"], study["expected"]
    page = client.get("/sweeps/study1")
    assert page.status_code == 200 and "Content-Security-Policy" in page.headers
    shown = _page_cells(page.text)
    [row] = expected["rows"]
    assert {a["agent"] for a in row["agents"]} == set(shown) == {"a", XSS}
    for a in row["agents"]:
        cell = shown[a["agent"]]
        assert cell["mean"] == a["mean"] and cell["ci95"] == list(a["ci95"])
        assert f"{a['mean']:.2f}" in cell["body"] and f"[{a['ci95'][0]:+.1f}, {a['ci95'][1]:+.1f}]" in cell["body"]
        for dot in a["dots"]:  # every run a dot linking to its page
            assert f'<a href="{dot["href"]}">' in cell["body"]
        assert cell["body"].count('<circle class="run') == a["runs"] == 3
    # numbers by hand: a failed run counts as 0 and is counted and marked
    mean, ci = t_interval([4.0, 6.0, 0.0])
    assert shown["a"]["mean"] == pytest.approx(mean) and shown["a"]["ci95"] == pytest.approx(list(ci or ()))
    assert "1 failed" in shown["a"]["body"] and shown["a"]["body"].count('class="run failed"') == 1
    assert "failed" not in shown[XSS]["body"]
    # the key that gave up is listed with its reasons, escaped
    assert "gave up" in page.text and "node lost &lt;b&gt;1&lt;/b&gt;" in page.text
    assert client.get("/api/sweeps/study1").json()["rows"] == json.loads(json.dumps(expected["rows"]))
    assert 'href="/sweeps"' in client.get("/").text  # the shared header links the sweeps


def test_hostile_names_are_escaped_and_planted_links_are_not_followed(study: dict[str, Any]) -> None:
    client = study["client"]
    page = client.get("/sweeps/study1").text
    assert XSS not in page and html.escape(XSS) in page
    assert "LEAKED" not in page and "99.0" not in page
    data = client.get("/api/sweeps/study1").json()
    assert "LEAKED" not in json.dumps(data)
    assert len(data["missing"]) == 3  # gave up, a result.json that is a link, a key folder that is a link
    listing = client.get("/sweeps")
    assert listing.status_code == 200 and "data-sweep='study1'" in listing.text and "evil" not in listing.text
    assert [s["sweep"] for s in client.get("/api/sweeps").json()] == ["study1"]
    for bad in ("evil", "%2e%2e", "nope", ".hidden"):
        assert client.get(f"/sweeps/{bad}").status_code == 404
        assert client.get(f"/api/sweeps/{bad}").status_code == 404


@pytest.mark.skipif(chromium() is None, reason="headless Chromium is not installed (Debian: apt-get install chromium)")
def test_the_sweep_page_renders_in_headless_chromium(study: dict[str, Any], tmp_path: Path) -> None:
    exe = chromium()
    assert exe is not None
    app = study["client"].app
    shot = tmp_path / "sweep.png"
    with serve_in_thread(app) as port:
        dom, picture = (
            subprocess.run(
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
                    f"--user-data-dir={tmp_path / f'profile-{i}'}",
                    "--window-size=1200,800",
                    "--enable-logging=stderr",
                    "--v=0",
                    arg,
                    f"http://127.0.0.1:{port}/sweeps/study1",
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            for i, arg in enumerate(("--dump-dom", f"--screenshot={shot}"))
        )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('<circle class="run') == 6 and dom.stdout.count('<a href="/runs/') == 6
    assert dom.stdout.count('class="mean"') == 2 and "<script>alert" not in dom.stdout and "Uncaught" not in dom.stderr
    assert picture.returncode == 0 and shot.is_file(), picture.stderr[-2000:]
    assert count_color(shot, (0x1C, 0x7E, 0xD6), tol=12) > 120  # the two means (4 x 22 px each), drawn


@pytest.mark.parametrize(
    "bad",
    [
        {"seed": [1]},
        {"improvement": float("nan")},
        {"improvement": 1e308},
        {"run_id": None},
        {"agent": {"x": 1}},
        {"improvement": 10**400},
    ],
)
def test_a_malformed_result_is_a_missing_one_not_an_error(study: dict[str, Any], bad: dict[str, Any]) -> None:
    folder, cell = study["folder"], study["cells"][0]
    path = folder.attempt_dir(cell["run_key"], 1) / "result.json"
    result = json.loads(path.read_text())
    result["row"].update(bad)
    write_json(path, result)
    client = study["client"]
    page, data = client.get("/sweeps/study1"), client.get("/api/sweeps/study1")
    assert page.status_code == data.status_code == 200
    assert _page_cells(page.text)["a"]["body"].count('<circle class="run') == 2
    assert cell["run_key"] in {m["run_key"] for m in data.json()["missing"]}
    assert "result.json is not readable" in page.text
