"""The grader as agents and the orchestrator meet it: a real uvicorn process on 127.0.0.1."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import echo_answers, write_stub_checkpoint
from .grader_harness import RunningGrader, make_config, start_grader, wait_done


@pytest.fixture
def grader(tmp_path: Path) -> Iterator[RunningGrader]:
    base = write_stub_checkpoint(tmp_path / "base", echo_answers(5))
    g = start_grader(make_config(tmp_path, base_model=str(base)))
    yield g
    g.stop()


def ckpt(g: RunningGrader, name: str, correct: int = 10, **behaviour: Any) -> Path:
    return write_stub_checkpoint(g.output / name, echo_answers(correct), behaviour or None)


def test_seed_style_curl_submit(grader: RunningGrader) -> None:
    ckpt(grader, "v1", correct=15)
    body = json.dumps({"model_path": f"{grader.output}/v1"})
    out = subprocess.run(
        [
            "curl",
            "-s",
            "-X",
            "POST",
            f"{grader.url}/submit",
            "-H",
            "Content-Type: application/json",
            "-H",
            f"Authorization: Bearer {grader.config.agent_token}",
            "-d",
            body,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    rec = json.loads(out)
    assert rec["submission_id"] == 1
    assert rec["score"] == pytest.approx(75.0)
    assert rec["baseline_score"] == pytest.approx(25.0)
    assert rec["improvement"] == pytest.approx(50.0)
    assert rec["best"] == {"submission_id": 1, "score": pytest.approx(75.0)}
    assert rec["total_submissions"] == 1
    lo, hi = rec["improvement_ci95"]
    assert 0 < lo < 50 < hi
    assert rec["p_value"] < 0.01
    assert rec["n"] == 20 and rec["split"] == "dev"


def test_relative_path_and_async_submit(grader: RunningGrader) -> None:
    ckpt(grader, "v2", correct=8)
    with grader.client() as c:
        resp = c.post("/submit", params={"wait": "false"}, json={"model_path": "output/v2"})
        assert resp.status_code == 202
        sid = resp.json()["submission_id"]
        assert resp.json()["status"] in ("queued", "running")
        rec = wait_done(c, sid)
        assert rec["score"] == pytest.approx(40.0)
        assert [s["submission_id"] for s in c.get("/submissions").json()] == [sid]
        t = c.get("/time").json()
        assert t["deadline"] is None and not t["closed"]


def test_fifty_concurrent_submits_get_distinct_ids_and_serial_evaluations(tmp_path: Path) -> None:
    base = write_stub_checkpoint(tmp_path / "base", echo_answers(5))
    grader = start_grader(make_config(tmp_path, base_model=str(base), max_queue=64))
    try:
        _fifty(grader)
    finally:
        grader.stop()


def _fifty(grader: RunningGrader) -> None:
    for k in range(50):
        ckpt(grader, f"c{k}", correct=k % 21)
    ids: list[int] = []
    errors: list[Any] = []

    def submit(k: int) -> None:
        with grader.client() as c:
            r = c.post("/submit", params={"wait": "false"}, json={"model_path": f"output/c{k}"})
            (ids.append(r.json()["submission_id"]) if r.status_code == 202 else errors.append(r.text))

    threads = [threading.Thread(target=submit, args=(k,)) for k in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(ids) == list(range(1, 51))
    with grader.client() as c:
        for sid in ids:
            wait_done(c, sid, timeout=600)
        records = c.get("/submissions").json()
    assert len(records) == 50 and all(r["status"] == "done" for r in records)
    db = sqlite3.connect(Path(grader.config.store_dir) / "grader.db")
    spans = sorted(db.execute("SELECT started_at, finished_at FROM submissions WHERE duplicate_of IS NULL").fetchall())
    assert len(spans) >= 21  # distinct contents were evaluated, one at a time
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end


def test_kill_minus_nine_mid_queue_then_restart_loses_nothing(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    g = start_grader(config)
    for k in range(5):
        write_stub_checkpoint(g.output / f"s{k}", echo_answers(k + 1), {"sleep": 0.8})
    with g.client() as c:
        ids = [
            c.post("/submit", params={"wait": "false"}, json={"model_path": f"output/s{k}"}).json()["submission_id"]
            for k in range(5)
        ]
        first = wait_done(c, ids[0])
    g.kill()
    g2 = start_grader(config, port=g.port)
    try:
        with g2.client() as c:
            records = [wait_done(c, sid) for sid in ids]
            assert [r["submission_id"] for r in records] == ids
            assert all(r["status"] == "done" for r in records)
            assert records[0]["score"] == first["score"]
            assert [r["score"] for r in records] == [pytest.approx(5.0 * (k + 1)) for k in range(5)]
            write_stub_checkpoint(g2.output / "after", echo_answers(2))
            new = c.post("/submit", json={"model_path": "output/after"}).json()
            assert new["submission_id"] == 6
    finally:
        g2.stop()


@pytest.fixture
def bad_input_grader(tmp_path: Path) -> Iterator[RunningGrader]:
    g = start_grader(make_config(tmp_path))
    out = g.output
    write_stub_checkpoint(out / "good")
    write_stub_checkpoint(g.workspace / "code" / "elsewhere")
    write_stub_checkpoint(tmp_path / "outside")
    os.symlink(tmp_path / "outside", out / "link_out")
    inner = write_stub_checkpoint(out / "file_link")
    (inner / "tokenizer.json").unlink()
    os.symlink(tmp_path / "outside" / "tokenizer.json", inner / "tokenizer.json")
    (out / "empty").mkdir()
    corrupt = write_stub_checkpoint(out / "corrupt")
    data = (corrupt / "model.safetensors").read_bytes()
    (corrupt / "model.safetensors").write_bytes(data[:-4])
    remote = write_stub_checkpoint(out / "remote")
    (remote / "config.json").write_text(json.dumps({"model_type": "x", "auto_map": {"AutoModel": "m.M"}}))
    pickled = write_stub_checkpoint(out / "pickled")
    (pickled / "model.safetensors").unlink()
    (pickled / "pytorch_model.bin").write_bytes(b"\x80\x04")
    code = write_stub_checkpoint(out / "with_code")
    (code / "modeling_evil.py").write_text("import os\n")
    noconfig = write_stub_checkpoint(out / "noconfig")
    (noconfig / "config.json").unlink()
    yield g
    g.stop()


AGENT, ADMIN, NONE, WRONG = "agent", "admin", "none", "wrong"
BAD_INPUTS = [
    ("missing field", AGENT, "POST", "/submit", {}, 400),
    ("extra field", AGENT, "POST", "/submit", {"model_path": "output/good", "score": 100}, 400),
    ("wrong type", AGENT, "POST", "/submit", {"model_path": 5}, 400),
    ("non-JSON", AGENT, "POST", "/submit", b"model_path=output/good", 400),
    ("array body", AGENT, "POST", "/submit", [1, 2], 400),
    ("oversized body", AGENT, "POST", "/submit", {"model_path": "x" * 100_000}, 413),
    ("traversal", AGENT, "POST", "/submit", {"model_path": "output/../code/elsewhere"}, 400),
    ("absolute outside", AGENT, "POST", "/submit", {"model_path": "/etc"}, 400),
    ("symlink escaping", AGENT, "POST", "/submit", {"model_path": "output/link_out"}, 400),
    ("file link escaping", AGENT, "POST", "/submit", {"model_path": "output/file_link"}, 400),
    ("output dir itself", AGENT, "POST", "/submit", {"model_path": "output"}, 400),
    ("does not exist", AGENT, "POST", "/submit", {"model_path": "output/nope"}, 400),
    ("empty dir", AGENT, "POST", "/submit", {"model_path": "output/empty"}, 422),
    ("corrupt safetensors", AGENT, "POST", "/submit", {"model_path": "output/corrupt"}, 422),
    ("remote code", AGENT, "POST", "/submit", {"model_path": "output/remote"}, 422),
    ("pickle weights", AGENT, "POST", "/submit", {"model_path": "output/pickled"}, 422),
    ("python file", AGENT, "POST", "/submit", {"model_path": "output/with_code"}, 422),
    ("no config", AGENT, "POST", "/submit", {"model_path": "output/noconfig"}, 422),
    ("unknown id", AGENT, "GET", "/submissions/999", None, 404),
    ("non-numeric id", AGENT, "GET", "/submissions/abc", None, 404),
    ("no token", NONE, "POST", "/submit", {"model_path": "output/good"}, 401),
    ("wrong token", WRONG, "GET", "/submissions", None, 401),
    ("agent sets baseline", AGENT, "POST", "/set_baseline", {"score": 99.0}, 403),
    ("agent reads admin state", AGENT, "GET", "/admin/state", None, 403),
    ("agent closes run", AGENT, "POST", "/admin/close", None, 403),
    ("agent asks for test score", AGENT, "POST", "/admin/test", {}, 403),
    ("baseline not a number", ADMIN, "POST", "/set_baseline", {"score": "high"}, 400),
    ("unknown route", AGENT, "GET", "/nope", None, 404),
]


@pytest.mark.parametrize(
    ("label", "who", "method", "path", "body", "status"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS]
)
def test_bad_inputs_get_documented_json_errors(
    bad_input_grader: RunningGrader, label: str, who: str, method: str, path: str, body: Any, status: int
) -> None:
    g = bad_input_grader
    token = {AGENT: g.config.agent_token, ADMIN: g.config.admin_token, NONE: "", WRONG: "nope"}[who]
    with g.client(token) as c:
        kwargs: dict[str, Any] = (
            {"content": body} if isinstance(body, bytes) else ({"json": body} if body is not None else {})
        )
        resp = c.request(method, path, **kwargs)
        assert resp.status_code == status, resp.text
        error = resp.json()["error"]
        assert isinstance(error, str) and error and "Traceback" not in error
        # nothing was recorded, and the server still serves
        assert g.admin_http().get("/admin/state").json()["submissions"] == []
    assert g.admin_http().get("/admin/state").json()["baseline_score"] is None


def test_limits_and_closed_run(tmp_path: Path) -> None:
    g = start_grader(make_config(tmp_path, max_submissions=2, max_queue=1))
    try:
        write_stub_checkpoint(g.output / "slow", echo_answers(1), {"sleep": 3})
        for k in range(3):
            write_stub_checkpoint(g.output / f"q{k}", echo_answers(k + 2))
        with g.client() as c:
            assert c.post("/submit", params={"wait": "false"}, json={"model_path": "output/slow"}).status_code == 202
            time.sleep(1.0)  # the slow one is running; the queue has room for one
            assert c.post("/submit", params={"wait": "false"}, json={"model_path": "output/q0"}).status_code == 202
            r = c.post("/submit", params={"wait": "false"}, json={"model_path": "output/q1"})
            assert r.status_code in (429, 503), r.text
            wait_done(c, 1)
            wait_done(c, 2)
            r = c.post("/submit", json={"model_path": "output/q2"})
            assert r.status_code == 429 and "limit" in r.json()["error"]
        g.admin_http().post("/admin/close")
        with g.client() as c:
            r = c.post("/submit", json={"model_path": "output/q2"})
            assert r.status_code == 409
    finally:
        g.stop()


def test_queue_full_is_503(tmp_path: Path) -> None:
    g = start_grader(make_config(tmp_path, max_queue=1))
    try:
        write_stub_checkpoint(g.output / "slow", echo_answers(1), {"sleep": 3})
        for k in range(2):
            write_stub_checkpoint(g.output / f"q{k}", echo_answers(k + 2))
        with g.client() as c:
            c.post("/submit", params={"wait": "false"}, json={"model_path": "output/slow"})
            time.sleep(1.0)
            assert c.post("/submit", params={"wait": "false"}, json={"model_path": "output/q0"}).status_code == 202
            r = c.post("/submit", params={"wait": "false"}, json={"model_path": "output/q1"})
            assert r.status_code == 503 and "waiting" in r.json()["error"]
    finally:
        g.stop()


def test_worker_failures_fail_one_submission_and_the_server_keeps_serving(tmp_path: Path) -> None:
    g = start_grader(make_config(tmp_path, eval_timeout=3.0))
    try:
        ckpt(g, "crash", crash=True)
        ckpt(g, "killed", kill=True)
        ckpt(g, "hang", hang=True)
        ckpt(g, "fine", correct=4)
        with g.client() as c:
            crash = c.post("/submit", json={"model_path": "output/crash"}).json()
            assert crash["status"] == "failed" and "refuses to load" in crash["error"]
            killed = c.post("/submit", json={"model_path": "output/killed"}).json()
            assert killed["status"] == "failed" and "SIGKILL" in killed["error"]
            hang = c.post("/submit", json={"model_path": "output/hang"}).json()
            assert hang["status"] == "failed" and "timed out" in hang["error"]
            fine = c.post("/submit", json={"model_path": "output/fine"}).json()
            assert fine["status"] == "done" and fine["score"] == pytest.approx(20.0)
            assert c.get("/submissions").json()[-1]["best"] == {"submission_id": 4, "score": pytest.approx(20.0)}
    finally:
        g.stop()


def test_snapshots_make_later_edits_irrelevant_and_duplicates_are_evaluated_once(grader: RunningGrader) -> None:
    path = ckpt(grader, "v", correct=10)
    with grader.client() as c:
        first = c.post("/submit", json={"model_path": "output/v"}).json()
        (path / "answers.json").write_text(json.dumps(echo_answers(20)))
        assert c.get(f"/submissions/{first['submission_id']}").json()["score"] == pytest.approx(50.0)
        second = c.post("/submit", json={"model_path": "output/v"}).json()
        assert second["score"] == pytest.approx(100.0)
        shutil.copytree(path, grader.output / "copy")
        third = c.post("/submit", json={"model_path": "output/copy"}).json()
        assert third["duplicate_of"] == second["submission_id"] and third["score"] == pytest.approx(100.0)
    logs = sorted(p.name for p in (Path(grader.config.store_dir) / "logs").iterdir())
    assert [n for n in logs if not n.startswith("warmup-")] == ["baseline-dev.log", "sub1-dev.log", "sub2-dev.log"]


def test_scores_json_is_a_mirror_nothing_reads_back(grader: RunningGrader) -> None:
    ckpt(grader, "v", correct=6)
    with grader.client() as c:
        c.post("/submit", json={"model_path": "output/v"})
        mirror = grader.workspace / "scores.json"
        end = time.monotonic() + 10  # the mirror follows the store shortly after each change
        while json.loads(mirror.read_text())[0]["score"] is None and time.monotonic() < end:
            time.sleep(0.05)
        assert json.loads(mirror.read_text())[0]["score"] == pytest.approx(30.0)
        assert not os.access(mirror, os.W_OK) or os.geteuid() == 0
        mirror.chmod(0o644)
        mirror.write_text(json.dumps([{"submission_id": 1, "score": 100.0}]))
        assert c.get("/submissions/1").json()["score"] == pytest.approx(30.0)
    state = grader.admin_http().get("/admin/state").json()
    assert state["best"]["score"] == pytest.approx(30.0)


def test_hidden_test_split_is_scored_once_by_admin(grader: RunningGrader) -> None:
    ckpt(grader, "a", correct=4)
    ckpt(grader, "b", correct=12)
    with grader.client() as c:
        c.post("/submit", json={"model_path": "output/a"})
        c.post("/submit", json={"model_path": "output/b"})
    admin = grader.admin_http()
    test = admin.post("/admin/test", json={}).json()
    assert test["submission_id"] == 2 and test["split"] == "test" and test["n"] == 30
    # the stub answers only dev items, so both model and baseline score 0 on test
    assert test["score"] == pytest.approx(0.0) and test["baseline_score"] == pytest.approx(0.0)
    again = admin.post("/admin/test", json={"submission_id": 2}).json()
    assert again == test
    logs = [p.name for p in (Path(grader.config.store_dir) / "logs").iterdir()]
    assert logs.count("sub2-test.log") == 1


def test_admin_sets_baseline_and_deadline(tmp_path: Path) -> None:
    g = start_grader(make_config(tmp_path))
    try:
        admin = g.admin_http()
        assert admin.post("/set_baseline", json={"score": 10.0}).json() == {"baseline_score": 10.0}
        ckpt(g, "v", correct=4)
        with g.client() as c:
            rec = c.post("/submit", json={"model_path": "output/v"}).json()
            assert rec["baseline_score"] == 10.0 and rec["improvement"] == pytest.approx(10.0)
            assert rec["improvement_ci95"] is None  # a set baseline has no items to pair with
            admin.post("/admin/deadline", json={"deadline": time.time() - 1})
            assert c.get("/time").json()["closed"] is True
            assert c.post("/submit", json={"model_path": "output/v"}).status_code == 409
        health = httpx.get(f"{g.url}/health").json()
        assert health["task"] == "echo" and health["closed"] is True
    finally:
        g.stop()


def test_plugins_and_benchmarks_endpoints(grader: RunningGrader) -> None:
    with grader.client() as c:
        names = {p["name"] for p in c.get("/-/plugins").json()}
        assert {"example-plugin", "autorl.default_plugins.benchmarks"} <= names
        assert {"name": "echo", "distribution": "autorl-example-plugin", "version": "1"} in c.get(
            "/-/benchmarks"
        ).json()


def test_store_directory_is_private(grader: RunningGrader) -> None:
    assert (Path(grader.config.store_dir).stat().st_mode & 0o777) == 0o700
    assert (grader.config_path.stat().st_mode & 0o777) == 0o600
