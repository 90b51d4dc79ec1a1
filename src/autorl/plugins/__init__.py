"""Plugins: the one loader (built-ins, plugin source folders, the ``autorl`` entry-point group) and the registry
of what they register (typed accessors, names resolved at entry points only, did-you-mean).

    loader    the plugin manager: which plugins load, in which order, with which warnings
    registry  benchmarks, agents and backends by name; ``--task ./folder`` and ``--agent ./folder``
    agent_folder  agents defined by a folder (``config.yaml`` + a start script): ``--agent ./folder``,
                  ``AUTORL_AGENTS_PATH`` and the built-in coding agents

The loader's names are handed on here, where ``autorl.plugins`` named them before it was a package.
"""

from __future__ import annotations

from autorl.plugins.loader import (
    PluginInfo,
    PluginManager,
    PluginWarning,
    SourcePlugin,
    add_source_folder,
    create_plugin_manager,
    get_plugin_manager,
    read_source_folder,
    set_plugin_manager,
)

__all__ = [
    "PluginInfo",
    "PluginManager",
    "PluginWarning",
    "SourcePlugin",
    "add_source_folder",
    "create_plugin_manager",
    "get_plugin_manager",
    "read_source_folder",
    "set_plugin_manager",
]
