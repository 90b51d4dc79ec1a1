"""The grader's records and errors through the real app, in process: every error type answers its own status,
and reading records never writes to the store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from autorl import errors
from autorl.grader import records
from autorl.grader.app import create_app
from autorl.grader.core import Grader
from autorl.grader.store import DONE, FAILED, QUEUED, Store

from .conftest import echo_answers, write_stub_checkpoint
from .grader_harness import make_config

STATUS_OF = [
    (errors.UsageError, 400),
    (errors.PathRefused, 400),
    (errors.InvalidCheckpointError, 422),
    (errors.CheckpointTooLarge, 413),
    (errors.RunClosed, 409),
    (errors.LimitReached, 429),
    (errors.QueueFull, 503),
    (errors.NotFound, 404),
    (errors.ResourceError, 400),
]


@pytest.mark.parametrize(("kind", "status"), STATUS_OF, ids=[k.__name__ for k, _ in STATUS_OF])
def test_each_error_type_carries_its_status(kind: type[errors.AutorlError], status: int) -> None:
    assert kind.http_status == status
    assert errors.http_status(kind("x")) == status


def test_grader_error_status_given_wins() -> None:
    assert errors.http_status(errors.GraderError("x", status=409)) == 409
    assert errors.http_status(errors.GraderError("x")) == 400


def _app(tmp_path: Path, **overrides: Any) -> tuple[Grader, TestClient]:
    grader = Grader(make_config(tmp_path, **overrides))
    return grader, TestClient(create_app(grader, manage_lifecycle=False), raise_server_exceptions=False)


# (label, config overrides, what to do before, request, expected status, the error type that answers it)
CASES: list[tuple[str, dict[str, Any], str, tuple[str, str, Any], int, type[errors.AutorlError]]] = [
    ("usage", {}, "", ("POST", "/submit", {"model_path": "output/ok", "x": 1}), 400, errors.UsageError),
    ("path_refused", {}, "", ("POST", "/submit", {"model_path": "../etc"}), 400, errors.PathRefused),
    (
        "invalid_checkpoint",
        {},
        "",
        ("POST", "/submit", {"model_path": "output/empty"}),
        422,
        errors.InvalidCheckpointError,
    ),
    (
        "too_large",
        {"max_bytes": 10},
        "",
        ("POST", "/submit", {"model_path": "output/ok"}),
        413,
        errors.CheckpointTooLarge,
    ),
    ("run_closed", {}, "close", ("POST", "/submit", {"model_path": "output/ok"}), 409, errors.RunClosed),
    (
        "limit_reached",
        {"max_submissions": 1},
        "submit",
        ("POST", "/submit", {"model_path": "output/ok"}),
        429,
        errors.LimitReached,
    ),
    ("queue_full", {"max_queue": 1}, "submit", ("POST", "/submit", {"model_path": "output/ok"}), 503, errors.QueueFull),
    ("not_found", {}, "", ("GET", "/submissions/7", None), 404, errors.NotFound),
    ("grader_error_status", {}, "submit", ("POST", "/admin/test", {"submission_id": 1}), 409, errors.GraderError),
]


@pytest.mark.parametrize(("label", "overrides", "before", "call", "status", "kind"), CASES, ids=[c[0] for c in CASES])
def test_errors_answer_their_status_through_the_app(
    tmp_path: Path,
    label: str,
    overrides: dict[str, Any],
    before: str,
    call: tuple[str, str, Any],
    status: int,
    kind: type[errors.AutorlError],
) -> None:
    grader, client = _app(tmp_path, **overrides)
    try:
        write_stub_checkpoint(grader.output_dir / "ok", echo_answers(3))
        (grader.output_dir / "empty").mkdir()
        if before == "close":
            grader.close()
        elif before == "submit":  # the slots are not started: it stays queued
            assert grader.submit("output/ok") == 1
        token = grader.config.admin_token if call[1].startswith("/admin") else grader.config.agent_token
        method, path, body = call
        resp = client.request(
            method, path, json=body, params={"wait": "false"}, headers={"Authorization": f"Bearer {token}"}
        )
        assert resp.status_code == status, resp.text
        assert resp.status_code == kind.http_status or kind is errors.GraderError
        assert set(resp.json()) == {"error"} and resp.json()["error"]
    finally:
        client.close()
        grader.stop()


@pytest.fixture
def scored(tmp_path: Path) -> Iterator[Grader]:
    """A grader (slots running) whose baseline and two submissions are scored."""
    base = write_stub_checkpoint(tmp_path / "base", echo_answers(5))
    grader = Grader(make_config(tmp_path, base_model=str(base)))
    grader.start()
    try:
        for name, correct in (("a", 12), ("b", 12)):
            write_stub_checkpoint(grader.output_dir / name, echo_answers(correct, "dev") | {"salt": name})
            grader.submit(f"output/{name}")
        end = time.monotonic() + 120
        while grader.store.counts().get(DONE, 0) + grader.store.counts().get(FAILED, 0) < 2:
            assert time.monotonic() < end, grader.store.all()
            time.sleep(0.1)
        yield grader
    finally:
        grader.stop()


def _files(store_dir: Path) -> dict[str, tuple[int, int]]:
    return {
        p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in store_dir.iterdir() if p.name.startswith("grader.db")
    }


def test_reading_records_never_writes_to_the_store(scored: Grader) -> None:
    grader = scored
    changes, files = grader.store.changes, _files(grader.store_dir)
    app = TestClient(create_app(grader, manage_lifecycle=False))
    agent = {"Authorization": f"Bearer {grader.config.agent_token}"}
    admin = {"Authorization": f"Bearer {grader.config.admin_token}"}
    for _ in range(25):
        subs = app.get("/submissions", headers=agent).json()
        one = app.get("/submissions/2", headers=agent).json()
        state = app.get("/admin/state", headers=admin).json()
        grader.submission(1)
    app.close()
    assert grader.store.changes == changes
    assert _files(grader.store_dir) == files
    # and what was read carries the comparison, computed when the scores were written
    assert [s["status"] for s in subs] == [DONE, DONE]
    assert one["improvement"] == pytest.approx(35.0) and one["improvement_ci95"] is not None
    assert one["duplicate_of"] is None and one["best"] == {"submission_id": 1, "score": pytest.approx(60.0)}
    assert state["best"] == one["best"] and state["submissions"] == subs


def test_a_baseline_that_arrives_later_gives_the_missing_comparisons(tmp_path: Path) -> None:
    """A store whose scores have no comparison (written before the baseline) gets them, once, at start."""
    config = make_config(tmp_path)
    items = {f"i{k}": float(k % 2) for k in range(20)}
    store = Store(Path(config.store_dir) / "grader.db")
    sid = store.add_submission("output/a")
    record = {"score": 50.0, "n": 20, "item_scores": items}
    store.put_evaluation("h", "dev", record)
    store.update(sid, status=DONE, score=50.0, record=records.summary(record), content_hash="h")
    store.set_baseline("dev", 25.0, {"score": 25.0, "n": 20, "item_scores": {k: 0.0 for k in items}}, "evaluated")
    store.close()
    grader = Grader(config)
    try:
        changes = grader.store.changes
        first = grader.submission(sid)
        assert first["improvement"] == pytest.approx(25.0) and first["p_value"] is not None
        assert grader.submission(sid) == first and grader.store.changes == changes
    finally:
        grader.stop()


def _row(sid: int, status: str, score: float | None) -> dict[str, Any]:
    return {
        "id": sid,
        "status": status,
        "score": score,
        "model_path": f"output/{sid}",
        "kind": "full",
        "record": None,
        "comparison": None,
        "error": None,
        "duplicate_of": None,
        "content_hash": None,
        "created_at": 0.0,
        "finished_at": None,
    }


def test_best_is_the_earliest_of_the_top_scores_and_ignores_unfinished() -> None:
    rows = [_row(1, DONE, 40.0), _row(2, DONE, 70.0), _row(3, QUEUED, None), _row(4, DONE, 70.0), _row(5, FAILED, None)]
    assert records.best(rows) == {"submission_id": 2, "score": 70.0}
    assert records.best([_row(1, QUEUED, None)]) is None
    out = records.public_all(rows, {"score": 50.0})
    assert [r["improvement"] for r in out] == [-10.0, 20.0, None, 20.0, None]
    assert {r["total_submissions"] for r in out} == {5} and out[2]["best"] == {"submission_id": 2, "score": 70.0}


def test_no_module_of_the_grader_imports_the_registry() -> None:
    import autorl.grader as pkg

    root = Path(pkg.__file__).parent
    for path in root.glob("*.py"):
        if path.name in ("server.py", "worker.py"):  # the process entry points, where names are resolved
            continue
        text = path.read_text()
        assert "autorl.plugins.registry" not in text, path.name
