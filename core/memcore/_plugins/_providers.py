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
torch constraint file, as the README installs). :func:`install_hint` never names a
distribution that is already installed: a kind missing although its distribution is
installed (its entry point failed, or plugin loading was restricted) is not fixed by pip.
"""

from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

__all__ = ["INSTALL_HINT", "distribution_of", "install_hint", "is_installed", "known_providers", "provider_of", "providers_from_tree"]

INSTALL_HINT = 'pip install -c constraints.txt "memcore[{extra}]"'
"""How an extra is installed (the constraint file keeps torch on its CPU build)."""

_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _source_root() -> Path | None:
    """The repository memcore runs from (``<root>/core/memcore``), if it is one."""
    root = Path(__file__).resolve().parents[3]
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
    extra_of = _extra_of(_read_toml(root / "pyproject.toml").get("project", {}))
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


def _extra_of(project: Mapping[str, Any]) -> dict[str, str]:
    """``{distribution: its extra}`` of the root extras: the extra named after it
    (``memcore-bm25`` -> ``bm25``, though ``fifo-kv`` brings it too), else the first one
    (not 'all') that installs it."""
    extra_of: dict[str, str] = {}
    for extra, requirements in (project.get("optional-dependencies") or {}).items():
        if extra == "all":
            continue
        for requirement in requirements:
            match = _REQUIREMENT_NAME.match(requirement)
            if match:
                dist = _normalise(match.group(1))
                if dist == f"memcore-{extra}":
                    extra_of[dist] = extra
                else:
                    extra_of.setdefault(dist, extra)
    return extra_of


def distributions_from_tree(root: Path) -> dict[str, str]:
    """``{extra: the plugin distribution it stands for}``: the distribution the hints map to
    that extra (``services`` -> memcore-services, though the extra brings fifo-kv too;
    ``fifo-kv`` -> memcore-fifo-kv, though it brings memcore-bm25 too)."""
    extra_of = _extra_of(_read_toml(root / "pyproject.toml").get("project", {}))
    out: dict[str, str] = {}
    for dist, extra in extra_of.items():
        out.setdefault(extra, dist)
    return out


def _installed_extra_distributions() -> dict[str, str]:
    """``{extra: distribution}`` from the installed memcore's ``Requires-Dist ...; extra == "x"``."""
    try:
        requirements = metadata.metadata("memcore").get_all("Requires-Dist") or ()
    except metadata.PackageNotFoundError:
        return {}
    found: dict[str, list[str]] = {}
    for requirement in requirements:
        marker = re.search(r"extra\s*==\s*[\"']([^\"']+)[\"']", requirement)
        name = _REQUIREMENT_NAME.match(requirement)
        if marker and name:
            found.setdefault(marker.group(1), []).append(_normalise(name.group(1)))
    return {extra: names[0] if len(names) == 1 else f"memcore-{extra}" for extra, names in found.items() if len(names) == 1 or f"memcore-{extra}" in names}


@lru_cache(maxsize=1)
def _extra_distributions() -> dict[str, str]:
    root = _source_root()
    return {**_installed_extra_distributions(), **(distributions_from_tree(root) if root is not None else {})}


def distribution_of(extra: str) -> str | None:
    """The plugin distribution an extra installs (``faiss`` -> ``memcore-faiss``), when it is one."""
    return _extra_distributions().get(extra)


def is_installed(distribution: str) -> bool:
    """Whether a distribution of that name is installed in this environment."""
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def install_hint(extra: str | None) -> str | None:
    """The ``pip install`` command for an extra, or None when there is none or when its
    distribution is already installed (pip would change nothing)."""
    if extra is None:
        return None
    dist = distribution_of(extra)
    if dist is not None and is_installed(dist):
        return None
    return INSTALL_HINT.format(extra=extra)


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
