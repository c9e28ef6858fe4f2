"""mypy (strict, run by .ci/run) checks the core and every plugin package: a new plugin
distribution cannot be left out of ``[tool.mypy] files`` unnoticed."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_plugin_package_is_type_checked():
    files = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"])
    packages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "plugins").glob("*/memcore_*") if (p / "__init__.py").exists()}
    assert packages, "no plugin package found"
    assert not packages - files, f"plugin packages missing from [tool.mypy] files: {sorted(packages - files)}"
    assert "core/memcore" in files
