"""docs/plugins/builtin.md's table of plugin distributions says what each one registers.

Each ``plugins/*`` distribution with a ``memcore`` entry point has one row; the row names its
extra and entry point and, in backticks, every component of its ``[tool.memcore.provides]``
table (the table ``tests/test_providers.py`` checks against what the plugin registers). A
library distribution (no entry point) has no row.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "plugins" / "builtin.md"
PLUGIN_DIRS = sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))


def _rows() -> dict[str, list[str]]:
    """distribution -> its cells, from the page's table rows that start with a distribution."""
    rows = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\| `(memcore-[\w-]+)` \|", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in line.strip("|").split("|")]
    return rows


def _project(plugin_dir: Path) -> dict:
    return tomllib.loads((plugin_dir / "pyproject.toml").read_text(encoding="utf-8"))


def _extra_of(dist: str) -> str | None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for extra, requirements in extras.items():
        if extra != "all" and any(r.split(" @")[0].split("[")[0].strip() == dist for r in requirements):
            return extra
    return None


@pytest.mark.parametrize("plugin_dir", PLUGIN_DIRS, ids=lambda p: p.name)
def test_each_plugin_distribution_has_a_true_row(plugin_dir):
    data = _project(plugin_dir)
    dist = data["project"]["name"]
    entry_points = data["project"].get("entry-points", {}).get("memcore", {})
    rows = _rows()
    if not entry_points:  # a library the plugins share: it registers nothing
        assert dist not in rows, f"{dist} registers nothing: no row in {PAGE.name}"
        return
    assert dist in rows, f"{PAGE.name} has no row for {dist}"
    _, extra, entry_point, provides, _docs = rows[dist]
    assert extra == f"`{_extra_of(dist)}`", (dist, extra)
    assert entry_point == f"`{next(iter(entry_points))}`", (dist, entry_point)
    named = set(re.findall(r"`([^`]+)`", provides))
    declared = {name for names in data["tool"]["memcore"]["provides"].values() for name in names}
    assert declared <= named, f"{PAGE.name}: the {dist} row does not name {sorted(declared - named)}"
    assert "planned" not in provides.lower(), f"{PAGE.name}: the {dist} row still says planned"


def test_the_table_has_no_row_for_a_distribution_that_does_not_exist():
    names = {_project(d)["project"]["name"] for d in PLUGIN_DIRS}
    assert set(_rows()) <= names | {"memcore-keyword-index"}, sorted(set(_rows()) - names)
