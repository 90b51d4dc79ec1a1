"""The programs on ``PATH`` that lie under a masked folder (the operator's home: pipx, ``pip --user``, ``npm -g``,
rustup, nvm, pyenv...), shown so that they run and nothing beside them is.

An absolute ``PATH`` entry under a masked folder is shown as that folder alone, never its parent, its dot-files
masked again; an entry that is (or holds) a masked folder itself, ``~`` on ``PATH`` say, is shown as its
executables one by one. Each program found there, or anywhere on ``PATH`` as a link into a masked folder, brings
what it needs to run: a link's target and every hop on the way (a hop that names a folder through a link is
shown at the path it names too), and, for a target inside a package tree, that package's folder and nothing
beside it (``node_modules/<pkg>``, a virtual environment such as a pipx venv with its interpreter, a Python
installation such as a pyenv version). A script's interpreter (``#!``) is followed the same way; the scripts of
the user's own ``bin`` (``pip --user``) bring the user's ``site-packages`` folders; ``rustup`` and ``pyenv``
bring their tool homes, which hold toolchains and versions. Relative and empty entries name the process's own
working folder and bring nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from autorl.sandbox.host import inside

#: hops of a link chain followed before giving up (the kernel's own limit)
_MAX_HOPS = 40
#: how deep interpreters of interpreters are followed (a pipx venv's Python, itself a pyenv version's)
_MAX_DEPTH = 3
#: tools whose programs read a home of their own: the variable naming it and its default under the home
TOOL_HOMES = {"rustup": ("RUSTUP_HOME", ".rustup"), "pyenv": ("PYENV_ROOT", ".pyenv")}
#: what a tool home holds, which any other folder the variable might name does not
TOOL_HOME_MARK = {"rustup": "toolchains", "pyenv": "versions"}


class _Masked:
    """The masked folders, as the string prefixes the many checks of a PATH's programs compare."""

    def __init__(self, masked: Sequence[Path]) -> None:
        self.texts = [str(m).rstrip("/") or "/" for m in masked]
        self.prefixes = tuple(t.rstrip("/") + "/" for t in self.texts)

    def under(self, path: Path) -> bool:
        """Strictly below a masked folder: absent unless shown."""
        return str(path).startswith(self.prefixes)

    def covers(self, path: Path) -> bool:
        """``path`` is a masked folder or holds one: showing it whole would uncover what is masked."""
        text = str(path).rstrip("/") or "/"
        prefix = text.rstrip("/") + "/"
        return any(m == text or m.startswith(prefix) for m in self.texts)


class _Resolver:
    """``os.path.realpath`` for many programs of few folders: each folder resolved once, then a link's hops read
    one at a time."""

    def __init__(self) -> None:
        self.folders: dict[str, str] = {}

    def real(self, path: Path) -> Path:
        return Path(self.text(str(path)))

    def text(self, path: str) -> str:
        text = path
        for _ in range(_MAX_HOPS):
            head, tail = os.path.split(text)
            folder = self.folders.get(head)
            if folder is None:
                folder = self.folders[head] = os.path.realpath(head)
            text = os.path.join(folder, tail)
            try:
                target = os.readlink(text)
            except OSError:
                return text
            text = os.path.normpath(os.path.join(folder, target))
        return os.path.realpath(path)


def _hops(path: Path) -> Iterator[Path]:
    """The paths a link chain names, hop by hop, as written (relative targets joined to the link's folder)."""
    current = path
    for _ in range(_MAX_HOPS):
        try:
            target = os.readlink(current)
        except OSError:
            return
        current = Path(os.path.normpath(os.path.join(current.parent, target)))
        yield current


def _shebang(path: Path) -> Path | None:
    """The absolute interpreter a script names on its first line (``#!/usr/bin/env X`` finds X on PATH)."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].split()
    if not words or not words[0].startswith(b"/") or words[0].endswith(b"/env"):
        return None
    return Path(os.fsdecode(words[0]))


def _python_installation(folder: Path) -> bool:
    return (folder / "bin").is_dir() and any((folder / "lib").glob("python3*/os.py"))


def package_folder(path: Path, masked: Sequence[Path] | _Masked) -> Path:
    """The package tree ``path`` lies in (a ``node_modules`` package, a virtual environment, a Python
    installation), looked for upwards while strictly under a masked folder; else ``path`` itself."""
    masks = masked if isinstance(masked, _Masked) else _Masked(masked)
    for folder in path.parents:
        if not masks.under(folder):
            break
        parent = folder.parent
        if parent.name == "node_modules" or (parent.name.startswith("@") and parent.parent.name == "node_modules"):
            return folder
        if (folder / "pyvenv.cfg").is_file() or _python_installation(folder):
            return folder
    return path


@dataclass(frozen=True)
class PathView:
    """What to show read-only so that the programs on PATH run (parents first), and what to mask again inside it:
    the dot-files of a folder shown whole (a token kept beside the programs is no program)."""

    shown: list[Path]
    hidden: list[Path]


class _View:
    """What the programs on PATH need, gathered in order, each path once."""

    def __init__(self, masked: Sequence[Path], environ: Mapping[str, str]) -> None:
        self.masked, self.environ = _Masked(masked), environ
        self.shown: dict[Path, None] = {}
        self.hidden: dict[Path, None] = {}
        self.resolver = _Resolver()

    def show(self, path: Path) -> None:
        if self.masked.under(path) and not self.masked.covers(path):
            self.shown.setdefault(path)

    def needs(self, program: Path, depth: int = 0) -> None:
        """What running ``program`` reads under a masked folder: its links' hops and their package folders, its
        interpreter's likewise."""
        if depth > _MAX_DEPTH:
            return
        targets = [program, *_hops(program)]
        real = self.resolver.real(program)
        for given in targets[1:] + ([real] if real not in targets else []):
            if not self.masked.under(given):
                continue
            folder = package_folder(given, self.masked)
            self.show(folder)
            real_folder = package_folder(self.resolver.real(given), self.masked)
            self.show(real_folder)
            if folder != given and (folder / "pyvenv.cfg").is_file():
                self.needs(folder / "bin" / "python", depth + 1)
        interpreter = _shebang(real) if real.is_file() else None
        if interpreter is not None:
            folder = package_folder(interpreter, self.masked)
            self.show(folder)
            self.needs(interpreter, depth + 1)

    def entry(self, entry: Path) -> None:
        real = Path(os.path.realpath(entry))
        whole = not self.masked.covers(entry) and not self.masked.covers(real)
        hidden = self.masked.under(real) or self.masked.under(entry) or not whole
        if not hidden:  # a folder in plain view: only its links into a masked folder need anything shown
            for name in _links(real):
                target = self.resolver.text(os.path.join(entry, name))
                if target.startswith(self.masked.prefixes) and os.path.isfile(target):
                    self.needs(entry / name)
            return
        if whole:
            self.show(real)
            self.show(entry)
            self.hidden.update(dict.fromkeys(_dot_entries(real)))
        programs = _programs(real)
        for name, _link in programs:
            program = entry / name
            if not whole and not name.startswith("."):
                self.shown.setdefault(program)  # shown alone, at its place (a link as its target)
            self.needs(program)
        self._tool_homes(real, [name for name, _ in programs])

    def _tool_homes(self, real: Path, names: list[str]) -> None:
        home = Path(self.environ.get("HOME") or Path.home())
        for tool, (variable, default) in TOOL_HOMES.items():
            given = Path(os.path.normpath(self.environ.get(variable) or home / default))
            root = Path(os.path.realpath(given))
            if (tool in names or real.parent == root) and (root / TOOL_HOME_MARK[tool]).is_dir():
                self.show(root)
                self.show(given)
        base = Path(self.environ.get("PYTHONUSERBASE") or home / ".local")
        if real == Path(os.path.realpath(base / "bin")):
            for site in sorted(base.glob("lib/python3*/site-packages")):
                self.show(site)


def _links(folder: Path) -> list[str]:
    """The names of the links in ``folder``."""
    try:
        return [e.name for e in os.scandir(folder) if e.is_symlink()]
    except OSError:
        return []


def _programs(folder: Path) -> list[tuple[str, bool]]:
    """The executables in ``folder``, each with whether it is a link: regular files, and links to them."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    out = []
    for e in entries:
        try:
            link = e.is_symlink()
            if e.is_file() and e.stat().st_mode & 0o111:
                out.append((e.name, link))
        except OSError:
            continue
    return sorted(out)


def _dot_entries(folder: Path) -> list[Path]:
    try:
        return sorted(folder / e.name for e in os.scandir(folder) if e.name.startswith("."))
    except OSError:
        return []


def path_view(path_var: str, masked: Sequence[Path], environ: Mapping[str, str] | None = None) -> PathView:
    """What to show (and mask again) so that the programs of ``path_var`` run though ``masked`` folders hold
    them."""
    view = _View(masked, os.environ if environ is None else environ)
    for raw in path_var.split(os.pathsep):
        if not raw or not os.path.isabs(raw):
            continue
        entry = Path(os.path.normpath(raw))
        if entry.is_dir():
            view.entry(entry)
    shown = sorted((p for p in view.shown if os.path.lexists(p)), key=lambda p: len(p.parts))
    # what a folder shown whole holds needs no showing of its own
    shown = [p for k, p in enumerate(shown) if not any(inside(p, q) for q in shown[:k] if q != p)]
    return PathView(shown, [p for p in view.hidden if p not in view.shown])
