"""Which extra of memcore provides a component name: the ``pip install`` hints of
:class:`memcore.UnknownComponentError`, read from distribution metadata, not hard-coded.

Sources, merged:

- the checked-out repository (memcore installed from its source tree): the root
  ``pyproject.toml``'s extras (``faiss = ["memcore-faiss @ .../plugins/faiss"]``) say which
  extra installs which plugin distribution, and each ``plugins/*/pyproject.toml`` says what
  that distribution registers in ``[tool.memcore.provides]`` (``indexes = ["faiss"]``) next
  to its entry point;
- the installed ``memcore`` distribution's metadata (``Provides-Extra``): an extra is a hint
  for the component of the same name (``faiss`` -> ``memcore[faiss]``), so a wheel install
  without the source tree still hints the obvious cases.

Hints never import a plugin. :data:`INSTALL_HINT` is the command shown (always with the
torch constraint file, as the README installs).
"""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

__all__ = ["INSTALL_HINT", "known_providers", "provider_of", "providers_from_tree"]

INSTALL_HINT = 'pip install -c constraints.txt "memcore[{extra}]"'
"""How an extra is installed (the constraint file keeps torch on its CPU build)."""

_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _source_root() -> Path | None:
    """The repository memcore runs from (``<root>/core/memcore``), if it is one."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or not (root / "plugins").is_dir():
        return None
    return root


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def providers_from_tree(root: Path) -> dict[str, dict[str, str]]:
    """``{category: {component name: extra}}`` from a checkout's root extras and its
    ``plugins/*/pyproject.toml`` ``[tool.memcore.provides]`` tables."""
    project = _read_toml(root / "pyproject.toml").get("project", {})
    extra_of: dict[str, str] = {}  # distribution -> the extra that installs it
    for extra, requirements in (project.get("optional-dependencies") or {}).items():
        if extra == "all":
            continue
        for requirement in requirements:
            match = _REQUIREMENT_NAME.match(requirement)
            if match:
                extra_of.setdefault(_normalise(match.group(1)), extra)
    out: dict[str, dict[str, str]] = {}
    for path in sorted((root / "plugins").glob("*/pyproject.toml")):
        data = _read_toml(path)
        dist = _normalise(str(data.get("project", {}).get("name", "")))
        extra = extra_of.get(dist)
        provides = data.get("tool", {}).get("memcore", {}).get("provides", {})
        if not extra or not isinstance(provides, Mapping):
            continue
        for category, names in provides.items():
            for name in names if isinstance(names, list) else ():
                out.setdefault(str(category), {}).setdefault(str(name), extra)
    return out


def _installed_extras() -> list[str]:
    try:
        return [e for e in metadata.metadata("memcore").get_all("Provides-Extra") or () if e != "all"]
    except metadata.PackageNotFoundError:
        return []


@lru_cache(maxsize=1)
def known_providers() -> dict[str, dict[str, str]]:
    """``{category: {component name: extra}}`` from the checkout and the installed metadata."""
    root = _source_root()
    return providers_from_tree(root) if root is not None else {}


def provider_of(category: str, name: str) -> str | None:
    """The extra that provides ``name`` in ``category``, or None when no metadata says."""
    extra = known_providers().get(category, {}).get(name)
    if extra is None and name in _extras():
        extra = name
    return extra


@lru_cache(maxsize=1)
def _extras() -> frozenset[str]:
    root = _source_root()
    extras = set(_installed_extras())
    if root is not None:
        extras |= {e for e in (_read_toml(root / "pyproject.toml").get("project", {}).get("optional-dependencies") or {}) if e != "all"}
    return frozenset(extras)
