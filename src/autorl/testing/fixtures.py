"""The pytest fixtures of :mod:`autorl.testing` (the plugin pytest loads through the ``pytest11`` entry point): a
plugin manager of one test's own with a way to register a plugin on it, an empty ``AUTORL_HOME``, the built-in
tiny model built once per session, and a real grader on 127.0.0.1 (:class:`LocalGrader`) stopped after the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autorl.plugins.loader import PluginInfo, PluginManager, create_plugin_manager, set_plugin_manager

__all__ = ["LocalGrader", "autorl_home", "autorl_pm", "local_grader", "register_plugin", "tiny_model"]


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
        return plugin

    return register


@pytest.fixture
def autorl_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty AUTORL_HOME for this test."""
    home = tmp_path / "autorl-home"
    monkeypatch.setenv("AUTORL_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in ``autorl:tiny`` model (a ~0.5M-parameter Qwen2), built once per test session."""
    from autorl.builtin.tiny_model import build

    return build(tmp_path_factory.mktemp("autorl-tiny") / "tiny", log=lambda _m: None)


class LocalGrader:
    """A real grader process on 127.0.0.1 over a temporary workspace (see the ``local_grader`` fixture)."""

    def __init__(self, root: Path, task: str, base_model: Path | None, backend: str) -> None:
        from autorl.grader.config import GraderConfig
        from autorl.grader.process import GraderProcess
        from autorl.plugins.registry import get_benchmark
        from autorl.procs.group import free_port
        from autorl.resources import ResolvedModel, prepare_data

        data = prepare_data(get_benchmark(task)())
        self.workspace = root / "workspace"
        self.output = self.workspace / "output"
        self.output.mkdir(parents=True)
        self.config = GraderConfig.for_run(
            task=task,
            workspace=self.workspace,
            output_dir=self.output,
            store_dir=root / "store",
            data=data,
            base=ResolvedModel(str(base_model), Path(base_model), "local") if base_model else None,
            backend=backend,
        )
        self.process = GraderProcess(self.config, root / "store" / "config.json", free_port(), root / "grader.log")
        self.process.wait_ready()
        from autorl.grader.client import GraderClient

        self.client = GraderClient(self.process.url, self.config.agent_token, timeout=600)
        self.admin = self.process.admin

    def stop(self) -> None:
        self.client.close()
        self.process.stop()


@pytest.fixture
def local_grader(tmp_path: Path, autorl_home: Path) -> Iterator[Callable[..., LocalGrader]]:
    """``local_grader(task, base_model=None, backend="hf")`` starts a real grader; all are stopped after the test.

    Its ``client`` is an agent's :class:`autorl.grader.client.GraderClient`; ``output`` is where checkpoints go.
    """
    started: list[LocalGrader] = []

    def start(task: str, base_model: Path | None = None, backend: str = "hf") -> LocalGrader:
        grader = LocalGrader(tmp_path / f"grader-{len(started)}", task, base_model, backend)
        started.append(grader)
        return grader

    yield start
    for grader in started:
        grader.stop()
