"""The grader store: the read-only view the dashboard and the audit open, and the one write path."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from autorl.grader.store import DONE, PENDING, QUEUED, ReadOnlyStore, Store


def _filled(path: Path) -> int:
    store = Store(path)
    store.set_meta("task", "echo")
    sid = store.add_submission("output/ckpt")
    store.update(sid, status=DONE, score=0.5, record={"n": 3}, comparison={"p_value": 0.1})
    store.set_baseline("dev", 0.25, {"n": 3}, "evaluated")
    assert store.claim_test(sid)
    store.finish_test(sid, status=DONE, score=0.4, record={"n": 2})
    store.add_refusal("../x", "outside", "outside_output")
    store.close()
    return sid


def test_read_only_reads_what_the_grader_wrote(tmp_path: Path) -> None:
    sid = _filled(tmp_path / "grader.db")
    store = Store.read_only(tmp_path / "grader.db")
    try:
        assert store.meta() == {"task": "echo"}
        assert store.get_meta("task") == "echo"
        [sub] = store.all()
        assert (sub["id"], sub["status"], sub["score"], sub["record"]) == (sid, DONE, 0.5, {"n": 3})
        assert store.status(sid) == DONE and store.status(sid + 1) is None
        assert store.baselines()["dev"]["score"] == 0.25 and store.baseline("dev")["record"] == {"n": 3}  # type: ignore[index]
        assert [(t["score"], t["record"]) for t in store.test_scores()] == [(0.4, {"n": 2})]
        assert [r["kind"] for r in store.refusals()] == ["outside_output"]
    finally:
        store.close()


def test_read_only_refuses_every_write_and_leaves_the_file_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "grader.db"
    sid = _filled(path)
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    store = Store.read_only(path)
    writes = [
        lambda: store.set_meta("closed", True),
        lambda: store.add_submission("output/other"),
        lambda: store.update(sid, status=QUEUED),
        lambda: store.claim_next(),
        lambda: store.recover(),
        lambda: store.put_evaluation("h", "dev", {}),
        lambda: store.set_baseline("dev", 1.0, None, "set"),
        lambda: store.add_refusal("p", "r"),
        lambda: store.claim_test(sid),
        lambda: store.finish_test(sid, status=DONE),
    ]
    for write in writes:
        with pytest.raises(ReadOnlyStore):
            write()
    store.close()
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before
    with sqlite3.connect(path) as db:  # and SQLite itself would refuse a write through that connection
        assert db.execute("SELECT status FROM submissions").fetchone() == (DONE,)


def test_read_only_never_creates_a_file(tmp_path: Path) -> None:
    missing = tmp_path / "store" / "grader.db"
    with pytest.raises(FileNotFoundError):
        Store.read_only(missing)
    assert not (tmp_path / "store").exists()


def test_read_only_of_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    path = tmp_path / "grader.db"
    path.write_bytes(b"not sqlite" * 100)
    store = Store.read_only(path)
    with pytest.raises(sqlite3.DatabaseError):
        store.all()
    store.close()
    assert path.read_bytes() == b"not sqlite" * 100


def test_pending_counts_against_the_queue_limit(tmp_path: Path) -> None:
    store = Store(tmp_path / "grader.db")
    first = store.add_submission("a", max_queued=2)
    assert store.status(first) == PENDING
    store.update(store.add_submission("b", max_queued=2), status=QUEUED)
    with pytest.raises(LookupError, match="queue"):
        store.add_submission("c", max_queued=2)
    store.recover()  # a copy interrupted by a restart fails; it no longer waits
    assert store.status(first) == "failed"
    store.close()
