"""The import graph of ``core/memcore`` has no circle (docs/architecture.md §1: imports only go down).

The graph is built from the modules' source (ASTs), nothing is imported. Three graphs:

- module level: the imports that run when a module is imported (``if TYPE_CHECKING:``
  blocks excluded, ``try``/``if`` bodies at module level included);
- deferred: the same plus the imports inside functions, so a circle is not hidden by
  moving one of its imports into a function;
- typed: the same plus the ``if TYPE_CHECKING:`` imports, so a circle is not hidden behind
  a type-only import either.

And the floors: each package of the core sits on a floor and imports only from its own
floor or lower ones (docs/architecture.md §1).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

import pytest

CORE = Path(__file__).resolve().parents[1] / "core" / "memcore"
ImportNode = ast.Import | ast.ImportFrom


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level(body: list[ast.stmt]) -> Iterator[ImportNode]:
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _type_checking(node.test):
                yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _module_level(node.body + [s for h in node.handlers for s in h.body] + node.orelse + node.finalbody)


def _all_imports(tree: ast.Module, typed: bool = False) -> Iterator[ImportNode]:
    skipped = (
        set() if typed else {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _type_checking(node.test) for s in node.body for n in ast.walk(s)}
    )
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped:
            yield node


def import_graph(root: Path, *, deferred: bool, typed: bool = False) -> dict[str, set[str]]:
    """``module -> modules of the package it imports`` (``from pkg import sub`` is an edge to
    ``pkg.sub`` when that is a module, else to ``pkg``)."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        base = name.split(".") if is_package else name.split(".")[:-1]
        for node in _all_imports(tree, typed) if deferred else _module_level(tree.body):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                anchor = base[: len(base) - (node.level - 1)] if node.level else []
                module = ".".join(anchor + ([node.module] if node.module else [])) if node.level else (node.module or "")
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in node.names]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _describe(graph: dict[str, set[str]], component: list[str]) -> str:
    return "; ".join(f"{m} -> {sorted(graph[m] & set(component))}" for m in component)


@pytest.mark.parametrize(
    "deferred, typed", [(False, False), (True, False), (True, True)], ids=["module-level", "with-deferred-imports", "with-type-only-imports"]
)
def test_core_import_graph_has_no_cycle(deferred, typed):
    graph = import_graph(CORE, deferred=deferred, typed=typed)
    assert len(graph) > 30
    found = cycles(graph)
    assert not found, "import circles in core/memcore: " + " | ".join(_describe(graph, c) for c in found)


FLOORS = {
    "errors": 0,
    "_util": 1,
    "model": 2,
    "_plugins": 3,
    "settings": 3,
    "stores": 4,
    "indexes": 4,
    "embedders": 4,
    "llms": 4,
    "collection": 5,
    "retrieval": 6,
    "services": 7,
    "api": 8,
    "plugin": 9,
    "default_plugins": 9,
    "cli": 10,
    "eval": 10,
    "testing": 10,
    "": 10,
}
"""The floor of each package (or top-level module) of ``memcore``: imports only go down or sideways."""


def _floor(module: str) -> tuple[str, int]:
    top = module.split(".")[1] if "." in module else ""
    return top, FLOORS[top]


def test_every_core_package_has_a_floor():
    assert {_floor(m)[0] for m in import_graph(CORE, deferred=False)} <= set(FLOORS)


def test_imports_only_go_down_the_floors():
    graph = import_graph(CORE, deferred=True, typed=True)
    upward = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets if _floor(t)[1] > _floor(m)[1])
    assert not upward, "imports that go up a floor: " + "; ".join(upward)


def test_the_cycle_finder_finds_a_circle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import x\n")
    (package / "b.py").write_text("def f():\n    from . import a\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import y\n")
    assert cycles(import_graph(package, deferred=False)) == []
    assert cycles(import_graph(package, deferred=True)) == [["pkg.a", "pkg.b"]]
    assert import_graph(package, deferred=True)["pkg.c"] == set()
    assert import_graph(package, deferred=True, typed=True)["pkg.c"] == {"pkg.a"}


def test_the_core_imports_no_plugin():
    graph_roots = set()
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                graph_roots.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                graph_roots.update(a.name.split(".")[0] for a in node.names)
    assert not {r for r in graph_roots if r.startswith("memcore_")}
