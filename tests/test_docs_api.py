"""The API reference (docs/api.md) is generated from the docstrings and covers the public API.

Every name of ``memcore.__all__`` has a ``::: memcore.<name>`` entry and every other name of
``memcore.plugin.__all__`` a ``::: memcore.plugin.<name>`` entry, nothing else is listed there, and the built page (mkdocstrings, offline) holds an anchor for each name, so a name
added to the API without an entry, or one whose docstring mkdocstrings cannot read, fails.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import memcore
import memcore.plugin

ROOT = Path(__file__).resolve().parents[1]
ENTRY = re.compile(r"^::: (memcore(?:\.plugin)?)\.(\w+)\s*$", re.M)
PLUGIN_ONLY = [name for name in memcore.plugin.__all__ if name not in memcore.__all__]
"""The names of the plugin face that the application face does not have."""


def entries(face: str) -> list[str]:
    return [name for module, name in ENTRY.findall((ROOT / "docs" / "api.md").read_text(encoding="utf-8")) if module == face]


@pytest.mark.parametrize("face, names", [("memcore", memcore.__all__), ("memcore.plugin", PLUGIN_ONLY)], ids=["memcore", "memcore.plugin"])
def test_every_public_name_has_an_entry(face, names):
    listed = entries(face)
    missing = [name for name in names if name not in listed]
    extra = [name for name in listed if name not in names]
    assert not missing, f"docs/api.md has no '::: {face}.<name>' for {missing}"
    assert not extra, f"docs/api.md lists names under {face} that are not its own: {extra}"
    assert len(listed) == len(set(listed)), "a name is listed twice"


def test_the_api_page_is_in_the_nav_and_uses_mkdocstrings():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "api.md" in config and "mkdocstrings" in config
    assert "mkdocstrings[python]" in (ROOT / "requirements-dev.txt").read_text(encoding="utf-8")


def test_the_built_page_documents_every_public_name(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install -r requirements-dev.txt)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    page = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    anchors = set(re.findall(r'id="(memcore(?:\.plugin)?\.\w+)"', page))
    missing = [f"memcore.{name}" for name in memcore.__all__ if f"memcore.{name}" not in anchors]
    missing += [f"memcore.plugin.{name}" for name in PLUGIN_ONLY if f"memcore.plugin.{name}" not in anchors]
    assert not missing, f"the built API page has no section for {missing}"
