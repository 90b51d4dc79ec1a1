"""The ``doctor_checks`` hook: a plugin's own lines in ``autorl doctor``; a hook that raises is a failed line."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from autorl import hookimpl


def test_plugin_lines_are_reported_and_a_raising_hook_is_one_failed_line(register_plugin: Any) -> None:
    from autorl.cli.doctor import plugin_checks

    @hookimpl
    def reports(report: Any) -> None:
        report("my-bench data", True, "/data/my-bench")
        report("my-bench weights", False, "missing", fix="run my-bench-download")

    @hookimpl
    def raises(report: Any) -> None:
        report("half done", True, "before the crash")
        raise RuntimeError("no such file\nsecond line")

    register_plugin(SimpleNamespace(doctor_checks=reports), name="good-plugin")
    register_plugin(SimpleNamespace(doctor_checks=raises), name="bad-plugin")
    rows = {c.name: c for c in plugin_checks()}
    assert rows["my-bench data"].ok and rows["my-bench data"].detail == "/data/my-bench"
    assert not rows["my-bench weights"].ok and rows["my-bench weights"].fix == "run my-bench-download"
    assert rows["half done"].ok
    bad = rows["plugin bad-plugin"]
    assert not bad.ok and bad.detail == "its doctor check failed: RuntimeError: no such file"
