"""Built-in agents, and agent folders found under ``AUTORL_AGENTS_PATH``."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autorl.errors import UsageError
from autorl.hookspecs import hookimpl
from autorl.plugins.loader import PluginWarning

EXAMPLE_FOLDER = Path(__file__).resolve().parent.parent / "agents" / "example"
#: Adapters for coding-agent CLIs, one folder each (config.yaml + start.sh), sharing ``common.sh``.
CODING_FOLDER = EXAMPLE_FOLDER.parent / "coding"
CODING_AGENTS = ("claude", "codex", "gemini", "opencode", "openhands", "rdagent")


@hookimpl
def register_agents(register: Callable[[type[Any]], None]) -> None:
    from autorl.agents.example_agent import ExampleAgent
    from autorl.agents.llm import LLMAgent
    from autorl.plugins.agent_folder import CommandAgent, agent_folders_from_env

    register(ExampleAgent.from_folder(EXAMPLE_FOLDER, name="example"))
    register(LLMAgent)
    for name in CODING_AGENTS:
        register(CommandAgent.from_folder(CODING_FOLDER / name, name=name))
    for folder in agent_folders_from_env():
        try:
            register(CommandAgent.from_folder(folder))
        except UsageError as exc:
            warnings.warn(f"agent folder skipped: {exc}", PluginWarning, stacklevel=2)
