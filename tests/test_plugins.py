"""Plugin discovery as a third party experiences it: installed distributions, through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from autorl_example_plugin.stub import EchoBenchmark, ScriptedBackend

import autorl
from autorl.agents.llm import LLMAgent
from autorl.errors import AutorlError, PluginConflictError, UnknownNameError, UsageError
from autorl.plugins.agent_folder import CommandAgent
from autorl.plugins.loader import PluginInfo, create_plugin_manager
from autorl.plugins.registry import (
    Kind,
    PluginTypeError,
    agent_summary,
    backend_summary,
    benchmark_summary,
    default_backend,
    get_backends,
    get_benchmark,
    get_benchmarks,
    registrations,
    resolve_agent,
)

from .conftest import cli


def fake_distribution(site: Path, dist: str, ep_name: str, module: str, source: str) -> None:
    """Install a distribution the way pip leaves it: a module plus a .dist-info with entry points."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[autorl]\n{ep_name} = {module}\n")


def test_installed_example_plugin_is_listed() -> None:
    plugins = {p["name"]: p for p in json.loads(cli("plugins", check=True).stdout)}
    assert plugins["example-plugin"]["distribution"] == "autorl-example-plugin"
    assert plugins["example-plugin"]["version"] == "0.3.0"
    assert plugins["example-plugin"]["benchmarks"] == ["echo"]
    assert plugins["example-plugin"]["backends"] == ["scripted"]
    assert "arith" in plugins["autorl.default_plugins.benchmarks"]["benchmarks"]
    rows = json.loads(cli("list", "benchmarks", "--json", check=True).stdout)
    assert {"name": "echo", "distribution": "autorl-example-plugin"}.items() <= next(
        r for r in rows if r["name"] == "echo"
    ).items()
    table = cli("list", "benchmarks", check=True).stdout
    assert "echo" in table and "autorl-example-plugin" in table


def test_plugin_packages_load() -> None:
    plugins = {p["name"]: p["distribution"] for p in json.loads(cli("plugins", check=True).stdout)}
    for name in ("gsm8k", "humaneval", "alfworld", "smith"):
        assert plugins[name] == f"autorl-{name}"


def test_broken_plugin_warns_and_others_still_load(tmp_path: Path) -> None:
    fake_distribution(
        tmp_path, "autorl-broken", "broken", "broken_mod", "raise ImportError('missing dependency xyz')\n"
    )
    proc = cli("list", "benchmarks", "--json", env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert "broken" in proc.stderr and "autorl-broken" in proc.stderr and "missing dependency xyz" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert {"arith", "echo"} <= {r["name"] for r in json.loads(proc.stdout)}


def test_same_name_twice_is_an_error_naming_both_distributions(tmp_path: Path) -> None:
    fake_distribution(
        tmp_path,
        "autorl-copycat",
        "copycat",
        "copycat_mod",
        """
        from autorl import hookimpl
        from autorl_example_plugin.stub import EchoBenchmark

        class Copy(EchoBenchmark):
            pass

        @hookimpl
        def register_benchmarks(register):
            register(Copy)
    """,
    )
    proc = cli("list", "benchmarks", env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "echo" in line and "autorl-example-plugin" in line and "autorl-copycat" in line
    assert len(line.splitlines()) == 1 and "Traceback" not in line


@pytest.mark.parametrize(
    ("env", "present", "absent"),
    [
        ({"AUTORL_DISABLE_PLUGINS": "example-plugin"}, {"arith"}, {"echo"}),
        ({"AUTORL_DISABLE_PLUGINS": "autorl-example-plugin"}, {"arith"}, {"echo"}),
        ({"AUTORL_LOAD_PLUGINS": "gsm8k"}, {"arith"}, {"echo"}),
        ({"AUTORL_LOAD_PLUGINS": "example-plugin"}, {"arith", "echo"}, set()),
    ],
)
def test_blocked_plugins_vanish(env: dict[str, str], present: set[str], absent: set[str]) -> None:
    names = {r["name"] for r in json.loads(cli("list", "benchmarks", "--json", env=env, check=True).stdout)}
    assert present <= names
    assert not absent & names
    plugin_names = {p["name"] for p in json.loads(cli("plugins", env=env, check=True).stdout)}
    if absent:
        assert "example-plugin" not in plugin_names


def test_unknown_name_suggests_close_matches() -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'arith'"):
        get_benchmark("arit")
    proc = cli("eval", "--task", "ech", "--model", "x")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: unknown benchmark 'ech'; did you mean 'echo'?"


def test_register_plugin_fixture_and_conflicts(autorl_pm, register_plugin) -> None:  # type: ignore[no-untyped-def]
    from autorl_example_plugin.stub import EchoBenchmark

    class One:
        @autorl.hookimpl
        def register_benchmarks(self, register):  # type: ignore[no-untyped-def]
            register(EchoBenchmark)

    register_plugin(One(), name="one", distribution="dist-one")
    assert get_benchmarks()["echo"].distribution == "dist-one"
    register_plugin(One(), name="two", distribution="dist-two")
    with pytest.raises(PluginConflictError, match=r"dist-one.*dist-two"):
        get_benchmarks()


def test_fresh_plugin_manager_sees_no_entry_points(autorl_pm) -> None:  # type: ignore[no-untyped-def]
    assert "echo" not in get_benchmarks()
    assert "arith" in get_benchmarks()


class _Registers:
    """A plugin whose ``register_<kind>s`` hook registers ``obj``."""

    def __init__(self, kind: str, obj: object) -> None:
        def hook(register: Callable[[object], None]) -> None:
            register(obj)

        setattr(self, f"register_{kind}s", autorl.hookimpl(hook))


def _not_a_factory() -> None:
    """A function that has a ``name``, as a lazy factory would."""


_not_a_factory.name = "factory"  # type: ignore[attr-defined]


class _RightAgent(LLMAgent):
    name = "right-agent"


@pytest.mark.parametrize(
    ("kind", "wrong", "shown", "right"),
    [
        ("benchmark", ScriptedBackend, "ScriptedBackend", EchoBenchmark),  # a class of another kind
        ("backend", EchoBenchmark, "EchoBenchmark", ScriptedBackend),
        ("agent", EchoBenchmark, "EchoBenchmark", _RightAgent),
        ("benchmark", EchoBenchmark(), "EchoBenchmark object", EchoBenchmark),  # an instance
        ("backend", _not_a_factory, "_not_a_factory", ScriptedBackend),  # a function
    ],
)
def test_wrong_base_class_is_a_type_error_naming_the_plugin(  # type: ignore[no-untyped-def]
    autorl_pm, register_plugin, kind: Kind, wrong: object, shown: str, right: type[Any]
) -> None:
    register_plugin(_Registers(kind, wrong), name="wrongbase", distribution="autorl-wrongbase")
    with pytest.raises(TypeError) as caught:
        registrations(kind)
    message = str(caught.value)
    assert isinstance(caught.value, PluginTypeError) and isinstance(caught.value, AutorlError)
    assert "autorl-wrongbase" in message and "wrongbase" in message and shown in message
    assert (
        f"not a subclass of autorl.{ {'benchmark': 'Benchmark', 'agent': 'Agent', 'backend': 'Backend'}[kind] }"
        in message
    )
    autorl_pm.unregister(name="wrongbase")
    register_plugin(_Registers(kind, right), name="rightbase", distribution="autorl-rightbase")
    found = registrations(kind)
    assert found[right.name].cls is right and found[right.name].distribution == "autorl-rightbase"


def test_wrong_base_class_through_the_cli_is_one_line(tmp_path: Path) -> None:
    fake_distribution(
        tmp_path,
        "autorl-wrongbase",
        "wrongbase",
        "wrongbase_mod",
        """
        from autorl import hookimpl

        class NotABenchmark:
            name = "notabench"

        @hookimpl
        def register_benchmarks(register):
            register(NotABenchmark)
    """,
    )
    proc = cli("list", "benchmarks", env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert line.startswith("error: autorl-wrongbase (plugin wrongbase) registers") and "NotABenchmark" in line
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    proc = cli("doctor", "--json", env={"PYTHONPATH": str(tmp_path)})  # doctor says so and checks the rest
    assert proc.returncode == 0, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)}
    assert checks["plugins"]["ok"] is False and "autorl-wrongbase" in checks["plugins"]["detail"]
    assert "AUTORL_DISABLE_PLUGINS" in checks["plugins"]["fix"] and "AUTORL_HOME" in checks


def test_registry_sees_plugins_added_after_a_lookup(autorl_pm) -> None:  # type: ignore[no-untyped-def]
    assert "echo" not in get_benchmarks()
    autorl_pm.add(_Registers("benchmark", EchoBenchmark), PluginInfo("late", "autorl-late", "1", "late", False))
    assert get_benchmarks()["echo"].distribution == "autorl-late"
    other = create_plugin_manager(entry_points=False)  # each manager has its own registrations
    assert "echo" not in get_benchmarks(other) and "echo" in get_benchmarks(autorl_pm)


def test_resolve_agent_and_default_backend(autorl_pm, register_plugin, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert resolve_agent("llm") is LLMAgent
    with pytest.raises(UnknownNameError, match="unknown agent 'lml'"):
        resolve_agent("lml")
    with pytest.raises(UsageError, match=r"agent folder '\./nowhere' does not exist"):
        resolve_agent("./nowhere")
    folder = tmp_path / "my-agent"
    folder.mkdir()
    (folder / "config.yaml").write_text("name: my-agent\nstart: start.sh\n")
    (folder / "start.sh").write_text("#!/bin/sh\n")
    assert issubclass(resolve_agent(str(folder)), CommandAgent)
    vllm_usable = get_backends()["vllm"].cls.available()
    assert default_backend() == ("vllm" if vllm_usable else "hf")

    class UsableVLLM(ScriptedBackend):
        name = "vllm"

        @classmethod
        def available(cls) -> bool:
            return True

    no_builtin_backends = create_plugin_manager(entry_points=False, env={"AUTORL_DISABLE_PLUGINS": "backends"})
    no_builtin_backends.add(_Registers("backend", UsableVLLM), PluginInfo("v", "autorl-v", "1", "v", False))
    assert default_backend(no_builtin_backends) == "vllm"


def test_listings_come_from_the_registry(autorl_pm, register_plugin) -> None:  # type: ignore[no-untyped-def]
    register_plugin(_Registers("benchmark", EchoBenchmark), name="listed", distribution="autorl-listed")
    benchmarks = benchmark_summary()
    assert [r["name"] for r in benchmarks] == sorted(r["name"] for r in benchmarks)
    echo = next(r for r in benchmarks if r["name"] == "echo")
    assert echo["distribution"] == "autorl-listed" and echo["plugin"] == "listed"
    assert echo["splits"] == list(EchoBenchmark.splits) and echo["version"] == EchoBenchmark.version
    agents = {r["name"]: r for r in agent_summary()}
    assert {"example", "llm"} <= agents.keys() and all(isinstance(r["ready"], bool) for r in agents.values())
    backends = {r["name"]: r for r in backend_summary()}
    assert backends["hf"] == {"name": "hf", "distribution": "autorl", "available": backends["hf"]["available"]}


HEAVY = ("torch", "transformers", "trl", "vllm", "peft", "datasets")
# a plugin's classes load only when something is looked up, not for --help
LAZY = (*HEAVY, "autorl_example_plugin.stub")
# what `import autorl` leaves for the first call of autorl.run / evaluate / sweep
ENTRY_POINTS = ("autorl.runs.runner", "autorl.evaluation.checkpoint", "autorl.sweep", "autorl.grader", "autorl.cli")


@pytest.mark.parametrize(
    ("code", "forbidden"),
    [
        ("import autorl", (*LAZY, *ENTRY_POINTS, "pytest", "numpy", "httpx", "starlette")),
        ("from autorl.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass", LAZY),
        ("from autorl.cli import main\ntry:\n    main(['list', 'benchmarks'])\nexcept SystemExit:\n    pass", HEAVY),
    ],
)
def test_light_imports(code: str, forbidden: tuple[str, ...]) -> None:
    check = f"{code}\nimport sys\nprint([m for m in {forbidden!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


#: What a plugin imports, all from `autorl` (docs/plugins); `run` (its `RunResult`), `evaluate` and `sweep` for scripts, `runs`
#: and `items` for notebooks.
PUBLIC_API = {
    "__version__",
    "evaluate",
    "run",
    "RunResult",
    "sweep",
    "runs",
    "items",
    "hookimpl",
    "RegisterAgent",
    "RegisterBackend",
    "RegisterBenchmark",
    "PluginWarning",
    "get_agent",
    "get_backend",
    "get_benchmark",
    "Benchmark",
    "EvalConfig",
    "Item",
    "has_hidden_items",
    "hidden_secret",
    "items_digest",
    "read_hidden_items",
    "secret_rng",
    "write_hidden_items",
    "Evaluator",
    "ItemResult",
    "Progress",
    "Scorer",
    "GenerationEvaluator",
    "EpisodeBenchmark",
    "EpisodeEvaluator",
    "Environment",
    "StepResult",
    "episode_steps",
    "Backend",
    "Completion",
    "GenerationRequest",
    "Agent",
    "AgentContext",
    "AutorlError",
    "EvaluationError",
    "HiddenDataError",
    "ResourceError",
    "UsageError",
    "autorl_home",
    "file_lock",
    "read_jsonl",
    "write_json_atomic",
    "write_jsonl_atomic",
    "write_text_atomic",
}


def test_public_api_is_curated() -> None:
    import importlib
    import types

    assert set(autorl.__all__) == PUBLIC_API
    for name in autorl.__all__:
        value = getattr(autorl, name)
        if callable(value) and name != "Progress":
            assert value.__doc__, f"autorl.{name} has no docstring"
    # the entry points are the functions themselves, loaded on first use (never a second signature to drift)
    for name, module in (
        ("run", "autorl.runs.runner"),
        ("evaluate", "autorl.evaluation.checkpoint"),
        ("RunResult", "autorl.record.result"),
    ):
        assert getattr(autorl, name) is getattr(importlib.import_module(module), name)
    assert callable(autorl.sweep) and callable(autorl.runs)
    assert autorl.items is importlib.import_module("autorl.export.frames").items
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        autorl.nonesuch  # noqa: B018
    # besides __all__, only submodules and typing helpers are visible at the top level
    public = {n for n, v in vars(autorl).items() if n[0].isalpha() and not isinstance(v, types.ModuleType)}
    assert public - set(autorl.__all__) <= {"annotations", "TYPE_CHECKING", "Any"}


def test_cli_version_and_usage_errors() -> None:
    assert cli("--version", check=True).stdout.strip() == f"autorl {autorl.__version__}"
    proc = cli("run", "--agent", "example")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    proc = cli("run", "--agent", "./no/such/folder", "--task", "arith", "--model", "autorl:tiny", "--timeout", "5")
    assert proc.returncode == 2 and proc.stderr.strip() == "error: agent folder './no/such/folder' does not exist"
