"""docs/plugins/testing.md's complete test module works, with and without the plugin installed.

The module (the ``python`` block that starts with ``# tests/test_keyword_plugin.py``) is
written to a temporary directory and run by pytest in a subprocess against the example
third-party plugin (``examples/third_party_plugin``, ``memcore-keyword-index``):

- installed (the development requirements install it): every test passes, the
  registration suite included;
- not installed: the distribution is hidden from ``importlib.metadata`` (a
  ``sitecustomize`` on ``PYTHONPATH``; the module still imports, as from a source checkout),
  so memcore does not load it: the autouse fixture registers it, the contract and memory
  tests pass, the registration suite is skipped, nothing errors.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "plugins" / "testing.md"
MODULE_NAME = "test_keyword_plugin.py"

HIDE_DISTRIBUTION = '''
"""Hide memcore-keyword-index from importlib.metadata: the plugin as if not installed."""
import importlib.metadata as _md

_discover = _md.Distribution.discover.__func__


def _without_keyword(cls, **kwargs):
    return (d for d in _discover(cls, **kwargs) if (d.metadata["Name"] or "").lower() != "memcore-keyword-index")


_md.Distribution.discover = classmethod(_without_keyword)
'''


def the_module() -> str:
    for match in re.finditer(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M):
        if match.group(1).startswith(f"# tests/{MODULE_NAME}\n"):
            return match.group(1)
    raise AssertionError(f"{PAGE.name} has no python block starting with '# tests/{MODULE_NAME}'")


def run_module(tmp_path: Path, *, installed: bool) -> subprocess.CompletedProcess:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / MODULE_NAME).write_text(the_module(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if (not k.startswith("MEMCORE_") or k == "MEMCORE_DEFAULT_EMBEDDER") and k != "PYTHONPATH"}
    env["HF_HUB_OFFLINE"] = "1"
    if not installed:
        site = tmp_path / "hide"
        site.mkdir()
        (site / "sitecustomize.py").write_text(HIDE_DISTRIBUTION, encoding="utf-8")
        env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def counts(output: str) -> dict[str, int]:
    summary = output.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary)}


@pytest.fixture(autouse=True)
def needs_the_example_plugin():
    if importlib.util.find_spec("memcore_keyword_index") is None or not entry_points(group="memcore", name="keyword"):
        pytest.skip("memcore-keyword-index is not installed (pip install -e ./examples/third_party_plugin)")


def test_the_page_has_the_complete_module():
    module = the_module()
    assert "IndexContract" in module and "PluginRegistrationContract" in module and "register_plugin" in module


def test_complete_module_passes_with_the_plugin_installed(tmp_path):
    result = run_module(tmp_path, installed=True)
    found = counts(result.stdout)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert found.get("passed", 0) >= 25, result.stdout[-2000:]
    assert "not installed" not in result.stdout, "the registration suite runs when the plugin is installed"


def test_complete_module_passes_without_the_plugin_installed(tmp_path):
    result = run_module(tmp_path, installed=False)
    found = counts(result.stdout)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert found.get("passed", 0) >= 15, result.stdout[-2000:]
    assert found.get("skipped", 0) >= 5 and "not installed" in result.stdout, "the registration suite skips cleanly"
    assert not found.get("error") and not found.get("errors") and not found.get("failed")
