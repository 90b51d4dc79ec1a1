"""Typed accessors over what plugins register. Names are resolved here, at entry points only."""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from autorl.errors import PluginConflictError, PluginTypeError, UnknownNameError, UsageError
from autorl.plugins.loader import (
    PluginManager,
    PluginWarning,
    add_source_folder,
    get_plugin_manager,
    read_source_folder,
)

if TYPE_CHECKING:
    from autorl.agent import Agent
    from autorl.benchmark import Benchmark
    from autorl.inference.base import Backend

__all__ = [
    "KINDS",
    "Kind",
    "Registration",
    "agent_summary",
    "backend_summary",
    "benchmark_summary",
    "collect",
    "default_backend",
    "get_agent",
    "get_agents",
    "get_backend",
    "get_backends",
    "get_benchmark",
    "get_benchmarks",
    "plugin_summary",
    "registrations",
    "resolve_agent",
    "resolve_task",
]

Kind = Literal["benchmark", "agent", "backend"]
KINDS: tuple[Kind, ...] = ("benchmark", "agent", "backend")


@dataclass(frozen=True)
class Registration:
    """One registered class and the plugin that registered it."""

    kind: str
    name: str
    cls: type[Any]
    plugin: str
    distribution: str


def _base_class(kind: Kind) -> type[Any]:
    from autorl.agent import Agent
    from autorl.benchmark import Benchmark
    from autorl.inference.base import Backend

    return {"benchmark": Benchmark, "agent": Agent, "backend": Backend}[kind]


def collect(pm: PluginManager, kind: str, base: type[Any], base_path: str) -> dict[str, Registration]:
    """What the plugins' ``register_<kind>s`` hooks register, by name, in registration order: each a subclass of
    ``base`` (``base_path`` names it in errors) with a ``name`` that no other plugin registers. A plugin whose hook
    fails otherwise is skipped with a :class:`PluginWarning`. Every kind of plugin class is collected here, the
    study executors (:mod:`autorl.sweep.executors`) included."""
    found: dict[str, Registration] = {}
    article = "an" if kind[0] in "aeiou" else "a"
    hook = getattr(pm.hook, f"register_{kind}s", None)
    for impl in hook.get_hookimpls() if hook is not None else []:  # registration order
        info = pm.infos.get(impl.plugin_name)
        dist = info.distribution if info else impl.plugin_name

        def register(cls: type[Any], _plugin: str = impl.plugin_name, _dist: str = dist) -> None:
            if not (isinstance(cls, type) and issubclass(cls, base)):
                raise PluginTypeError(
                    f"{_dist} (plugin {_plugin}) registers {cls!r} as {article} {kind}, which is not a subclass of "
                    f"{base_path}; upgrade, uninstall or disable it (AUTORL_DISABLE_PLUGINS)"
                )
            name = getattr(cls, "name", None)
            if not isinstance(name, str) or not name:
                raise PluginConflictError(f"{_dist} registers a {kind} class {cls!r} without a `name`")
            if name in found:
                raise PluginConflictError(
                    f"{kind} {name!r} is registered twice: by {found[name].distribution} "
                    f"(plugin {found[name].plugin}) and by {_dist} (plugin {_plugin}); uninstall or "
                    "disable one (AUTORL_DISABLE_PLUGINS)"
                )
            found[name] = Registration(kind, name, cls, _plugin, _dist)

        try:
            impl.function(register)
        except (PluginConflictError, PluginTypeError):
            raise
        except Exception as exc:
            warnings.warn(
                f"plugin {impl.plugin_name!r} ({dist}) failed while registering {kind}s: {type(exc).__name__}: {exc}",
                PluginWarning,
                stacklevel=2,
            )
    return found


def _collect(pm: PluginManager, kind: Kind) -> dict[str, Registration]:
    base = _base_class(kind)
    return collect(pm, kind, base, f"autorl.{base.__name__}")


@dataclass
class _Collected:
    """What one plugin manager's hooks registered, as of its ``generation``."""

    generation: int
    kinds: dict[Kind, dict[str, Registration]] = field(default_factory=dict)


_collected: weakref.WeakKeyDictionary[PluginManager, _Collected] = weakref.WeakKeyDictionary()


def registrations(kind: Kind, pm: PluginManager | None = None) -> dict[str, Registration]:
    """Every registration of one kind; collected once per plugin manager, again after it (un)registers a plugin."""
    pm = pm or get_plugin_manager()
    cache = _collected.get(pm)
    if cache is None or cache.generation != pm.generation:
        cache = _collected[pm] = _Collected(pm.generation)
    if kind not in cache.kinds:
        cache.kinds[kind] = _collect(pm, kind)
    return cache.kinds[kind]


def _get(kind: Kind, name: str, pm: PluginManager | None) -> type[Any]:
    regs = registrations(kind, pm)
    if name not in regs:
        raise UnknownNameError(kind, name, regs)
    return regs[name].cls


def get_benchmark(name: str, pm: PluginManager | None = None) -> type[Benchmark]:
    """The benchmark class registered as ``name``."""
    return _get("benchmark", name, pm)


def get_agent(name: str, pm: PluginManager | None = None) -> type[Agent]:
    """The agent class registered as ``name``."""
    return _get("agent", name, pm)


def get_backend(name: str, pm: PluginManager | None = None) -> type[Backend]:
    """The backend class registered as ``name``."""
    return _get("backend", name, pm)


def resolve_agent(spec: str, pm: PluginManager | None = None) -> type[Agent]:
    """The agent ``spec`` names: a folder with config.yaml + start script, or a registered agent name."""
    path = Path(spec).expanduser()
    if path.is_dir():
        from autorl.plugins.agent_folder import CommandAgent

        return CommandAgent.from_folder(path)
    if "/" in spec or spec.startswith("."):
        raise UsageError(f"agent folder {spec!r} does not exist")
    return get_agent(spec, pm)


def resolve_task(spec: str, pm: PluginManager | None = None) -> str:
    """The benchmark name ``spec`` (``--task``) names: a registered name as it is; or a local folder, used without
    installing anything: a plugin's source folder (``pyproject.toml`` declaring an ``autorl`` entry point) is
    loaded as if installed and names its one benchmark; any other folder goes to the plugins'
    ``task_from_folder`` (autorl-smith takes an rl-smith folder). A folder that is neither is one line."""
    path = Path(spec).expanduser()
    if not path.is_dir():
        if spec.startswith((".", "/", "~")):
            raise UsageError(f"--task {spec}: no such folder")
        return spec
    folder = path.resolve()
    pm = pm or get_plugin_manager()
    source = read_source_folder(folder)
    if source is not None:
        plugins = add_source_folder(pm, source)
        names = sorted(r.name for r in get_benchmarks(pm).values() if r.plugin in plugins)
        if len(names) == 1:
            return names[0]
        raise UsageError(
            f"--task {spec}: the plugin in {folder} registers "
            + (
                f"the benchmarks {', '.join(names)}: give one of them as --task after `pip install -e {folder}`"
                if names
                else "no benchmark"
            )
        )
    name = pm.hook.task_from_folder(path=folder)
    if name:
        pm.changed()
        get_benchmark(str(name), pm)  # registered now, or the plugin's own error
        return str(name)
    raise UsageError(
        f"--task {spec}: {folder} is neither a plugin's source folder (a pyproject.toml with an "
        "[project.entry-points.autorl] entry) nor a folder an installed plugin takes as a task (with "
        "autorl-smith: an rl-smith folder, config.yaml and eval.py)"
    )


def default_backend(pm: PluginManager | None = None) -> str:
    """The backend used when none is named: ``vllm`` where it is registered and usable here, else ``hf``."""
    backends = get_backends(pm)
    if "vllm" in backends and backends["vllm"].cls.available():
        return "vllm"
    return "hf"


def get_benchmarks(pm: PluginManager | None = None) -> dict[str, Registration]:
    """Every registered benchmark, by name."""
    return registrations("benchmark", pm)


def get_agents(pm: PluginManager | None = None) -> dict[str, Registration]:
    """Every registered agent, by name."""
    return registrations("agent", pm)


def get_backends(pm: PluginManager | None = None) -> dict[str, Registration]:
    """Every registered backend, by name."""
    return registrations("backend", pm)


def benchmark_summary(pm: PluginManager | None = None) -> list[dict[str, Any]]:
    """What ``autorl list benchmarks`` shows: each benchmark's name, version, distribution, plugin, splits
    and source, by name."""
    rows: list[dict[str, Any]] = []
    for reg in sorted(get_benchmarks(pm).values(), key=lambda r: r.name):
        source = getattr(reg.cls, "source", None)
        rows.append(
            {
                "name": reg.name,
                "version": getattr(reg.cls, "version", "?"),
                "distribution": reg.distribution,
                "plugin": reg.plugin,
                "splits": list(getattr(reg.cls, "splits", ())),
                "source": str(source) if source else None,
            }
        )
    return rows


def agent_summary(pm: PluginManager | None = None) -> list[dict[str, Any]]:
    """What ``autorl list agents`` shows: each agent, whether it is ready here (and why not), by name."""
    rows: list[dict[str, Any]] = []
    for reg in sorted(get_agents(pm).values(), key=lambda r: r.name):
        ok, why = reg.cls().ready()
        rows.append(
            {
                "name": reg.name,
                "distribution": reg.distribution,
                "ready": ok,
                "status": why,
                "description": getattr(reg.cls, "description", ""),
            }
        )
    return rows


def backend_summary(pm: PluginManager | None = None) -> list[dict[str, Any]]:
    """What ``autorl list backends`` shows: each backend and whether it can run here, by name."""
    return [
        {"name": r.name, "distribution": r.distribution, "available": r.cls.available()}
        for r in sorted(get_backends(pm).values(), key=lambda r: r.name)
    ]


def plugin_summary(pm: PluginManager | None = None) -> list[dict[str, Any]]:
    """What ``autorl plugins`` and ``GET /-/plugins`` show: each plugin and what it registers."""
    pm = pm or get_plugin_manager()
    rows: dict[str, dict[str, Any]] = {}
    for name, info in pm.infos.items():
        rows[name] = {
            "name": name,
            "distribution": info.distribution,
            "version": info.version,
            "module": info.module,
            "builtin": info.builtin,
            "benchmarks": [],
            "agents": [],
            "backends": [],
            "executors": [],
        }
    for kind in KINDS:
        for reg in registrations(kind, pm).values():
            if reg.plugin in rows:
                rows[reg.plugin][f"{kind}s"].append(reg.name)
    # a study's executors are loaded by autorl.sweep, which runs above this layer: their names are read here
    # from each plugin's hook directly, so that the listing says which plugin registers which
    hook = getattr(pm.hook, "register_executors", None)
    for impl in hook.get_hookimpls() if hook is not None else []:
        row = rows.get(impl.plugin_name)
        if row is not None:
            names: list[str] = row["executors"]
            impl.function(lambda cls, _names=names: _names.append(str(getattr(cls, "name", repr(cls)))))
    return list(rows.values())
