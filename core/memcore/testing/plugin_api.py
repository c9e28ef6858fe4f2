"""The plugin API check: a plugin's modules import memcore only through its declared API.

The API is the module ``memcore.plugin`` (the names in its ``__all__``), the names in
``memcore.__all__`` (the application face: ``open``, the data types, the errors,
``hookimpl``) and the package ``memcore.testing``; anything else (``memcore.model``,
``memcore.model._text``...) is core-internal and may change without notice. Plugins never import each other either (another ``memcore_*`` package),
with one exception: a plugin may import the packages of the distributions it declares as
dependencies when those are libraries, not plugins (no ``memcore`` entry point) -- e.g.
memcore-chroma and memcore-poincare share ``memcore_chroma_support``
(:func:`dependency_packages`). The standard library and the plugin's own third-party
dependencies are not restricted here (:attr:`PluginRegistrationContract.allowed_imports`
can restrict them).

Read from the source (an AST scan of every module of the package, imports inside functions
included), so nothing has to be imported to check it.
"""

from __future__ import annotations

import ast
import re
from importlib import metadata
from pathlib import Path
from typing import Iterable

__all__ = ["PLUGIN_API_MODULES", "plugin_api", "plugin_api_violations", "source_violations", "dependency_packages"]

PLUGIN_API_MODULES: tuple[str, ...] = ("memcore", "memcore.plugin", "memcore.testing")
"""The memcore modules a plugin may import (``memcore.testing`` with its submodules)."""


def plugin_api() -> frozenset[str]:
    """The names a plugin may import from ``memcore.plugin``: its ``__all__``."""
    import memcore.plugin

    return frozenset(memcore.plugin.__all__)


def application_api() -> frozenset[str]:
    """The names a plugin may import from ``memcore`` itself: its ``__all__``, the modules
    ``plugin`` and ``testing``, and ``__version__``."""
    import memcore

    return frozenset(memcore.__all__) | {"plugin", "testing", "__version__"}


def _top_level_packages(dist: metadata.Distribution) -> set[str]:
    """The top-level import packages of an installed distribution: ``top_level.txt``, else
    the package folders in its file list, else (an editable install lists only a ``.pth``)
    the package named after the distribution (``memcore-chroma-support`` -> ``memcore_chroma_support``)."""
    text = dist.read_text("top_level.txt")
    if text:
        return {line.strip() for line in text.splitlines() if line.strip()}
    found = set()
    for file in dist.files or ():
        parts = file.parts
        if len(parts) > 1 and parts[-1] == "__init__.py" and not parts[0].endswith((".dist-info", ".data")):
            found.add(parts[0])
    return found or {re.sub(r"[-.]+", "_", dist.metadata["Name"]).lower()}


def dependency_packages(distribution: str) -> frozenset[str]:
    """The ``memcore_*`` packages a plugin distribution may import besides its own: those of
    the distributions it declares as dependencies (``Requires-Dist``, extras included) that
    are installed and are libraries -- a dependency with a ``memcore`` entry point is a
    plugin, and plugins never import each other. Empty when ``distribution`` is not installed."""
    try:
        requires = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        return frozenset()
    allowed: set[str] = set()
    for requirement in requires:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if match is None:
            continue
        try:
            dist = metadata.distribution(match.group(1))
        except metadata.PackageNotFoundError:
            continue
        if any(ep.group == "memcore" for ep in dist.entry_points):
            continue  # a plugin
        allowed |= {name for name in _top_level_packages(dist) if name.startswith("memcore_")}
    return frozenset(allowed)


def _allowed_module(name: str) -> bool:
    return name in PLUGIN_API_MODULES or name.startswith("memcore.testing.")


def source_violations(source: str, filename: str, own_package: str, api: frozenset[str] | None = None, libraries: Iterable[str] = ()) -> list[str]:
    """Messages for each import in ``source`` that leaves the plugin API (empty when clean).

    ``own_package`` is the plugin's top-level package (``memcore_faiss``): importing it is
    fine, importing any other ``memcore_*`` package is not, except ``libraries`` (the
    packages of its declared library dependencies, :func:`dependency_packages`).
    """
    fine = {own_package, *libraries}
    api = plugin_api() if api is None else api
    app = application_api()
    tree = ast.parse(source, filename=filename)
    problems: list[str] = []
    memcore_names: set[str] = set()  # local names bound to the memcore package itself

    def where(node: ast.AST) -> str:
        return f"{filename}:{getattr(node, 'lineno', '?')}"

    def other_plugin(module: str) -> bool:
        root = module.split(".")[0]
        return root.startswith("memcore_") and root not in fine

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "memcore" or alias.name.startswith("memcore."):
                    if not _allowed_module(alias.name):
                        problems.append(f"{where(node)}: import {alias.name} (core-internal; import names from memcore.plugin)")
                    elif alias.name == "memcore":
                        memcore_names.add(alias.asname or "memcore")
                elif other_plugin(alias.name):
                    problems.append(f"{where(node)}: import {alias.name} (plugins never import each other)")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = node.module
            if module == "memcore":
                for alias in node.names:
                    if alias.name not in app:
                        hint = "; import it from memcore.plugin" if alias.name in api else ""
                        problems.append(f"{where(node)}: from memcore import {alias.name} (not in memcore.__all__{hint})")
            elif module == "memcore.plugin":
                for alias in node.names:
                    if alias.name not in api:
                        problems.append(f"{where(node)}: from memcore.plugin import {alias.name} (not in memcore.plugin.__all__)")
            elif module.startswith("memcore."):
                if not _allowed_module(module):
                    names = ", ".join(a.name for a in node.names)
                    problems.append(f"{where(node)}: from {module} import {names} (core-internal; import names from memcore.plugin)")
            elif other_plugin(module):
                problems.append(f"{where(node)}: from {module} import ... (plugins never import each other)")
    if memcore_names:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in memcore_names:
                if node.attr not in app:
                    problems.append(f"{where(node)}: {node.value.id}.{node.attr} (not in memcore.__all__)")
    return problems


def plugin_api_violations(
    package_dir: Path | str, own_package: str | None = None, api: Iterable[str] | None = None, libraries: Iterable[str] = ()
) -> list[str]:
    """Violations of the plugin API in every ``*.py`` under ``package_dir`` (recursively);
    ``libraries``: other ``memcore_*`` packages it may import (see :func:`source_violations`)."""
    package_dir = Path(package_dir)
    own = own_package or package_dir.name
    names = plugin_api() if api is None else frozenset(api)
    problems: list[str] = []
    for path in sorted(package_dir.rglob("*.py")):
        problems += source_violations(path.read_text(encoding="utf-8"), str(path), own, names, libraries)
    return problems
