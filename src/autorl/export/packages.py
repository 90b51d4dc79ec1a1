"""What the exported images install: the agent's training stack, and the verifier's autorl with its plugins.

Versions are the ones installed where the task is exported, so that the verifier scores with the code the user
ran (``constraints.txt``: every installed distribution as ``name==version``, local labels such as ``+cpu``
dropped, so that an index resolves them). A distribution installed from a local folder (an editable install, a
plugin of one's own) travels as a wheel built from a copy of that folder (the folder itself is never written
to), one installed from a wheel file as that file; one installed from an index is pinned to its version, and the
verifier's image takes it from the index its build is given.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from autorl.errors import ResourceError

#: what an agent usually trains with; pinned when installed here, left out otherwise
TRAINING_STACK = (
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "accelerate",
    "peft",
    "trl",
    "datasets",
    "numpy",
)
_SKIP_COPY = shutil.ignore_patterns(".*", "build", "dist", "__pycache__", "*.egg-info", "node_modules")


def _version(dist: metadata.Distribution) -> str:
    return dist.version.split("+", 1)[0]


def _name(dist: metadata.Distribution) -> str:
    return str(dist.metadata["Name"])


def local_source(dist: metadata.Distribution) -> Path | None:
    """What a distribution was installed from on this machine (PEP 610 ``direct_url.json``): a project folder or
    a wheel file that is still there, else ``None`` (installed from an index)."""
    raw = dist.read_text("direct_url.json")
    try:
        url = json.loads(raw or "null")
    except ValueError:
        return None
    if not isinstance(url, dict) or not str(url.get("url", "")).startswith("file://"):
        return None
    path = Path(unquote(urlparse(str(url["url"])).path))
    if "dir_info" in url and ((path / "pyproject.toml").is_file() or (path / "setup.py").is_file()):
        return path
    if "archive_info" in url and path.suffix == ".whl" and path.is_file():
        return path
    return None


def training_requirements() -> str:
    """``requirements.txt`` of the agent's image: the training stack as installed here."""
    lines = []
    for name in TRAINING_STACK:
        try:
            lines.append(f"{name}=={_version(metadata.distribution(name))}")
        except metadata.PackageNotFoundError:
            continue
    return "\n".join(lines) + "\n"


def constraints(excluded: Iterable[str]) -> str:
    """``constraints.txt``: every distribution installed here, pinned, less ``excluded`` and local installs."""
    skip = {n.lower().replace("_", "-") for n in excluded}
    pins = {}
    for dist in metadata.distributions():
        if not dist.metadata["Name"]:  # a broken install's leftover metadata
            continue
        name = _name(dist)
        key = name.lower().replace("_", "-")
        if key in skip or local_source(dist) is not None:
            continue
        pins[key] = f"{name}=={_version(dist)}"
    return "".join(pins[k] + "\n" for k in sorted(pins))


@dataclass
class Wheels:
    """Wheels built once per export (a study's tasks share them), kept in a private temporary folder."""

    folder: Path

    def requirement(self, name: str, extras: tuple[str, ...] = ()) -> tuple[str, Path | None]:
        """The requirement line for the distribution ``name`` and the wheel it needs (``None``: from an index)."""
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ResourceError(f"{name} is not installed here, so it cannot go into the verifier's image") from None
        suffix = f"[{','.join(extras)}]" if extras else ""
        source = local_source(dist)
        if source is None:
            return f"{_name(dist)}{suffix}=={_version(dist)}", None
        wheel = self._build(_name(dist), source) if source.is_dir() else source
        return f"./wheels/{wheel.name}{suffix}", wheel

    def _build(self, name: str, source: Path) -> Path:
        key = name.lower().replace("_", "-")
        done = self.folder / key
        if done.is_dir():
            return next(done.glob("*.whl"))
        with tempfile.TemporaryDirectory(prefix="autorl-wheel-") as tmp:
            copy = Path(tmp) / "src"
            shutil.copytree(source, copy, ignore=_SKIP_COPY, symlinks=True)
            out = Path(tmp) / "out"
            base = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out)]
            # without build isolation where the backend is installed here (no download); with it otherwise
            for args in (["--no-build-isolation"], []):
                proc = subprocess.run([*base, *args, str(copy)], capture_output=True, text=True)
                if proc.returncode == 0:
                    break
            else:
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                raise ResourceError(f"could not build a wheel of {name} from {source}: {last}")
            built = sorted(out.glob("*.whl"))
            if len(built) != 1:
                raise ResourceError(f"building {name} from {source} gave {len(built)} wheels, not one")
            done.mkdir(parents=True)
            return Path(shutil.copy2(built[0], done / built[0].name))
