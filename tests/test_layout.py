"""The house's shape, as docs/DESIGN.md draws it: no import circle in src/autorl (deferred and TYPE_CHECKING
imports count: they hide a circle, they do not remove it), the benchmark contract below the evaluation
engine, and modules of one job (at most one over 350 lines, none over 450)."""

from __future__ import annotations

import ast
from pathlib import Path

import autorl

SRC = Path(autorl.__file__).parent


def _modules() -> dict[str, Path]:
    return {".".join(("autorl", *f.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__"): f
            for f in SRC.rglob("*.py") if "templates" not in f.parts}


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
    for contract in ("autorl.benchmark", "autorl.scoring", "autorl.hidden"):
        # the backend's contract (autorl.inference.base: a request, a completion) is a type, like theirs
        below = _reach(graph, contract) - {"autorl.inference.base"}
        assert not {m for m in below if m.startswith(("autorl.evaluation", "autorl.inference", "autorl.grader",
                                                      "autorl.runs", "autorl.cli"))}, contract


def test_modules_do_one_job() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    over = sorted(name for name, n in sizes.items() if n > 350)
    assert len(over) <= 1, f"more than one module over 350 lines: {over}"
    assert all(sizes[name] <= 450 for name in over), {name: sizes[name] for name in over}
