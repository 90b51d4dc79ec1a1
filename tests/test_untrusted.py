"""The doorway for agent-written files: links, FIFOs, devices, huge and malformed files never get through."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from autorl import untrusted
from autorl.untrusted import UntrustedFileError


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "agent.log").write_text("hello\nworld\n")
    (tmp_path / "secret.json").write_text('{"admin_token": "s3cret"}')
    return root


def test_regular_file_reads(ws: Path) -> None:
    assert untrusted.read_text(ws, "logs/agent.log", limit=100) == "hello\nworld\n"
    assert untrusted.read_bytes(ws, "logs/agent.log", limit=3) == b"hel"
    assert untrusted.read_tail(ws, "logs/agent.log", limit=6) == b"world\n"


def test_links_are_never_followed_at_the_end_or_on_the_way(ws: Path) -> None:
    (ws / "usage.json").symlink_to(ws.parent / "secret.json")
    (ws / "up").symlink_to(ws.parent)
    os.link(ws / "logs" / "agent.log", ws / "hard.log")  # a hard link to a file inside: still a regular file
    with pytest.raises(UntrustedFileError):
        untrusted.read_json(ws, "usage.json", limit=1000)
    with pytest.raises(UntrustedFileError):
        untrusted.read_json(ws, "up/secret.json", limit=1000)
    with pytest.raises(UntrustedFileError):
        untrusted.read_bytes(ws, "../secret.json", limit=1000)
    with pytest.raises(UntrustedFileError):
        untrusted.read_bytes(ws, "/etc/passwd", limit=1000)
    assert untrusted.read_text(ws, "hard.log", limit=100).startswith("hello")


def test_a_directory_is_opened_beneath_its_root_without_following_links(ws: Path) -> None:
    (ws / "up").symlink_to(ws.parent)
    (ws / "logs" / "out").symlink_to(ws.parent)
    with untrusted.open_dir_beneath(ws, "logs") as fd:
        assert sorted(os.listdir(fd)) == ["agent.log", "out"]
    for rel in ("up", "logs/out", "up/ws/logs", "../ws", "logs/agent.log", "missing"):
        with pytest.raises(UntrustedFileError), untrusted.open_dir_beneath(ws, rel):
            pass


def test_fifo_and_devices_do_not_hang(ws: Path) -> None:
    os.mkfifo(ws / "fifo")
    (ws / "zero").symlink_to("/dev/zero")
    result: list[BaseException] = []

    def read() -> None:
        for name in ("fifo", "zero"):
            try:
                untrusted.read_bytes(ws, name, limit=10)
            except UntrustedFileError as exc:
                result.append(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive() and len(result) == 2


def test_sparse_file_is_capped(ws: Path) -> None:
    with open(ws / "big.log", "wb") as f:
        f.truncate(100 * 2**30)
    assert len(untrusted.read_bytes(ws, "big.log", limit=4096)) == 4096
    assert len(untrusted.read_tail(ws, "big.log", limit=4096)) == 4096
    with pytest.raises(UntrustedFileError, match="larger than"):
        untrusted.read_json(ws, "big.log", limit=4096)


@pytest.mark.parametrize(
    "text", ["[" * 100_000, "{" * 50, '{"a": ' * 70 + "1" + "}" * 70, "not json", '{"a": 1', "\udcff"]
)
def test_malformed_or_deep_json_is_an_error_value(ws: Path, text: str) -> None:
    (ws / "x.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(UntrustedFileError):
        untrusted.read_json(ws, "x.json", limit=1 << 20)


def test_jsonl_skips_bad_lines_and_counts_them(ws: Path) -> None:
    (ws / "t.jsonl").write_text('{"step": 1}\n[1]\n' + "[" * 5000 + '\n{"step": "<b>2</b>"}\nnope\n')
    stats = untrusted.JsonlStats()
    rows = list(untrusted.iter_jsonl(ws, "t.jsonl", limit=1 << 20, stats=stats))
    assert rows == [{"step": 1}, {"step": "<b>2</b>"}]
    assert stats.bad_lines == 3
    tail = list(untrusted.iter_jsonl(ws, "t.jsonl", limit=30, tail=True, stats=(s := untrusted.JsonlStats())))
    assert tail == [{"step": "<b>2</b>"}] and s.truncated


def test_walk_lists_regular_files_only(ws: Path) -> None:
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "c.txt").write_text("c")
    (ws / "a" / "loop").symlink_to(ws / "a")
    (ws / "a" / "out").symlink_to("/")
    os.mkfifo(ws / "a" / "fifo")
    found = sorted(rel for rel, _ in untrusted.walk_files(ws))
    assert found == ["a/b/c.txt", "logs/agent.log"]
    assert len(list(untrusted.walk_files(ws, max_files=1))) == 1


def test_sha256_reads_beneath_the_root_only(ws: Path) -> None:
    import hashlib

    assert untrusted.sha256(ws, "logs/agent.log", limit=1 << 20) == hashlib.sha256(b"hello\nworld\n").hexdigest()
    (ws / "link").symlink_to(ws.parent / "secret.json")
    with pytest.raises(UntrustedFileError):
        untrusted.sha256(ws, "link", limit=1 << 20)
