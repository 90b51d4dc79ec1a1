"""The plugin is discovered through its entry point when installed alone with the core."""

from __future__ import annotations

from autorl.testing import assert_plugin_discovered


def test_plugin_is_discovered() -> None:
    assert_plugin_discovered("humaneval", "autorl-humaneval")
