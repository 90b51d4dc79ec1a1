"""A new plugin author's environment, built offline: a fresh venv where autorl is installed and nothing else is.

The venv gets autorl (editable, from this checkout) and sees autorl's dependencies through a folder of links
to this test environment's packages, less pytest and every autorl plugin; pip resolves from a folder of
wheels only (no index, no configuration), which holds pytest and setuptools as wheels made from their
installed copies here. So a documented step that forgets to install pytest fails there as it would for the
author, and nothing needs the network.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Distributions the fresh environment must install itself: test tools and plugins.
_LEFT_OUT = re.compile(r"^(pytest|_pytest|autorl)", re.I)


def wheel_from_installed(name: str, wheels: Path) -> Path:
    """A wheel of the installed pure-Python distribution ``name``, rebuilt from its installed files."""
    dist = metadata.distribution(name)
    files = [f for f in dist.files or () if f.parts[0] != ".." and "__pycache__" not in f.parts]
    info = next(f.parts[0] for f in files if f.parts[0].endswith(".dist-info"))
    target = wheels / f"{info.removesuffix('.dist-info')}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in files:
            if f.parts[0] == info and f.name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
                continue
            data = Path(str(dist.locate_file(f))).read_bytes()
            zf.writestr(f.as_posix(), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{f.as_posix()},sha256={digest},{len(data)}")
        zf.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return target


def _dependencies_folder(folder: Path) -> Path:
    """Links to every entry of this environment's site-packages but those of pytest and of autorl itself
    and its plugins."""
    site = Path(sysconfig.get_paths()["purelib"])
    left_out: set[str] = set()
    for dist in metadata.distributions(path=[str(site)]):
        if _LEFT_OUT.match(dist.metadata["Name"] or ""):
            left_out |= {f.parts[0] for f in dist.files or () if f.parts[0] != ".."}
    folder.mkdir()
    for entry in site.iterdir():
        if entry.name not in left_out and entry.name != "__pycache__":
            (folder / entry.name).symlink_to(entry)
    return folder


def fresh_venv(root: Path) -> dict[str, str]:
    """Build the fresh venv under ``root``; the environment (``PATH`` first) a command runs in there."""
    venv, wheels = root / "venv", root / "wheels"
    wheels.mkdir(parents=True)
    for name in ("pytest", "setuptools"):
        wheel_from_installed(name, wheels)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    site = next((venv / "lib").glob("python*/site-packages"))
    deps = _dependencies_folder(root / "deps")
    (site / "autorl-dependencies.pth").write_text(f"import site; site.addsitedir({str(deps)!r})\n")
    env = {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "VIRTUAL_ENV": str(venv),
        "HOME": str(root / "home"),
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "LANG": "C.UTF-8",
        "HF_HUB_OFFLINE": "1",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    (root / "home").mkdir()
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    # the venv's own setuptools is older than autorl's build needs; then autorl as its checkout installs it
    for args in (["--upgrade", "setuptools"], ["--no-deps", "--no-build-isolation", "-e", str(ROOT)]):
        subprocess.run([*pip, *args], check=True, capture_output=True, env=env, timeout=600)
    return env
