"""The house's shape, as docs/DESIGN.md draws it: no import circle in src/autorl (deferred and TYPE_CHECKING
imports count: they hide a circle, they do not remove it), the benchmark and agent contracts below the
evaluation engine, a top level of at most twelve modules (the rest live in the folders that are the layers),
package ``__init__`` files that define nothing but a package's face, and modules of one job (none over 350
lines, in src or in the plugins)."""

from __future__ import annotations

import ast
from pathlib import Path

import autorl

SRC = Path(autorl.__file__).parent


def _modules() -> dict[str, Path]:
    return {
        ".".join(("autorl", *f.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__"): f
        for f in SRC.rglob("*.py")
        if "templates" not in f.parts
    }


def _import_graph() -> dict[str, set[str]]:
    """Module -> the autorl modules it imports, every import counted: top-level, deferred and TYPE_CHECKING,
    absolute and relative."""
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {known(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                targets |= {known(f"{base}.{a.name}") or known(base) for a in node.names}
        graph[name] = {t for t in targets if t and t != name}
    # the package root re-exports the public API: it is left out, and so are the circles only it closes
    return {m: targets - {"autorl"} for m, targets in graph.items() if m != "autorl"}


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_no_module_of_autorl_is_in_an_import_circle() -> None:
    graph = _import_graph()
    reach = {m: _reach(graph, m) for m in graph}
    circles = sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if a in reach[b]})
    assert not circles, f"import circles: {circles}"


def test_the_benchmark_contract_sits_below_the_evaluation_engine() -> None:
    graph = _import_graph()
    for contract in ("autorl.benchmark", "autorl.agent", "autorl.scoring", "autorl.hidden"):
        # the backend's contract (autorl.inference.base: a request, a completion) is a type, like theirs
        below = _reach(graph, contract) - {"autorl.inference.base"}
        assert not {
            m
            for m in below
            if m.startswith(("autorl.evaluation", "autorl.inference", "autorl.grader", "autorl.runs", "autorl.cli"))
        }, contract


def _defines(path: Path) -> list[str]:
    """What a module defines beyond a face: functions, classes and assignments other than ``__all__``."""
    out = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [ast.unparse(t) for t in targets if ast.unparse(t) != "__all__"]
    return out


def test_modules_do_one_job() -> None:
    files = [f for f in SRC.rglob("*.py") if "templates" not in f.parts]
    files += [f for f in (SRC.parents[1] / "plugins").glob("*/src/**/*.py")]
    over = {str(f): n for f in files if (n := len(f.read_text().splitlines())) > 350}
    assert not over, f"modules over 350 lines: {over}"


def test_the_top_level_shows_the_layers() -> None:
    # a module that only hands on an older path's names (a face) is no room of its own
    top = sorted(f.stem for f in SRC.glob("*.py") if f.name != "__init__.py" and _defines(f))
    assert len(top) <= 12, f"{len(top)} modules at the top of autorl: {top}"


#: what a face may define beyond re-exports: the call of a callable package (``autorl.runs()`` reads the recorded
#: runs, ``autorl.sweep(spec)`` runs a study) and the lazy attributes of a package whose import stays light
_FACE_MECHANICS = {
    "autorl.runs": {"_CallablePackage", "sys.modules[__name__].__class__"},
    "autorl.sweep": {"_CallablePackage", "sys.modules[__name__].__class__"},
    "autorl.gateway": {"__getattr__", "_WHERE"},
}


def test_package_faces_hold_no_logic() -> None:
    faces = {name: path for name, path in _modules().items() if path.name == "__init__.py" and name != "autorl"}
    logic = {name: set(_defines(path)) - _FACE_MECHANICS.get(name, set()) for name, path in faces.items()}
    assert not {name: found for name, found in logic.items() if found}, logic
