"""How the grader takes a submission: from the output directory pinned at start, by descriptor, never
through a link; the snapshot is what gets validated and evaluated; hostile trees give one-line 4xx errors;
nothing the grader writes in the workspace goes through a path the agent can replace."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autorl.audit import check_refusals
from autorl.errors import AutorlError, CheckpointTooLarge, InvalidCheckpointError, PathRefused, UsageError
from autorl.evaluation.identity import model_hash
from autorl.grader.core import Grader
from autorl.grader.snapshot import MANIFEST, Snapshot
from autorl.grader.store import FAILED, QUEUED
from autorl.grader.validation import FULL, LORA, OUTSIDE_OUTPUT, validate_checkpoint
from autorl.grader.worker import build_job, model_dirs
from autorl.jsonio import write_json_atomic

from .conftest import echo_answers, write_stub_checkpoint
from .grader_harness import make_config, start_grader


@pytest.fixture
def grader(tmp_path: Path) -> Iterator[Grader]:
    """The grader's logic in this process, without evaluation slots: submissions stay queued."""
    g = Grader(make_config(tmp_path, max_queue=500, max_submissions=500))
    yield g
    g.stop()


def out(g: Grader) -> Path:
    return g.output_dir


def snapshot_of(g: Grader, sid: int) -> Path:
    sub = g.store.get(sid)
    assert sub is not None
    return Path(str(sub["snapshot"]))


def refused(g: Grader, raw: Any, kind: type[Exception] = AutorlError) -> str:
    with pytest.raises(kind) as info:
        g.submit(raw)
    assert "\n" not in str(info.value)
    return str(info.value)


def last_refusal(g: Grader) -> dict[str, Any]:
    return g.store.refusals()[-1]


def test_honest_spellings_of_a_checkpoint_path_are_accepted(grader: Grader) -> None:
    write_stub_checkpoint(out(grader) / "v1", echo_answers(3))
    ids = [
        grader.submit(p)
        for p in (f"{out(grader)}/v1", "output/v1", "./output/v1/", os.path.realpath(out(grader) / "v1"))
    ]
    assert len(set(ids)) == 4
    snap = snapshot_of(grader, ids[0])
    assert sorted(p.name for p in snap.iterdir()) == [
        MANIFEST,
        "answers.json",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    ]
    assert all((p.stat().st_mode & 0o777) == 0o400 for p in snap.iterdir() if p.name != MANIFEST)
    hashes = {grader.store.get(i)["content_hash"] for i in ids}  # type: ignore[index]
    assert len(hashes) == 1


def test_a_file_swapped_after_it_was_checked_cannot_reach_the_evaluation(grader: Grader, tmp_path: Path) -> None:
    """The agent swaps files at the worst moment: after the grader looked at them, before it read them.
    What the grader copied is what it validated and what the worker will load."""
    ckpt = write_stub_checkpoint(out(grader) / "v", echo_answers(3))
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "config.json").write_text(json.dumps({"model_type": "stub", "auto_map": {"AutoModel": "m.M"}}))
    (evil / "modeling.py").write_text("import os\n")

    def swap(rel: str) -> None:  # each file is already open when this runs: replace it by name
        if rel == "config.json":
            os.replace(evil / "config.json", ckpt / "config.json")
            shutil.copy(evil / "modeling.py", ckpt / "modeling.py")
        if rel == "tokenizer.json":
            os.symlink("/etc/passwd", ckpt / "tokenizer.tmp")
            os.replace(ckpt / "tokenizer.tmp", ckpt / "tokenizer.json")

    sid = grader.submit("output/v", before_copy=swap)
    snap = snapshot_of(grader, sid)
    assert json.loads((snap / "config.json").read_text()) == {"model_type": "stub"}
    assert (snap / "tokenizer.json").read_text() == "{}" and not (snap / "tokenizer.json").is_symlink()
    assert not (snap / "modeling.py").exists()
    validate_checkpoint(snap)  # the copy passes on its own
    # the live directory now holds remote code and a link: submitting it again is refused
    refused(grader, "output/v")
    assert len(grader.store.all()) == 1


def test_a_racing_swapper_never_gets_remote_code_into_an_accepted_snapshot(grader: Grader) -> None:
    ckpt = write_stub_checkpoint(out(grader) / "v", echo_answers(3))
    good = json.dumps({"model_type": "stub"})
    bad = json.dumps({"model_type": "stub", "auto_map": {"AutoModel": "m.M"}})
    stop = threading.Event()
    scratch = out(grader) / "scratch"
    scratch.mkdir()

    def swapper() -> None:
        k = 0
        while not stop.is_set():
            k += 1
            tmp = scratch / f"c{k}"
            tmp.write_text(bad if k % 2 else good)
            os.replace(tmp, ckpt / "config.json")

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    accepted, refusals = [], 0
    try:
        for _ in range(60):
            try:
                accepted.append(grader.submit("output/v"))
            except InvalidCheckpointError:
                refusals += 1
    finally:
        stop.set()
        thread.join()
    assert accepted and refusals  # both states were seen
    for sid in accepted:
        assert "auto_map" not in (snapshot_of(grader, sid) / "config.json").read_text()


def test_output_replaced_by_a_link_to_root_reaches_nothing_and_is_recorded(grader: Grader, tmp_path: Path) -> None:
    other = write_stub_checkpoint(tmp_path / "other-run" / "snapshots" / "1", echo_answers(20))
    write_stub_checkpoint(out(grader) / "v1", echo_answers(3))
    assert grader.submit("output/v1") == 1
    moved = tmp_path / "moved-output"
    os.rename(out(grader), moved)
    os.symlink("/", out(grader))
    for raw in (
        f"{out(grader)}{other}",
        f"output{other}",
        str(other),
        f"{out(grader)}/../../other-run/snapshots/1",
        "output/v1",
    ):
        message = refused(grader, raw, PathRefused)
        assert last_refusal(grader)["kind"] == OUTSIDE_OUTPUT, message
    assert "replaced by a link" in message
    # the refusals are flagged by the audit whatever their wording
    flags = check_refusals(grader.store.refusals(), grader.workspace)
    assert flags and flags[0].name == "submissions-outside-output" and str(other) in json.dumps(flags[0].evidence)
    assert [s["id"] for s in grader.store.all()] == [1]


def test_output_deleted_and_recreated_gives_a_clear_error(grader: Grader) -> None:
    shutil.rmtree(out(grader))
    write_stub_checkpoint(out(grader) / "v1", echo_answers(3))
    message = refused(grader, "output/v1", UsageError)
    assert "replaced by another directory" in message and "does not exist" in message


def test_links_anywhere_are_refused_as_outside(grader: Grader, tmp_path: Path) -> None:
    write_stub_checkpoint(tmp_path / "outside", echo_answers(20))
    os.symlink(tmp_path / "outside", out(grader) / "dir_link")
    inner = write_stub_checkpoint(out(grader) / "file_link" / "nested")
    (inner / "tokenizer.json").unlink()
    os.symlink(tmp_path / "outside" / "tokenizer.json", inner / "tokenizer.json")
    os.symlink("loop", out(grader) / "loop")
    write_stub_checkpoint(out(grader) / "inner_link")
    os.symlink("../inner_link", out(grader) / "inner_link" / "sibling")  # even one staying inside
    for raw in ("output/dir_link", "output/file_link/nested", "output/loop", "output/inner_link", "output/dir_link/x"):
        refused(grader, raw, PathRefused)
        assert last_refusal(grader)["kind"] == OUTSIDE_OUTPUT
    for raw in ("output", "output/", 5, "", "output/a\x00b"):
        refused(grader, raw, UsageError)
        assert last_refusal(grader)["kind"] == "bad_request"


def test_special_files_are_refused_without_blocking(grader: Grader) -> None:
    fifo = write_stub_checkpoint(out(grader) / "fifo")
    os.mkfifo(fifo / "extra.safetensors")  # nobody ever writes: opening it to read would block
    zero = write_stub_checkpoint(out(grader) / "zero")
    (zero / "model.safetensors").unlink()
    os.symlink("/dev/zero", zero / "model.safetensors")
    assert "not a regular file" in refused(grader, "output/fifo", InvalidCheckpointError)
    assert "link" in refused(grader, "output/zero", PathRefused)
    os.mkfifo(out(grader) / "fifo_path")
    assert "not a directory" in refused(grader, "output/fifo_path", UsageError)
    assert not list((Path(grader.store_dir) / "snapshots").iterdir())  # nothing half-copied is left


def test_size_and_count_limits_hold_while_copying(tmp_path: Path) -> None:
    g = Grader(make_config(tmp_path, max_bytes=10 * 2**20, max_files=8))
    try:
        sparse = write_stub_checkpoint(g.output_dir / "sparse")
        with open(sparse / "big.safetensors", "wb") as f:
            f.truncate(100 * 2**30)  # 100 GB, no blocks
        assert "larger than" in refused(g, "output/sparse", CheckpointTooLarge)
        assert g.store.refusals()[-1]["kind"] == "too_large"
        many = write_stub_checkpoint(g.output_dir / "many")
        for k in range(10):
            (many / f"f{k}.txt").write_text("x")
        assert "more than 8 files" in refused(g, "output/many", InvalidCheckpointError)
        # a file that grows or shrinks after it was measured is refused, whatever the limit
        grow = write_stub_checkpoint(g.output_dir / "grow")

        def append(rel: str) -> None:
            if rel == "model.safetensors":
                with open(grow / rel, "ab") as f:
                    f.write(b"\0" * 4096)

        with pytest.raises(InvalidCheckpointError, match="grew while it was being copied"):
            g.submit("output/grow", before_copy=append)
        shrink = write_stub_checkpoint(g.output_dir / "shrink")

        def cut(rel: str) -> None:
            if rel == "model.safetensors":
                os.truncate(shrink / rel, 10)

        with pytest.raises(InvalidCheckpointError, match="shrank while it was being copied"):
            g.submit("output/shrink", before_copy=cut)
        # zeros are copied as holes: a mostly sparse file within the limit does not fill the store
        holes = write_stub_checkpoint(g.output_dir / "holes")
        with open(holes / "pad.dat", "wb") as f:
            f.truncate(8 * 2**20)
        snap = snapshot_of(g, g.submit("output/holes"))
        assert (snap / "pad.dat").stat().st_size == 8 * 2**20
        assert (snap / "pad.dat").stat().st_blocks * 512 < 2**20
    finally:
        g.stop()


def test_pickles_and_references_outside_the_checkpoint_are_refused(grader: Grader) -> None:
    cases: dict[str, tuple[str, bytes | str]] = {
        "bin_beside": ("pytorch_model.bin", b"\x80\x04K\x01."),
        "pt_beside": ("optimizer.pt", b"PK\x03\x04"),
        "magic_pickle": ("weights.dat", b"\x80\x02}q\x00."),
        "magic_zip": ("extra/state", b"PK\x03\x04rest"),
        "tok_abs": ("tokenizer_config.json", json.dumps({"tokenizer_file": "/home/u/.cache/tokenizer.json"})),
        "vocab_up": ("tokenizer_config.json", json.dumps({"vocab_file": "../../other/vocab.json"})),
        "merges_home": ("tokenizer_config.json", json.dumps({"merges_file": "~/merges.txt"})),
        "nested_path": ("generation_config.json", json.dumps({"a": [{"b": "/etc/passwd"}]})),
        "auto_map_nested": ("tokenizer_config.json", json.dumps({"x": {"auto_map": {"AutoTokenizer": "t.T"}}})),
        "remote_code": ("config.json", json.dumps({"model_type": "stub", "trust_remote_code": True})),
        "deep": ("config.json", "[" * 100_000 + "]" * 100_000),
        "deep_walk": ("special_tokens_map.json", json.dumps({"a": json.loads("[" * 200 + "]" * 200)})),
        "pyc": ("__pycache__/m.cpython-311.pyc", b"\x00"),
    }
    for name, (rel, content) in cases.items():
        ckpt = write_stub_checkpoint(out(grader) / name)
        (ckpt / rel).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            (ckpt / rel).write_bytes(content)
        else:
            (ckpt / rel).write_text(content)
        message = refused(grader, f"output/{name}", InvalidCheckpointError)
        assert grader.store.refusals()[-1]["kind"] == "invalid_checkpoint", (name, message)
    assert grader.store.all() == []
    # provenance notes that transformers and peft write are not references: an honest save is accepted
    honest = write_stub_checkpoint(out(grader) / "honest")
    (honest / "config.json").write_text(json.dumps({"model_type": "stub", "_name_or_path": "/ws/models/base"}))
    (honest / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "name_or_path": "/ws/models/base",
                "chat_template": "{{ '/' }} {% if a %}..{% endif %}",
                "added_tokens_decoder": {"5": {"content": "/"}},
                "tokenizer_file": None,
            }
        )
    )
    assert grader.submit("output/honest") == 1


def test_odd_names_deep_trees_and_huge_json_are_one_line_4xx(tmp_path: Path) -> None:
    g = start_grader(make_config(tmp_path))
    deep_root = g.output / "deep"
    try:
        odd = write_stub_checkpoint(g.output / "odd")
        fd = os.open(odd, os.O_RDONLY | os.O_DIRECTORY)
        os.close(os.open(b"\xff\xfe\n.json", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        os.close(fd)
        _nest(write_stub_checkpoint(deep_root), 10_000)
        huge = write_stub_checkpoint(g.output / "huge")
        with open(huge / "config.json", "r+b") as f:
            f.truncate(2 * 2**30)
        nested = write_stub_checkpoint(g.output / "nested")
        (nested / "config.json").write_text("[" * 100_000 + "]" * 100_000)
        loop = write_stub_checkpoint(g.output / "loop")
        os.symlink("b", loop / "a")
        os.symlink("a", loop / "b")
        os.mkfifo(write_stub_checkpoint(g.output / "fifo") / "model.safetensors.tmp")
        write_stub_checkpoint(g.output / "good", echo_answers(4))
        expected = {
            "odd": 422,
            "deep": 422,
            "huge": 413,
            "nested": 422,
            "loop": 400,
            "fifo": 422,
            "good/../good": 400,
            "good\\..": 400,
        }
        with g.client() as c:
            for name, status in expected.items():
                r = c.post("/submit", json={"model_path": f"output/{name}"})
                assert r.status_code == status, (name, r.text)
                assert list(r.json()) == ["error"] and "\n" not in r.json()["error"], name
            good = c.post("/submit", json={"model_path": f"{g.output}/good"})
            assert good.status_code == 200 and good.json()["score"] == pytest.approx(20.0)
        state = g.admin_http().get("/admin/state").json()
        assert [r["kind"] for r in state["refusals"]] == [
            "invalid_checkpoint",
            "invalid_checkpoint",
            "too_large",
            "invalid_checkpoint",
            OUTSIDE_OUTPUT,
            "invalid_checkpoint",
            OUTSIDE_OUTPUT,
            "bad_request",
        ]
    finally:
        g.stop()
        _unnest(deep_root)


def _nest(root: Path, levels: int) -> None:
    """``root/d/d/...`` ``levels`` deep, built by descriptor (the path is longer than PATH_MAX)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)


def _unnest(root: Path) -> None:
    """Remove what :func:`_nest` built, deepest first, without recursion."""
    if not root.exists():
        return
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
    while True:
        try:
            fds.append(os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        except FileNotFoundError:
            break
    os.close(fds.pop())
    while fds:
        os.rmdir("d", dir_fd=fds[-1])
        os.close(fds.pop())
    shutil.rmtree(root)


def test_scores_mirror_replaces_planted_links_and_never_writes_through_them(grader: Grader, tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text("ORIGINAL")
    victim.chmod(0o644)
    ws = grader.workspace
    os.symlink(victim, ws / "scores.json")
    os.symlink(victim, ws / ".scores.json.tmp")  # the name an earlier version used for its temp file
    write_stub_checkpoint(out(grader) / "v", echo_answers(3))
    grader.submit("output/v")
    assert victim.read_text() == "ORIGINAL" and (victim.stat().st_mode & 0o777) == 0o644
    mirror = ws / "scores.json"
    assert stat.S_ISREG(os.lstat(mirror).st_mode) and json.loads(mirror.read_text())[0]["submission_id"] == 1
    assert (mirror.stat().st_mode & 0o777) == 0o444
    assert sorted(p.name for p in ws.iterdir() if p.name.startswith(".scores")) == [".scores.json.tmp"]
    # the workspace itself replaced by a link: the mirror still goes into the pinned directory
    moved = tmp_path / "ws-moved"
    os.rename(ws, moved)
    os.symlink(tmp_path, ws)
    grader.write_mirror()
    assert not (tmp_path / "scores.json").exists() and (moved / "scores.json").is_file()


def test_write_json_atomic_replaces_a_link_and_uses_fresh_temp_names(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("ORIGINAL")
    target_dir = tmp_path / "ws"
    target_dir.mkdir()
    os.symlink(victim, target_dir / "result.json")
    for pid_name in (f".result.json.{os.getpid()}.tmp", ".result.json.tmp"):  # names the old code would use
        os.symlink(victim, target_dir / pid_name)
    write_json_atomic(target_dir / "result.json", {"a": 1})
    write_json_atomic(target_dir / "result.json", {"a": 2})
    assert victim.read_text() == "ORIGINAL"
    assert not (target_dir / "result.json").is_symlink()
    assert json.loads((target_dir / "result.json").read_text()) == {"a": 2}
    assert len(list(target_dir.iterdir())) == 3  # the result and the two planted links, no temp files left


def test_a_store_written_before_refusals_had_a_kind_opens_and_records_kinds(tmp_path: Path) -> None:
    import sqlite3

    from autorl.grader.store import Store

    db = sqlite3.connect(tmp_path / "grader.db")
    db.execute(
        "CREATE TABLE refusals (id INTEGER PRIMARY KEY AUTOINCREMENT, created_at REAL NOT NULL, "
        "model_path TEXT NOT NULL, reason TEXT NOT NULL)"
    )
    db.execute("INSERT INTO refusals (created_at, model_path, reason) VALUES (0, '/etc', 'not inside')")
    db.commit()
    db.close()
    store = Store(tmp_path / "grader.db")
    store.add_refusal("x" * 5000 + "\udcff", "reason", OUTSIDE_OUTPUT)
    old, new = store.refusals()
    store.close()
    assert old["kind"] == "bad_request" and new["kind"] == OUTSIDE_OUTPUT and len(new["model_path"]) == 1000


def _adapter(folder: Path) -> Path:
    """The smallest LoRA adapter validation accepts: its config and an (empty) safetensors file."""
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4}))
    (folder / "adapter_model.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")
    return folder


def test_a_submission_is_one_snapshot_handle_from_intake_to_its_worker_job(grader: Grader, tmp_path: Path) -> None:
    full = write_stub_checkpoint(out(grader) / "full", echo_answers(3))
    lora = _adapter(out(grader) / "lora")
    snaps = [Snapshot.from_row(grader.store.get(grader.submit(p))) for p in ("output/full", f"{out(grader)}/lora")]
    store = Path(grader.config.store_dir) / "snapshots"
    assert [(s.path, s.kind) for s in snaps] == [(store / "1", FULL), (store / "2", LORA)]
    # the digest is of the bytes the agent wrote, as copied (wherever they lie, the same bytes hash the same)
    assert [s.digest for s in snaps] == [model_hash(full), model_hash(lora)]
    # the job a slot sends names that same snapshot; the worker applies the base model under an adapter only
    config = dataclasses.replace(
        grader.config, base_model=str(tmp_path / "base"), baseline_cache_dir=str(tmp_path / "cache")
    )
    jobs = [
        json.loads(json.dumps(build_job(config, store.parent, s, "dev", f"sub{k}", tmp_path)))
        for k, s in enumerate([*snaps, None])
    ]
    assert [Snapshot.from_row(j["snapshot"]) for j in jobs[:2]] == snaps
    assert [model_dirs(j) for j in jobs] == [
        (store / "1", None),
        (store / "2", tmp_path / "base"),
        (tmp_path / "base", None),
    ]
    assert [j["cache_dir"] for j in jobs] == [None, None, str(tmp_path / "cache")]  # only the base's is cached


def test_a_queued_row_without_its_snapshot_fails_that_submission_alone(grader: Grader) -> None:
    sid = grader.store.add_submission("output/v1")  # a store damaged between the intake and the evaluation
    grader.store.update(sid, status=QUEUED)
    grader.start()
    for _ in range(600):
        row = grader.store.get(sid)
        if row is not None and row["status"] == FAILED:
            break
        time.sleep(0.05)
    # failed with the reason, in the slot's loop (an error that escaped it would leave the row running)
    assert row is not None and row["status"] == FAILED and row["error"] == "no snapshot recorded"
