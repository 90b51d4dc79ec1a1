"""A pytest plugin for plugin authors (loaded automatically through the ``pytest11`` entry point).

Fixtures:
    autorl_pm: a fresh plugin manager for one test, installed as the process-wide one and restored after.
    register_plugin: ``register_plugin(module_or_object, name=..., distribution=...)`` adds a plugin to
        ``autorl_pm`` for one test, as if a distribution had installed it.
    autorl_home: an empty ``AUTORL_HOME`` for one test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autorl.plugins import PluginInfo, PluginManager, create_plugin_manager, set_plugin_manager


@pytest.fixture
def autorl_pm() -> Iterator[PluginManager]:
    """A fresh plugin manager with the built-ins and no installed entry points."""
    pm = create_plugin_manager(entry_points=False)
    previous = set_plugin_manager(pm)
    try:
        yield pm
    finally:
        set_plugin_manager(previous)


@pytest.fixture
def register_plugin(autorl_pm: PluginManager) -> Callable[..., Any]:
    """Register a module or object with hookimpls on ``autorl_pm`` for this test."""

    def register(plugin: Any, name: str | None = None, distribution: str = "test-plugin", version: str = "0") -> Any:
        plugin_name = name or getattr(plugin, "__name__", None) or f"plugin-{id(plugin)}"
        autorl_pm.add(plugin, PluginInfo(plugin_name, distribution, version, plugin_name, False))
        autorl_pm.__dict__.pop("_autorl_registry", None)
        return plugin

    return register


@pytest.fixture
def autorl_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty AUTORL_HOME for this test."""
    home = tmp_path / "autorl-home"
    monkeypatch.setenv("AUTORL_HOME", str(home))
    return home
