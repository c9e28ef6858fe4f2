"""Every package of the repository ships ``py.typed`` (PEP 561), so a type checker reads the
annotations of memcore and of each plugin in an application's code (hatchling puts every
file of a package folder in the wheel)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted([ROOT / "core" / "memcore", *ROOT.glob("plugins/*/memcore_*"), *ROOT.glob("examples/*/memcore_*")])


def test_there_are_packages_to_check():
    assert len(PACKAGES) >= 10


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_the_package_ships_py_typed(package):
    assert (package / "__init__.py").is_file()
    assert (package / "py.typed").is_file(), f"{package.relative_to(ROOT)} has no py.typed"
