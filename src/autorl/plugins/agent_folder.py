"""Agents defined by a folder: ``config.yaml`` (name, start, env_vars) plus a start script.

This is the reference harness's agent format; a folder passed as ``--agent PATH`` or found under
``AUTORL_AGENTS_PATH`` becomes an agent named after the folder. Two optional keys say what the agent
needs, so that ``autorl list agents`` can tell whether it is ready and ``autorl run`` fails fast:

```yaml
requires:                       # each must be found, or the run stops before it starts
  - command: claude             # an executable on PATH (or the value of `override` when that is set)
    override: CLAUDE_BIN
    install: "npm install -g @anthropic-ai/claude-code"
  - python_module: rdagent.app.rl.loop   # importable by the interpreter named in `python` (default python3)
    python: RDAGENT_PYTHON
    install: "pip install rdagent"
credentials:
  any_of: [ANTHROPIC_API_KEY]   # ready only when one of these is set (the key stays with the LLM gateway)
```

A folder is third-party content: it never takes a variable from the caller's environment by asking. The
operator passes one by name (``autorl run --agent-credential NAME``) or sets it (``--agent-env NAME=VALUE``);
a folder whose config lists variables under ``credentials.pass`` gets a one-line warning saying so. An
``override`` or ``python`` variable is passed on only when its value names an executable.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import yaml

from autorl.agent import Agent, AgentContext
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
    return {
        "name": str(cfg.get("name") or folder.name),
        "start": start,
        "env_vars": {k: str(v) for k, v in env_vars.items()},
        "requires": _requires(cfg.get("requires"), cfg_path),
        "credentials": _credentials(cfg.get("credentials"), cfg_path),
    }


def _names(value: Any, what: str, cfg_path: Path) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and re.fullmatch(r"[A-Za-z_]\w*", v) for v in value):
        raise UsageError(f"{cfg_path}: {what} must be a list of environment variable names")
    return list(value)


def _requires(value: Any, cfg_path: Path) -> list[dict[str, str]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"{cfg_path}: requires must be a list of {{command: ...}} or {{python_module: ...}}")
    out = []
    for entry in value:
        if (
            not isinstance(entry, dict)
            or len({"command", "python_module"} & entry.keys()) != 1
            or not all(isinstance(v, str) for v in entry.values())
        ):
            raise UsageError(f"{cfg_path}: each requires entry needs exactly one of command or python_module (strings)")
        unknown = set(entry) - {"command", "python_module", "override", "python", "install"}
        if unknown:
            raise UsageError(f"{cfg_path}: unknown requires key(s) {', '.join(sorted(unknown))}")
        out.append(dict(entry))
    return out


def _credentials(value: Any, cfg_path: Path) -> dict[str, list[str]]:
    if value is None:
        return {"pass": [], "any_of": []}
    if not isinstance(value, dict) or set(value) - {"pass", "any_of"}:
        raise UsageError(f"{cfg_path}: credentials must be a mapping with pass and any_of lists")
    return {k: _names(value.get(k), f"credentials.{k}", cfg_path) for k in ("pass", "any_of")}


def missing_requirement(
    entry: dict[str, str], environ: Mapping[str, str] | None = None, *, short: bool = False
) -> str | None:
    """None when the requirement is met; otherwise a one-line message naming what to install."""
    environ = os.environ if environ is None else environ
    install = f": {entry['install']}" if entry.get("install") else ""
    if "command" in entry:
        named = environ.get(entry["override"], "") if entry.get("override") else ""
        if shutil.which(named or entry["command"], path=environ.get("PATH")) is None:
            if named:  # the variable's value is not shown: a folder may name any variable here
                return (
                    f"{entry['override']} does not name a program"
                    if short
                    else f"{entry['override']} does not name an installed program{install}"
                )
            if short:
                return f"{entry['command']} not found"
            hint = f" (or set {entry['override']} to its path)" if entry.get("override") else ""
            return f"the `{entry['command']}` command is not installed{hint}{install}"
        return None
    named = environ.get(entry["python"], "") if entry.get("python") else ""
    python = named or "python3"
    module = entry["python_module"]
    probe = f"import importlib.util,sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        found = subprocess.run([python, "-c", probe], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        found = False
    if not found:
        if short:
            return f"{module} not importable"
        shown = f"the one {entry['python']} names" if named else python
        where = f" (interpreter {shown}; set {entry['python']} to another)" if entry.get("python") else ""
        return f"the Python module `{module}` is not importable{where}{install}"
    return None


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
        cfg = self.config()
        base = {**ctx.env, "AUTORL_AGENT_DIR": str(self.folder)}
        env = {k: _expand(v, base) for k, v in cfg["env_vars"].items()}
        # of the caller's environment, only where to find the programs the config requires
        for entry in cfg["requires"]:
            for key in (entry.get("override"), entry.get("python")):
                value = os.environ.get(key or "", "")
                if key and value and shutil.which(value, path=os.environ.get("PATH")) is not None:
                    env[key] = value
        env["AUTORL_AGENT_DIR"] = str(self.folder)
        for key, value in self.options.get("env", {}).items():
            env[str(key)] = str(value)
        return env

    def sandbox_paths(self) -> list[Path]:
        # the folder, and the shared coding/common.sh beside it (never the whole parent: a folder of the
        # operator's may hold anything)
        shared = self.folder.parent / "common.sh"
        return [self.folder, *([shared] if shared.is_file() else [])]

    def _environ(self) -> dict[str, str]:
        return {**os.environ, **{str(k): str(v) for k, v in self.options.get("env", {}).items()}}

    def ready(self) -> tuple[bool, str]:
        cfg = self.config()
        environ = self._environ()
        for entry in cfg["requires"]:
            problem = missing_requirement(entry, environ, short=True)
            if problem:
                return False, problem
        any_of = cfg["credentials"]["any_of"]
        if any_of and not any(environ.get(k) for k in any_of):
            return False, f"no key: set {' or '.join(any_of)}"
        return True, "ready"

    def preflight(self) -> None:
        cfg = self.config()
        for entry in cfg["requires"]:
            problem = missing_requirement(entry, self._environ())
            if problem:
                raise UsageError(f"agent {self.name} cannot start: {problem}")
        asked = [k for k in cfg["credentials"]["pass"] if k not in self.options.get("env", {})]
        if asked:
            flags = " ".join(f"--agent-credential {k}" for k in asked)
            warnings.warn(
                f"agent {self.name} asks for {', '.join(asked)} from your environment (credentials.pass); "
                f"an agent folder never takes them by itself: pass them with {flags}",
                UserWarning,
                stacklevel=2,
            )


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
