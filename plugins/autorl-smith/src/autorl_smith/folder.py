"""rl-smith benchmark folders: discovery and validation, without running any of their code."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autorl import PluginWarning
from autorl.sandbox import folder_digest as sandbox_digest

EVAL_MODES = ("per_sample", "opencompass")
DEFAULT_ROOT = Path("..") / "rl-smith" / "benchmarks"
#: Set in the agent's process only (the benchmark's ``agent_env()``): the one folder it may load, as it sees it
AGENT_FOLDER_ENV = "SMITH_AGENT_FOLDER"
#: Folders given one by one (``autorl run --task ./folder``), joined by ``os.pathsep``: discovered beside
#: ``SMITH_BENCH_DIR``'s, here and in the processes a run starts (they inherit it)
FOLDERS_ENV = "SMITH_BENCH_FOLDERS"
#: What the agent's process may read of its own folder (``agent_paths()``), besides the exposed files: enough to
#: load the benchmark (its prompt settings and its ``evaluate``), never its data or ``download_data.py``
AGENT_FILES = ("config.yaml", "eval.py", "description.md")


class FolderError(ValueError):
    """A folder that is not a valid rl-smith benchmark; the message names the file and the problem."""


@dataclass(frozen=True)
class SmithFolder:
    path: Path
    name: str
    eval_mode: str
    expose_files: tuple[str, ...]
    config: dict[str, Any] = field(default_factory=dict)
    digest: str = ""
    eval_digest: str | None = None  # sha256 of eval.py when discovered: scoring refuses an eval.py changed since
    #: loaded in the agent's process from what it may see of the folder (``AGENT_FILES``): no data, no grading
    agent_view: bool = False

    @property
    def task(self) -> str:
        return f"smith-{self.name}"

    def version(self) -> str:
        """A hash of the folder's files, so that any change to the benchmark is a new version."""
        return self.digest


def folder_digest(path: Path) -> str:
    """A hash of the folder's tree (``__pycache__`` and ``.git`` aside; a link as its target's name, never
    followed): its version."""
    return sandbox_digest(path)[:12]


def bench_root() -> Path:
    return Path(os.environ.get("SMITH_BENCH_DIR") or DEFAULT_ROOT).expanduser()


def _check_jsonl(path: Path, folder: Path) -> int:
    count = 0
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise FolderError(f"{path.relative_to(folder)} line {n}: not valid JSON") from None
        if not isinstance(row, dict) or "question" not in row or "answer" not in row:
            raise FolderError(f'{path.relative_to(folder)} line {n}: needs "question" and "answer"')
        count += 1
    if count == 0:
        raise FolderError(f"{path.relative_to(folder)}: no rows")
    return count


def eval_file(folder: Path, config: dict[str, Any]) -> Path | None:
    """The folder's held-out evaluation file, if it has one (``eval_file`` key, else data/test.jsonl)."""
    named = config.get("eval_file")
    if named:
        return folder / str(named)
    default = folder / "data" / "test.jsonl"
    return default if default.is_file() else None


def load_folder(folder: Path, *, agent_view: bool = False) -> SmithFolder:
    """The folder as a benchmark, or :class:`FolderError`. With ``agent_view`` (in the agent's process) its data
    is neither needed nor read."""
    cfg_path = folder / "config.yaml"
    if not cfg_path.is_file():
        raise FolderError("config.yaml: missing")
    try:
        config = yaml.safe_load(cfg_path.read_text())
    except yaml.YAMLError as exc:
        raise FolderError(f"config.yaml: invalid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(config, dict):
        raise FolderError("config.yaml: must be a mapping")
    missing = [k for k in ("name", "eval_mode", "expose_files") if k not in config]
    if missing:
        raise FolderError(f"config.yaml: missing key(s) {', '.join(missing)}")
    name = config["name"]
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
        raise FolderError(f"config.yaml: name {name!r} must be letters, digits, '-' or '_'")
    if config["eval_mode"] not in EVAL_MODES:
        raise FolderError(f"config.yaml: eval_mode {config['eval_mode']!r} is not one of {', '.join(EVAL_MODES)}")
    exposed = config["expose_files"] or []
    if not isinstance(exposed, list) or not all(isinstance(x, str) for x in exposed):
        raise FolderError("config.yaml: expose_files must be a list of file names")
    for rel in exposed:
        target = (folder / rel).resolve()
        if folder.resolve() not in target.parents or not target.is_file():
            raise FolderError(f"config.yaml: exposed file {rel!r} is not a file inside the folder")
    eval_py = folder / "eval.py"
    if not eval_py.is_file():
        raise FolderError("eval.py: missing")
    try:
        tree = ast.parse(eval_py.read_text(), filename=str(eval_py))
    except SyntaxError as exc:
        raise FolderError(f"eval.py: syntax error on line {exc.lineno}") from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == "evaluate" for n in tree.body):
        raise FolderError("eval.py: defines no function evaluate(question, model_answer, reference_answer, **kwargs)")
    eval_sha = hashlib.sha256(eval_py.read_bytes()).hexdigest()
    if agent_view:
        return SmithFolder(
            folder,
            name,
            str(config["eval_mode"]),
            tuple(exposed),
            config,
            folder_digest(folder),
            eval_sha,
            agent_view=True,
        )
    train = folder / "data" / "train.jsonl"
    if not train.is_file() and not (folder / "download_data.py").is_file():
        raise FolderError("data/train.jsonl: missing (and no download_data.py to make it)")
    if train.is_file():
        _check_jsonl(train, folder)
    held_out = eval_file(folder, config)
    if held_out is not None and held_out.is_file():
        _check_jsonl(held_out, folder)
    elif held_out is not None and config.get("eval_file"):
        raise FolderError(f"config.yaml: eval_file {config['eval_file']!r} does not exist")
    return SmithFolder(folder, name, str(config["eval_mode"]), tuple(exposed), config, folder_digest(folder), eval_sha)


def discover(root: Path | None = None) -> list[SmithFolder]:
    """Every valid folder under ``root`` (default ``SMITH_BENCH_DIR``), and without ``root`` the folders given one
    by one (``SMITH_BENCH_FOLDERS``) first; each invalid one is a warning naming it, the file and the problem.
    In an agent's process (``SMITH_AGENT_FOLDER`` set, no ``root`` given) only its own folder, as it sees it."""
    agent_folder = os.environ.get(AGENT_FOLDER_ENV) if root is None else None
    if agent_folder:
        try:
            return [load_folder(Path(agent_folder), agent_view=True)]
        except (FolderError, OSError, UnicodeDecodeError) as exc:
            warnings.warn(f"rl-smith folder {agent_folder} skipped: {exc}", PluginWarning, stacklevel=2)
            return []
    given = [Path(f) for f in os.environ.get(FOLDERS_ENV, "").split(os.pathsep) if f] if root is None else []
    root = root or bench_root()
    under = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
    found: dict[str, SmithFolder] = {}
    for folder in [*given, *(p for p in under if p.resolve() not in {g.resolve() for g in given})]:
        try:
            sf = load_folder(folder)
        except (FolderError, OSError, UnicodeDecodeError) as exc:
            warnings.warn(f"rl-smith folder {folder} skipped: {exc}", PluginWarning, stacklevel=2)
            continue
        if sf.name in found:
            warnings.warn(
                f"rl-smith folder {folder} skipped: name {sf.name!r} is already used by {found[sf.name].path}",
                PluginWarning,
                stacklevel=2,
            )
            continue
        found[sf.name] = sf
    return list(found.values())


def take_folder(path: Path) -> SmithFolder | None:
    """``path`` as a folder given one by one (``autorl run --task ./folder``): None when it is no rl-smith folder
    (no ``config.yaml`` naming an ``eval_mode``); else the folder, named in ``SMITH_BENCH_FOLDERS`` for discovery
    here and in the processes a run starts; :class:`FolderError` when it is one but broken."""
    try:
        config = yaml.safe_load((path / "config.yaml").read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        config = None
    if not isinstance(config, dict) or "eval_mode" not in config:
        return None
    folder = load_folder(path)
    given = [f for f in os.environ.get(FOLDERS_ENV, "").split(os.pathsep) if f]
    if str(path) not in given:
        os.environ[FOLDERS_ENV] = os.pathsep.join([*given, str(path)])
    return folder
