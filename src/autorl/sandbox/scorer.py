"""The policy of third-party scorer code: a smith folder's ``eval.py`` and ``download_data.py``, any code that comes
from a data folder or a driver model (:data:`SCORER`, :func:`scorer_policy`, :class:`ScratchFolder`).

Such code never runs with the operator's rights: it gets the system's folders and the Python environment
read-only, a scratch copy of its folder as the only place it writes (its ``data/`` read-only in it), no network
(``download_data.py``: a network namespace of its own with a route out), a pid namespace of its own (no
``/proc/<pid>/environ`` of the harness), no home and an environment of a few plain variables. The folder
itself is hashed before and after; a folder that changed is refused (:class:`FolderChanged`).

``AUTORL_SCORER_SANDBOX=none`` runs it without bubblewrap (still a separate process with that environment) where
bubblewrap cannot run; by default a scorer refuses to start there.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from autorl.errors import AutorlError, ResourceError, UsageError
from autorl.sandbox.host import mask_groups, python_paths, python_secrets
from autorl.sandbox.launcher import Launch, launch
from autorl.sandbox.policy import (
    COMMON_MASKS,
    MASKED,
    NETWORK_OFF,
    NETWORK_ON,
    PYTHON_SECRETS,
    READ_ONLY,
    READ_WRITE,
    SYSTEM_VIEW,
    Kind,
    Policy,
    Rule,
    bind,
    common_bindings,
)

#: The operator's choice: ``bwrap`` (the default) or ``none`` (no sandbox: the operator's rights).
SCORER_SANDBOX_ENV = "AUTORL_SCORER_SANDBOX"
#: The folder of a scorer's copy that stays read-only (the data it may read, never writes).
DATA = "data"

SCORER = Kind(
    name="scorer",
    title="third-party scorer code (a smith folder's eval.py and download_data.py, code a driver model wrote)",
    view=SYSTEM_VIEW,
    rules=(
        *COMMON_MASKS,
        Rule(
            "storage",
            MASKED,
            "autorl's home (hidden items, the grader's stores, the ledger, runs) and the folders of benchmarks",
        ),
        Rule("python", READ_ONLY, "the Python environment (never the caller's script folder)"),
        PYTHON_SECRETS,
        Rule("data", READ_ONLY, "its folder's data/ (linked from the copy)"),
        Rule(
            "scratch",
            READ_WRITE,
            "a scratch copy of its folder, thrown away after (download_data.py: the "
            "grader's copy it prepares); the folder itself is hashed before and after, a "
            "change refused",
        ),
    ),
    environment="PATH, LANG, HOME in its scratch copy, TMPDIR=/tmp, PYTHONPATH as the harness's; nothing else",
    network="none, a loopback of its own (download_data.py: a namespace of its own with a route out through "
    "slirp4netns)",
    processes="its own pid, ipc and uts namespaces (no /proc/<pid>/environ of the harness) and terminal session",
)


class FolderChanged(AutorlError):
    """A folder of third-party code changed while its code ran, or its copy differs from what was hashed."""


def scorer_mode(environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """How third-party scorer code runs here: (``bwrap``, its executable) or (``none``, None) when the operator
    says so; a one-line :class:`ResourceError` where bubblewrap cannot run and the operator has not."""
    from autorl.sandbox.choice import bwrap_available

    wanted = (os.environ if environ is None else environ).get(SCORER_SANDBOX_ENV, "bwrap").strip() or "bwrap"
    if wanted == "none":
        return "none", None
    if wanted != "bwrap":
        raise UsageError(f"{SCORER_SANDBOX_ENV} must be bwrap or none, not {wanted!r}")
    exe, why = bwrap_available()
    if exe is None:
        raise ResourceError(
            f"third-party scorer code runs only under bubblewrap, which cannot run here ({why}); "
            f"install bubblewrap, or set {SCORER_SANDBOX_ENV}=none to run it with your rights"
        )
    return "bwrap", exe


def scorer_env(home: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of scorer code: plain settings, ``HOME`` in its scratch copy, no key of anyone's."""
    env = os.environ if environ is None else environ
    out = {
        "PATH": os.pathsep.join(
            dict.fromkeys([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
        ),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    if env.get("PYTHONPATH"):
        out["PYTHONPATH"] = env["PYTHONPATH"]
    return out


def scorer_policy(
    writable: Path,
    *,
    data: Path | None = None,
    network: str = NETWORK_OFF,
    masked: Sequence[Path] = (),
    environ: Mapping[str, str] | None = None,
) -> Policy:
    """Scorer code's :class:`Policy`: ``writable`` (a scratch copy, its working folder and home) read-write,
    ``data`` read-only, the Python environment read-only, nothing else but the system's folders; ``masked``
    names further folders it must not see (the folders of benchmarks)."""
    from autorl.resources import autorl_home

    if network not in (NETWORK_OFF, NETWORK_ON):
        raise ValueError(f"scorer code's network is off or on, not {network!r}")
    rules = SCORER.rule
    python = python_paths()
    files = [
        *common_bindings(SCORER, mask_groups(environ)),
        *bind(rules("storage"), [autorl_home(), *masked]),
        *bind(rules("python"), python),
        *bind(PYTHON_SECRETS, python_secrets(python)),
        *bind(rules("data"), [data] if data is not None else []),
        *bind(rules("scratch"), [writable]),
    ]
    return Policy(
        kind=SCORER.name,
        view=SCORER.view,
        files=tuple(files),
        env=scorer_env(writable, environ),
        cwd=writable,
        network=network,
        hostname="autorl-scorer",
    )


def _walk(folder: Path, skip: Sequence[str] = ()) -> list[tuple[str, os.stat_result]]:
    """Every entry under ``folder`` (relative path, lstat), sorted, ``skip`` top-level names, ``__pycache__`` and
    ``.git`` left out; links are not followed."""
    out = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        rel_root = os.path.relpath(root, folder)
        if rel_root == ".":
            dirs[:] = [d for d in dirs if d not in skip]
            files = [f for f in files if f not in skip]
        dirs[:] = [d for d in dirs if d not in ("__pycache__", ".git")]
        for name in [*dirs, *files]:
            rel = name if rel_root == "." else os.path.join(rel_root, name)
            out.append((rel, os.lstat(folder / rel)))
    return sorted(out)


def folder_digest(folder: Path, skip: Sequence[str] = ()) -> str:
    """sha256 of a folder's tree: every entry's path and kind, a file's bytes, a link's target (never followed)."""
    h = hashlib.sha256()
    for rel, st in _walk(folder, skip):
        h.update(rel.encode() + b"\0")
        if stat.S_ISLNK(st.st_mode):
            h.update(b"link:" + os.fsencode(os.readlink(folder / rel)))
        elif stat.S_ISREG(st.st_mode):
            with open(folder / rel, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
        h.update(b"\0%d\0" % stat.S_IFMT(st.st_mode))
    return h.hexdigest()


def file_digests(folder: Path, skip: Sequence[str] = ()) -> dict[str, str]:
    """sha256 of each regular file under ``folder`` by relative path (links and the like: their kind)."""
    out = {}
    for rel, st in _walk(folder, skip):
        if stat.S_ISREG(st.st_mode):
            h = hashlib.sha256()
            with open(folder / rel, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            out[rel] = h.hexdigest()
        elif not stat.S_ISDIR(st.st_mode):
            out[rel] = f"kind {stat.S_IFMT(st.st_mode)}"
    return out


def copy_code(folder: Path, dest: Path, skip: Sequence[str] = (DATA,)) -> None:
    """Copy ``folder`` to ``dest`` (created), ``skip`` top-level names left out: folders and regular files only; a
    link or anything else there is refused (:class:`FolderChanged`), so that no file of the operator's comes
    along through one."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel, st in _walk(folder, skip):
        if stat.S_ISDIR(st.st_mode):
            (dest / rel).mkdir(exist_ok=True)
        elif stat.S_ISREG(st.st_mode):
            shutil.copyfile(folder / rel, dest / rel, follow_symlinks=False)
        else:
            raise FolderChanged(
                f"{folder}: {rel} is a link or a special file; a benchmark folder holds folders and regular files only"
            )


class ScratchFolder:
    """A scratch copy of a folder of third-party code, and the command that runs that code under the scorer
    policy there. The folder is hashed on entry and checked on exit (:class:`FolderChanged`); each
    :meth:`fresh` copy replaces the last, so that what one process left there never reaches the next. ``mode``
    ``none`` runs the code without a sandbox (in the agent's own process, whose sandbox bounds it already);
    otherwise the operator's choice (:func:`scorer_mode`)."""

    def __init__(
        self,
        folder: Path,
        *,
        mode: str | None = None,
        masked: Sequence[Path] = (),
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.folder = folder
        self.masked = list(masked)
        self.environ = environ
        self.mode, self.executable = (mode, None) if mode == "none" else scorer_mode(environ)
        self.root = Path(tempfile.mkdtemp(prefix="autorl-scorer-"))
        self.copy = self.root / "folder"
        self.digest = folder_digest(folder, (DATA,))  # its data/ is read-only to the code (and may be large)

    def fresh(self) -> Path:
        """A new copy of the folder, its path; its ``data/`` is a link to the folder's, shown read-only."""
        shutil.rmtree(self.copy, ignore_errors=True)
        copy_code(self.folder, self.copy)
        data = self._data()
        if data is not None:
            (self.copy / DATA).symlink_to(data, target_is_directory=True)
        return self.copy

    def _data(self) -> Path | None:
        data = self.folder / DATA
        if data.is_symlink():
            raise FolderChanged(f"{self.folder}: data/ is a link; a benchmark folder holds its data itself")
        return data if data.is_dir() else None

    def policy(self) -> Policy:
        """The scorer policy of the code run in the current copy."""
        return scorer_policy(self.copy, data=self._data(), masked=self.masked, environ=self.environ)

    def launch(self, argv: Sequence[str]) -> Launch:
        """``argv`` run in the current copy under the scorer policy."""
        return launch(self.policy(), argv, mode=self.mode, executable=self.executable)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if folder_digest(self.folder, (DATA,)) != self.digest:
            raise FolderChanged(f"{self.folder} changed while its code ran: refused")

    def __enter__(self) -> ScratchFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
