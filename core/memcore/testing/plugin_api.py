"""The plugin API check: a plugin's modules import memcore only through its declared API.

The API is the names in ``memcore.__all__`` plus the package ``memcore.testing``; anything
else (``memcore.records``, ``memcore.stages.text``...) is core-internal and may change
without notice. Plugins never import each other either (another ``memcore_*`` package).
The standard library and the plugin's own third-party dependencies are not restricted here
(:attr:`PluginRegistrationContract.allowed_imports` can restrict them).

Read from the source (an AST scan of every module of the package, imports inside functions
included), so nothing has to be imported to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterable

__all__ = ["PLUGIN_API_MODULES", "plugin_api", "plugin_api_violations", "source_violations"]

PLUGIN_API_MODULES: tuple[str, ...] = ("memcore", "memcore.testing")
"""The memcore modules a plugin may import (``memcore.testing`` with its submodules)."""


def plugin_api() -> frozenset[str]:
    """The names a plugin may import from ``memcore``: its ``__all__`` plus ``testing``."""
    import memcore

    return frozenset(memcore.__all__) | {"testing", "__version__"}


def _allowed_module(name: str) -> bool:
    return name == "memcore" or name == "memcore.testing" or name.startswith("memcore.testing.")


def source_violations(source: str, filename: str, own_package: str, api: frozenset[str] | None = None) -> list[str]:
    """Messages for each import in ``source`` that leaves the plugin API (empty when clean).

    ``own_package`` is the plugin's top-level package (``memcore_faiss``): importing it is
    fine, importing any other ``memcore_*`` package is not.
    """
    api = plugin_api() if api is None else api
    tree = ast.parse(source, filename=filename)
    problems: list[str] = []
    memcore_names: set[str] = set()  # local names bound to the memcore package itself

    def where(node: ast.AST) -> str:
        return f"{filename}:{getattr(node, 'lineno', '?')}"

    def other_plugin(module: str) -> bool:
        root = module.split(".")[0]
        return root.startswith("memcore_") and root != own_package

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "memcore" or alias.name.startswith("memcore."):
                    if not _allowed_module(alias.name):
                        problems.append(f"{where(node)}: import {alias.name} (core-internal; import names from memcore)")
                    elif alias.name == "memcore":
                        memcore_names.add(alias.asname or "memcore")
                elif other_plugin(alias.name):
                    problems.append(f"{where(node)}: import {alias.name} (plugins never import each other)")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = node.module
            if module == "memcore":
                for alias in node.names:
                    if alias.name not in api:
                        problems.append(f"{where(node)}: from memcore import {alias.name} (not in memcore.__all__)")
            elif module.startswith("memcore."):
                if not _allowed_module(module):
                    names = ", ".join(a.name for a in node.names)
                    problems.append(f"{where(node)}: from {module} import {names} (core-internal; import names from memcore)")
            elif other_plugin(module):
                problems.append(f"{where(node)}: from {module} import ... (plugins never import each other)")
    if memcore_names:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in memcore_names:
                if node.attr not in api:
                    problems.append(f"{where(node)}: {node.value.id}.{node.attr} (not in memcore.__all__)")
    return problems


def plugin_api_violations(package_dir: Path | str, own_package: str | None = None, api: Iterable[str] | None = None) -> list[str]:
    """Violations of the plugin API in every ``*.py`` under ``package_dir`` (recursively)."""
    package_dir = Path(package_dir)
    own = own_package or package_dir.name
    names = plugin_api() if api is None else frozenset(api)
    problems: list[str] = []
    for path in sorted(package_dir.rglob("*.py")):
        problems += source_violations(path.read_text(encoding="utf-8"), str(path), own, names)
    return problems
