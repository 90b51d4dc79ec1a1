"""Agents defined by a folder: ``config.yaml`` (name, start, env_vars) plus a start script.

This is the reference harness's agent format; a folder passed as ``--agent PATH`` or found under
``AUTORL_AGENTS_PATH`` becomes an agent named after the folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar

import yaml

from autorl.agents.base import Agent, AgentContext
from autorl.errors import UsageError

_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _expand(value: str, env: dict[str, str]) -> str:
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), value)


def read_agent_config(folder: Path) -> dict[str, Any]:
    cfg_path = folder / "config.yaml"
    if not cfg_path.is_file():
        raise UsageError(f"{folder} is not an agent folder: it has no config.yaml")
    try:
        cfg = yaml.safe_load(cfg_path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise UsageError(f"{cfg_path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(cfg, dict):
        raise UsageError(f"{cfg_path}: must be a mapping with name, start and env_vars")
    start = cfg.get("start", "start.sh")
    if not isinstance(start, str) or not (folder / start).is_file():
        raise UsageError(f"{cfg_path}: start script {start!r} not found in {folder}")
    env_vars = cfg.get("env_vars") or {}
    if not isinstance(env_vars, dict) or not all(isinstance(k, str) for k in env_vars):
        raise UsageError(f"{cfg_path}: env_vars must be a mapping of names to values")
    return {"name": str(cfg.get("name") or folder.name), "start": start, "env_vars": {k: str(v) for k, v in env_vars.items()}}


class CommandAgent(Agent):
    """Runs ``bash <folder>/<start>`` with the contract plus the config's ``env_vars``.

    An ``env_vars`` value may refer to the contract (``$WORKSPACE``) and is overridden by a variable of
    the same name passed with ``autorl run --agent-env NAME=VALUE``.
    """

    folder: ClassVar[Path]
    display_name: ClassVar[str] = ""

    @classmethod
    def from_folder(cls, folder: Path, name: str | None = None) -> type[CommandAgent]:
        folder = folder.resolve()
        cfg = read_agent_config(folder)
        safe = re.sub(r"\W", "_", folder.name)
        return type(
            f"CommandAgent_{safe}",
            (cls,),
            {"name": name or folder.name, "folder": folder, "display_name": cfg["name"], "description": cfg["name"]},
        )

    def config(self) -> dict[str, Any]:
        return read_agent_config(self.folder)

    def command(self, ctx: AgentContext) -> list[str]:
        return ["bash", str(self.folder / self.config()["start"])]

    def environment(self, ctx: AgentContext) -> dict[str, str]:
        base = {**ctx.env, "AUTORL_AGENT_DIR": str(self.folder)}
        env = {k: _expand(v, base) for k, v in self.config()["env_vars"].items()}
        env["AUTORL_AGENT_DIR"] = str(self.folder)
        for key, value in self.options.get("env", {}).items():
            env[str(key)] = str(value)
        return env


def agent_folders_from_env() -> list[Path]:
    """Folders of agents under each entry of ``AUTORL_AGENTS_PATH`` (os.pathsep-separated)."""
    found = []
    for entry in filter(None, os.environ.get("AUTORL_AGENTS_PATH", "").split(os.pathsep)):
        root = Path(entry).expanduser()
        if (root / "config.yaml").is_file():
            found.append(root)
        elif root.is_dir():
            found += sorted(p for p in root.iterdir() if (p / "config.yaml").is_file())
    return found
