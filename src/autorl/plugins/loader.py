"""The only place plugins are loaded: built-ins, plugin source folders, and the ``autorl`` entry-point group.

``AUTORL_LOAD_PLUGINS`` (comma list) loads only the named external plugins; ``AUTORL_DISABLE_PLUGINS``
skips the named ones. A name is an entry-point name or a distribution name. A plugin that fails to
import is a warning naming it, never a crash. ``AUTORL_PLUGIN_FOLDERS`` (folders joined by ``os.pathsep``)
names plugin source folders loaded as if installed: ``autorl run --task ./my-plugin`` sets it, so that the
grader's processes, which inherit it, load the same plugin.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pluggy

from autorl import hookspecs

ENTRY_POINT_GROUP = "autorl"
#: plugin source folders to load as if installed, joined by ``os.pathsep``
SOURCE_FOLDERS_ENV = "AUTORL_PLUGIN_FOLDERS"
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

    def changed(self) -> None:
        """What the plugins register may have changed (a plugin took a folder as a task): collect it again."""
        self.generation += 1


@dataclass(frozen=True)
class SourcePlugin:
    """A plugin's source folder: its project, version, ``autorl`` entry points and the folder it imports from."""

    folder: Path
    project: str
    version: str
    entry_points: dict[str, str]
    import_root: Path


def read_source_folder(folder: Path) -> SourcePlugin | None:
    """The plugin ``folder``'s ``pyproject.toml`` declares (``[project.entry-points.autorl]``), importing from
    ``src/`` where its package is there (the scaffold's layout) or else from the folder; None when the folder
    declares no ``autorl`` entry point (or has no readable ``pyproject.toml``)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: no TOML reader in the standard library
        return None
    try:
        project = tomllib.loads((folder / "pyproject.toml").read_text()).get("project") or {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    points = (project.get("entry-points") or {}).get(ENTRY_POINT_GROUP) if isinstance(project, dict) else None
    if not isinstance(points, dict) or not points or not all(isinstance(v, str) for v in points.values()):
        return None
    top = str(next(iter(points.values()))).split(":")[0].split(".")[0]
    root = folder / "src" if (folder / "src" / top).exists() or (folder / "src" / f"{top}.py").exists() else folder
    return SourcePlugin(
        folder,
        str(project.get("name") or folder.name),
        str(project.get("version") or "source"),
        {str(k): str(v) for k, v in points.items()},
        root,
    )


def add_source_folder(pm: PluginManager, source: SourcePlugin) -> list[str]:
    """Load ``source``'s entry points into ``pm`` (its import root first on ``sys.path``) and name the folder in
    ``AUTORL_PLUGIN_FOLDERS`` for the processes this one starts; the names of its plugins. One that fails to
    import is a warning, as an installed one's is."""
    folders = [f for f in os.environ.get(SOURCE_FOLDERS_ENV, "").split(os.pathsep) if f]
    if str(source.folder) not in folders:
        os.environ[SOURCE_FOLDERS_ENV] = os.pathsep.join([*folders, str(source.folder)])
    if str(source.import_root) not in sys.path:
        # before every installed package, after the caller's own script folder: sys.path[0] stays what it was,
        # which the agent's sandbox tells apart from the Python environment it shows (autorl.sandbox.host)
        sys.path.insert(1 if sys.path else 0, str(source.import_root))
    names = []
    for name, value in sorted(source.entry_points.items()):
        if name in pm.infos:  # loaded already: from this folder before, or installed under the same name
            names.append(name)
            continue
        module_name, _, attr = value.partition(":")
        try:
            module = importlib.import_module(module_name)
            pm.add(
                getattr(module, attr) if attr else module,
                PluginInfo(name, f"{source.project} (source {source.folder})", source.version, value, False),
            )
            names.append(name)
        except Exception as exc:
            warnings.warn(
                f"plugin {name!r} of the source folder {source.folder} failed to load and is skipped: "
                f"{type(exc).__name__}: {exc}",
                PluginWarning,
                stacklevel=2,
            )
    return names


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
    for folder in filter(None, env.get(SOURCE_FOLDERS_ENV, "").split(os.pathsep)):
        source = read_source_folder(Path(folder))
        if source is None:
            warnings.warn(
                f"{SOURCE_FOLDERS_ENV}: {folder} declares no autorl plugin (pyproject.toml's "
                "[project.entry-points.autorl])",
                PluginWarning,
                stacklevel=2,
            )
        else:
            add_source_folder(pm, source)
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist_name = ep.dist.name if ep.dist is not None else "<unknown>"
        names = {ep.name, dist_name}
        if only is not None and not names & only:
            continue
        if names & disabled:
            continue
        if ep.name in pm.infos and pm.infos[ep.name].module == ep.value:
            continue  # the same plugin, installed and named by its source folder: the folder's copy is loaded
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
