"""Disks that do not fill: checkpoints kept by a policy once scored (the grader's snapshot and the agent's folder
alike, the folder only while unchanged since it was submitted, nothing followed through a link), a quota on what
the agent writes, refused with the sizes, and ``autorl clean`` for runs recorded earlier."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from autorl.grader.core import Grader
from autorl.grader.keep import keep_after_run, prunable
from autorl.grader.quota import QuotaExceeded

from .conftest import cli, echo_answers, write_stub_checkpoint
from .grader_harness import make_config
from .test_run import agent_folder


def _grader(tmp_path: Path, **overrides: Any) -> Grader:
    base = write_stub_checkpoint(tmp_path / "base", {**echo_answers(2), **echo_answers(3, "test")})
    grader = Grader(make_config(tmp_path, base_model=str(base), **overrides))
    grader.start()
    assert grader.wait_baseline(60) is not None, grader.baseline_error
    return grader


def _submit(grader: Grader, name: str, dev: int, test: int) -> int:
    write_stub_checkpoint(grader.output_dir / name, {**echo_answers(dev), **echo_answers(test, "test")})
    sid = grader.submit(str(grader.output_dir / name))
    end = time.monotonic() + 60
    while grader.status(sid) not in ("done", "failed"):
        assert time.monotonic() < end
        time.sleep(0.05)
    return sid


def _settled(grader: Grader, tested: int) -> None:
    """Wait until ``tested`` submissions have their test score and the keep policy has run after it."""
    end = time.monotonic() + 60
    while sum(t["status"] == "done" for t in grader.store.test_scores()) < tested:
        assert time.monotonic() < end, grader.store.test_scores()
        time.sleep(0.05)
    time.sleep(0.3)
    grader.prune()


def test_once_scored_only_the_dev_best_and_the_test_best_stay_on_disk(tmp_path: Path) -> None:
    grader = _grader(tmp_path, test_each=True)
    try:
        first = _submit(grader, "v1", dev=6, test=3)
        second = _submit(grader, "v2", dev=10, test=9)  # the dev-best
        third = _submit(grader, "v3", dev=8, test=25)  # the test-best, scored between submissions
        _settled(grader, tested=3)
        rows = {s["id"]: s for s in grader.store.all()}
    finally:
        grader.stop()
    snapshots = tmp_path / "store" / "snapshots"
    assert not (grader.output_dir / "v1").exists()
    # the grader's copy lost its weights and kept the rest, the audit's evidence
    assert not (snapshots / str(first) / "model.safetensors").exists()
    assert (snapshots / str(first) / "config.json").is_file() and (snapshots / str(first) / "answers.json").is_file()
    assert (snapshots / str(second)).is_dir() and (grader.output_dir / "v2").is_dir()
    assert (snapshots / str(third)).is_dir() and (grader.output_dir / "v3").is_dir()
    pruned = rows[first]["pruned"]
    assert pruned["policy"] == "best" and pruned["agent_copy"] == "deleted" and pruned["freed_bytes"] > 0
    assert rows[second]["pruned"] is None and rows[third]["pruned"] is None


def test_the_headline_s_test_score_waits_for_a_test_taken_between_submissions(tmp_path: Path) -> None:
    grader = _grader(tmp_path, test_each=True)
    try:
        write_stub_checkpoint(
            grader.output_dir / "slow", {**echo_answers(9), **echo_answers(12, "test")}, {"sleep": 1.5}
        )
        sid = grader.submit(str(grader.output_dir / "slow"))
        end = time.monotonic() + 60
        while not grader.store.test_scores():  # the grader has begun its test between submissions
            assert time.monotonic() < end
            time.sleep(0.02)
        test = grader.evaluate_test(sid)  # the orchestrator's, at the end of the run, racing it
    finally:
        grader.stop()
    assert test["status"] == "done" and test["score"] == pytest.approx(40.0)


def test_a_folder_the_agent_changed_or_linked_after_submitting_is_left_alone(tmp_path: Path) -> None:
    grader = _grader(tmp_path)
    outside = tmp_path / "outside"
    try:
        changed = _submit(grader, "changed", dev=3, test=0)
        (grader.output_dir / "changed" / "notes.txt").write_text("my work")  # its own again
        relinked = _submit(grader, "relinked", dev=4, test=0)
        shutil.copytree(grader.output_dir / "relinked", outside)
        shutil.rmtree(grader.output_dir / "relinked")
        (grader.output_dir / "relinked").symlink_to(outside)  # the grader must not follow it
        _submit(grader, "best", dev=12, test=0)
        grader.prune()
        rows = {s["id"]: s for s in grader.store.all()}
    finally:
        grader.stop()
    assert rows[changed]["pruned"]["agent_copy"] == "kept: changed since it was submitted"
    assert (grader.output_dir / "changed" / "notes.txt").read_text() == "my work"
    assert rows[relinked]["pruned"]["agent_copy"].startswith("gone or replaced")
    assert sorted(p.name for p in outside.iterdir()) == sorted(
        p.name for p in (tmp_path / "base").iterdir() if p.name != "behaviour.json"
    )
    assert not (tmp_path / "store" / "snapshots" / str(changed) / "model.safetensors").exists()  # its weights went


def test_keep_all_deletes_nothing_and_selected_leaves_the_grader_s_copy_of_the_dev_best(tmp_path: Path) -> None:
    grader = _grader(tmp_path / "all", keep="all")
    try:
        _submit(grader, "v1", dev=3, test=0)
        _submit(grader, "v2", dev=5, test=0)
        assert grader.prune() == []
    finally:
        grader.stop()
    assert sorted(p.name for p in grader.output_dir.iterdir()) == ["v1", "v2"]
    grader = _grader(tmp_path / "sel", keep="selected")
    try:
        low = _submit(grader, "v1", dev=3, test=0)
        best = _submit(grader, "v2", dev=5, test=0)
        end = time.monotonic() + 30  # pruned right after its successor's score is written
        while grader.store.get(low)["pruned"] is None:  # type: ignore[index]
            assert time.monotonic() < end
            time.sleep(0.05)
    finally:
        grader.stop()
    assert [p.name for p in grader.output_dir.iterdir()] == ["v2"]
    done = keep_after_run(tmp_path / "sel" / "store", grader.output_dir)
    assert done["policy"] == "selected" and done["pruned"] == [] and done["freed_bytes"] > 0
    assert list(grader.output_dir.iterdir()) == []  # the agent's copy of the selected one went too
    assert (tmp_path / "sel" / "store" / "snapshots" / str(best)).is_dir()


def test_a_submission_still_to_be_scored_on_test_stays() -> None:
    subs = [
        {"id": 1, "status": "done", "duplicate_of": None},
        {"id": 2, "status": "done", "duplicate_of": None},
        {"id": 3, "status": "failed", "duplicate_of": None},
        {"id": 4, "status": "running", "duplicate_of": None},
        {"id": 5, "status": "done", "duplicate_of": 1},
    ]
    assert prunable(subs, [], "best", test_each=True, best=2) == [3, 5]
    assert prunable(subs, [], "best", test_each=False, best=2) == [1, 3, 5]
    assert prunable(subs, [{"submission_id": 1, "status": "done", "score": 9.0}], "best", test_each=True, best=2) == [
        3,
        5,
    ]  # the test-best so far
    assert prunable(subs, [], "all", test_each=False, best=2) == []


def test_over_its_quota_the_agent_is_refused_with_the_sizes(tmp_path: Path) -> None:
    grader = _grader(tmp_path, output_quota=2**20)
    try:
        write_stub_checkpoint(grader.output_dir / "v1", echo_answers(3))
        with (grader.workspace / "code" / "big.bin").open("wb") as f:
            f.write(os.urandom(3 * 2**20))
        with pytest.raises(QuotaExceeded) as refused:
            grader.submit(str(grader.output_dir / "v1"))
        assert "over this run's quota of 0.0 GiB" in str(refused.value) and "the workspace" in str(refused.value)
        assert refused.value.http_status == 507
        assert grader.store.refusals()[-1]["kind"] == "quota"
        (grader.workspace / "code" / "big.bin").unlink()
        assert _submit(grader, "v2", dev=3, test=0) > 0  # room again
    finally:
        grader.stop()


def test_many_sibling_folders_are_measured_not_taken_as_unbounded(tmp_path: Path) -> None:
    """An agent's 65th checkpoint folder made its workspace read as 4294967296 GiB (the walk's depth limit
    counted pending sibling folders), and every honest submission after it was refused with a 507."""
    from autorl.grader.quota import tree_bytes

    for k in range(150):
        (tmp_path / "output" / f"v{k}").mkdir(parents=True)
        (tmp_path / "output" / f"v{k}" / "model.safetensors").write_bytes(b"x" * 5000)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        measured = tree_bytes(fd)
    finally:
        os.close(fd)
    assert 150 * 5000 <= measured < 2**30
    # a chain deeper than 64 folders is still taken as unbounded
    deep = tmp_path / "deep"
    for _ in range(70):
        deep = deep / "d"
    deep.mkdir(parents=True)
    fd = os.open(tmp_path / "deep", os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert tree_bytes(fd) == 2**62
    finally:
        os.close(fd)


@pytest.mark.e2e
def test_a_run_keeps_its_best_and_clean_trims_an_older_run(tmp_path: Path, home: Path) -> None:
    base = write_stub_checkpoint(tmp_path / "base", {**echo_answers(4), **echo_answers(5, "test")})
    agent = agent_folder(
        tmp_path / "agents",
        "three",
        """
        make_ckpt v1 6 null 6; submit v1
        make_ckpt v2 12 null 14; submit v2
        make_ckpt v3 9 null 8; submit v3
    """,
    )
    env = {"AUTORL_HOME": str(home)}
    runs = []
    for keep in ("best", "all"):
        proc = cli(
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
            "--no-audit",
            "--json",
            "--keep",
            keep,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs.append(json.loads(proc.stdout))
    kept, full = (Path(r["workspace"]) for r in runs)
    assert sorted(p.name for p in (kept / "output").iterdir()) == ["v2"]  # v2 is dev-best and test-best
    record = json.loads((kept / "result.json").read_text())
    # a model this small has its copies go once the run is recorded (a large one's, once each is scored)
    assert record["meta"]["disk"]["policy"] == "best" and record["meta"]["disk"]["pruned"] == [1, 3]
    assert record["row"]["test_best_of_k_k"] == 3  # every submission was scored on test before its copies went
    assert sorted(p.name for p in (full / "output").iterdir()) == ["v1", "v2", "v3"]
    dry = cli("clean", runs[1]["run_id"], "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    [planned] = json.loads(dry.stdout)
    assert planned["pruned"] == [1, 3] and planned["freed_bytes"] > 0
    assert sorted(p.name for p in (full / "output").iterdir()) == ["v1", "v2", "v3"]
    done = cli("clean", runs[1]["run_id"], env=env)
    assert done.returncode == 0 and "freed" in done.stdout
    assert list((full / "output").iterdir()) == []  # selected: the grader's copy of v2 is the record's
    assert cli("clean", "no-such-run", env=env).returncode == 2
