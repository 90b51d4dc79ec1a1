"""The only place plugins are loaded: built-ins plus the ``autorl`` entry-point group.

``AUTORL_LOAD_PLUGINS`` (comma list) loads only the named external plugins; ``AUTORL_DISABLE_PLUGINS``
skips the named ones. A name is an entry-point name or a distribution name. A plugin that fails to
import is a warning naming it, never a crash.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pluggy

from autorl import hookspecs

ENTRY_POINT_GROUP = "autorl"
BUILTIN_PLUGINS = (
    "autorl.default_plugins.benchmarks",
    "autorl.default_plugins.agents",
    "autorl.default_plugins.backends",
    "autorl.default_plugins.executors",
)


class PluginWarning(UserWarning):
    """A plugin could not be loaded; the others still are."""


@dataclass(frozen=True)
class PluginInfo:
    """Where a loaded plugin comes from."""

    name: str
    distribution: str
    version: str
    module: str
    builtin: bool


class PluginManager(pluggy.PluginManager):
    """A pluggy manager that also remembers which distribution each plugin came from."""

    def __init__(self) -> None:
        super().__init__("autorl")
        self.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}
        #: bumped by every registration and unregistration: what the registry collected before is stale
        self.generation = 0

    def add(self, module: object, info: PluginInfo) -> None:
        """Register ``module`` as the plugin ``info.name`` and remember where it comes from."""
        self.register(module, name=info.name)
        self.infos[info.name] = info

    def register(self, plugin: object, name: str | None = None) -> str | None:
        """Register a plugin (see :meth:`pluggy.PluginManager.register`)."""
        registered = super().register(plugin, name)
        self.generation += 1
        return registered

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any | None:
        """Unregister a plugin (see :meth:`pluggy.PluginManager.unregister`)."""
        removed = super().unregister(plugin, name)
        self.generation += 1
        return removed


def _names(value: str | None) -> set[str] | None:
    if value is None:
        return None
    return {part.strip() for part in value.split(",") if part.strip()}


def _core_version() -> str:
    try:
        return metadata.version("autorl")
    except metadata.PackageNotFoundError:  # running from a source tree
        return "0+unknown"


def create_plugin_manager(
    *, entry_points: bool = True, builtins: bool = True, env: Mapping[str, str] | None = None
) -> PluginManager:
    """Build a fresh plugin manager: built-ins, then every allowed entry point."""
    env = os.environ if env is None else env
    only = _names(env.get("AUTORL_LOAD_PLUGINS"))
    disabled = _names(env.get("AUTORL_DISABLE_PLUGINS")) or set()
    pm = PluginManager()
    if builtins:
        for module_name in BUILTIN_PLUGINS:
            short = module_name.rsplit(".", 1)[-1]
            if {module_name, short} & disabled:
                continue
            module = importlib.import_module(module_name)
            pm.add(module, PluginInfo(module_name, "autorl", _core_version(), module_name, True))
    if not entry_points:
        return pm
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist_name = ep.dist.name if ep.dist is not None else "<unknown>"
        names = {ep.name, dist_name}
        if only is not None and not names & only:
            continue
        if names & disabled:
            continue
        if ep.name in pm.infos:
            other = pm.infos[ep.name].distribution
            warnings.warn(
                f"plugin {ep.name!r} from {dist_name} is skipped: {other} already provides a plugin of that name",
                PluginWarning,
                stacklevel=2,
            )
            continue
        try:
            module = ep.load()
            pm.add(
                module,
                PluginInfo(ep.name, dist_name, ep.dist.version if ep.dist else "?", ep.value, False),
            )
        except Exception as exc:  # a broken third-party plugin must not take the harness down
            warnings.warn(
                f"plugin {ep.name!r} ({dist_name}) failed to load and is skipped: {type(exc).__name__}: {exc}",
                PluginWarning,
                stacklevel=2,
            )
    return pm


_pm: PluginManager | None = None


def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager, created on first use."""
    global _pm
    if _pm is None:
        _pm = create_plugin_manager()
    return _pm


def set_plugin_manager(pm: PluginManager | None) -> PluginManager | None:
    """Swap the process-wide manager (tests use this); returns the previous one."""
    global _pm
    previous, _pm = _pm, pm
    return previous
