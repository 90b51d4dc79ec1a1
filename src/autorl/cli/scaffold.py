"""``autorl new benchmark|agent NAME``: a complete plugin package that installs, is discovered, and tests green.

The packages are made from template files shipped with autorl (``autorl/templates/<kind>/``, package data):
each ``<path>.tmpl`` becomes ``<path>``, with ``{name}``, ``{dist}``, ``{module}`` and ``{cls}`` filled in, in
the path and in the text (``str.format``, so a literal brace is written twice).
"""

from __future__ import annotations

import re
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from autorl.errors import UsageError

KINDS = ("benchmark", "agent")
_SUFFIX = ".tmpl"
_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


def _names(name: str) -> dict[str, str]:
    if not _NAME.match(name):
        raise UsageError(f"plugin name {name!r}: use lower-case letters, digits and single dashes, e.g. my-bench")
    module = name.replace("-", "_")
    return {
        "name": name,
        "dist": f"autorl-{name}",
        "module": f"autorl_{module}",
        "cls": "".join(part.capitalize() for part in name.split("-")),
    }


def templates(kind: str) -> dict[str, str]:
    """The templates of ``kind`` (``benchmark`` or ``agent``): path in the new package -> text, both unformatted."""
    if kind not in KINDS:
        raise UsageError(f"autorl new makes a 'benchmark' or an 'agent', not {kind!r}")
    found: dict[str, str] = {}

    def walk(folder: Traversable, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            elif entry.name.endswith(_SUFFIX):
                found[prefix + entry.name[: -len(_SUFFIX)]] = entry.read_text(encoding="utf-8")

    walk(resources.files("autorl").joinpath("templates", kind), "")
    return dict(sorted(found.items()))


def next_steps(root: Path) -> str:
    """What to run after :func:`scaffold` made ``root``: install it with its test extra (which brings pytest),
    then run its tests with this environment's pytest (docs/plugins/README.md)."""
    return f"pip install -e '{root}[test]' && python -m pytest {root}/tests"


def scaffold(kind: str, name: str, parent: Path) -> Path:
    """Write the package ``autorl-<name>`` under ``parent``; refuses to overwrite."""
    names = _names(name)
    files = templates(kind)
    root = parent / names["dist"]
    if root.exists():
        raise UsageError(f"{root} already exists; choose another name or --dir")
    for rel, template in files.items():
        path = root / rel.format(**names)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**names))
    return root
