"""autorl.jsonio: files written whole or not at all, JSON Lines that read back as written, errors that name the line."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from autorl.errors import AutorlError
from autorl.jsonio import read_jsonl, write_json_atomic, write_jsonl_atomic


def test_jsonl_round_trip_keeps_rows_order_and_text(tmp_path: Path) -> None:
    rows = [{"question": "What is 2+2?", "answer": "4"}, {"q": "ünïcode ✓", "n": [1, 2.5, None]}, "a string", 7]
    target = tmp_path / "deeper" / "train.jsonl"
    write_jsonl_atomic(target, iter(rows))
    assert read_jsonl(target) == rows
    text = target.read_text()
    assert text.endswith("\n") and len(text.splitlines()) == len(rows)
    assert text.splitlines()[0] == json.dumps(rows[0])  # the format plugins wrote by hand: compact, one a line


def test_write_jsonl_of_no_rows_is_an_empty_file(tmp_path: Path) -> None:
    write_jsonl_atomic(tmp_path / "empty.jsonl", [])
    assert (tmp_path / "empty.jsonl").read_text() == "" and read_jsonl(tmp_path / "empty.jsonl") == []


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"a": 1}\n\n   \n{"a": 2}\n')
    assert read_jsonl(tmp_path / "a.jsonl") == [{"a": 1}, {"a": 2}]


def test_a_bad_line_is_one_error_naming_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"ok": 1}\n\n{"truncated": \n{"ok": 2}\n')
    with pytest.raises(AutorlError) as info:
        read_jsonl(path)
    message = str(info.value)
    assert str(path) in message and "line 3" in message and "\n" not in message


def test_a_missing_or_binary_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(AutorlError, match=r"nothing\.jsonl"):
        read_jsonl(tmp_path / "nothing.jsonl")
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00{")
    with pytest.raises(AutorlError, match=r"bin\.jsonl"):
        read_jsonl(tmp_path / "bin.jsonl")


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    write_json_atomic(target, {"score": 1})

    def rows() -> Iterator[dict[str, int]]:
        yield {"fine": 1}
        raise RuntimeError("the producer failed half way")

    with pytest.raises(RuntimeError):
        write_jsonl_atomic(target, rows())
    with pytest.raises(TypeError):
        write_json_atomic(target, {"bad": 1}, mode="0644")  # type: ignore[arg-type]
    assert json.loads(target.read_text()) == {"score": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


def test_a_write_that_fails_inside_the_temp_file_removes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        write_json_atomic(tmp_path / "result.json", {"a": 1})
    assert list(tmp_path.iterdir()) == []


def test_writes_replace_a_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("ORIGINAL")
    os.symlink(victim, tmp_path / "train.jsonl")
    write_jsonl_atomic(tmp_path / "train.jsonl", [{"a": 1}])
    assert victim.read_text() == "ORIGINAL" and not (tmp_path / "train.jsonl").is_symlink()


def test_files_are_private_unless_a_mode_is_given(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / "private.json", {})
    write_jsonl_atomic(tmp_path / "shared.jsonl", [{}], mode=0o644)
    assert stat.S_IMODE((tmp_path / "private.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "shared.jsonl").stat().st_mode) == 0o644


def test_values_json_lacks_are_written_as_text(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / "r.json", {"path": tmp_path})
    assert json.loads((tmp_path / "r.json").read_text()) == {"path": str(tmp_path)}


def test_if_changed_leaves_a_file_that_holds_the_rows_and_replaces_anything_else(tmp_path: Path) -> None:
    target = tmp_path / "train.jsonl"
    write_jsonl_atomic(target, [{"a": 1}])
    target.chmod(0o444)  # as prepare_data leaves training data
    before = target.stat()
    write_jsonl_atomic(target, [{"a": 1}], if_changed=True)
    assert target.stat().st_ino == before.st_ino and stat.S_IMODE(target.stat().st_mode) == 0o444
    write_jsonl_atomic(target, [{"a": 2}], if_changed=True)
    assert target.stat().st_ino != before.st_ino and read_jsonl(target) == [{"a": 2}]
    same = tmp_path / "same.jsonl"
    same.write_text('{"a": 2}\n')
    target.unlink()
    os.symlink(same, target)  # the same text behind a link is no reason to keep the link
    write_jsonl_atomic(target, [{"a": 2}], if_changed=True)
    assert not target.is_symlink() and read_jsonl(target) == [{"a": 2}]
