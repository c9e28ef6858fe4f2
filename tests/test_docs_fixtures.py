"""The plugin docs name memcore.testing's fixtures as they are, and say what allowed_imports counts.

- every "`name` fixture" / "fixture `name`" in docs/ is a fixture of the pytest plugin
  ``memcore.testing.pytest_plugin``, the one fixture a contract suite requests, or one the
  docs import from a plugin's testing module (``from memcore_chroma_support.testing import
  chroma_server``); a context manager such as ``register_plugin`` is not a fixture;
- the suite table of docs/plugins/testing.md gives each suite the fixture it really requests;
- ``allowed_imports`` counts the standard library (the docs say so, and the check does it).
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest

import memcore.testing
from memcore.testing import pytest_plugin

DOCS = Path(__file__).resolve().parents[1] / "docs"
CONTRACTS = ["IndexContract", "StoreContract", "FusionContract", "StageContract", "ServiceContract"]
PYTEST_BUILTINS = {"self", "tmp_path", "monkeypatch", "request", "capsys", "tmp_path_factory"}


def plugin_fixtures() -> set[str]:
    """Fixtures defined by the pytest plugin (decorated functions, whatever pytest's version calls them)."""
    return {name for name, obj in vars(pytest_plugin).items() if "fixture" in type(obj).__name__.lower() or hasattr(obj, "_pytestfixturefunction")}


def requested(contract: str) -> set[str]:
    """Fixtures of the suite its tests request (the one a subclass provides among them)."""
    cls = getattr(memcore.testing, contract)
    asked, defined = set(), set()
    for klass in cls.__mro__:
        for name, member in vars(klass).items():
            if "fixture" in type(member).__name__.lower() or hasattr(member, "_pytestfixturefunction"):
                defined.add(name)
                member = getattr(member, "__wrapped__", None) or getattr(member, "_get_wrapped_function", lambda: None)()
            elif not (name.startswith("test_") and inspect.isfunction(member)):
                continue
            if member is not None:
                asked |= set(inspect.signature(member).parameters)
    return (asked & defined) - PYTEST_BUILTINS


def named_fixtures() -> list[tuple[str, str]]:
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"`([\w.]+)`\s+fixture\b|\bfixture\s+`([\w.]+)`", text):
            found.append((str(path.relative_to(DOCS)), (match.group(1) or match.group(2)).rsplit(".", 1)[-1]))
    return found


def test_the_pytest_plugin_has_fixtures():
    assert "memcore_plugin" in plugin_fixtures()
    assert "make_index" in requested("IndexContract")


def is_fixture(obj: object) -> bool:
    return "fixture" in type(obj).__name__.lower() or hasattr(obj, "_pytestfixturefunction")


def imported_fixtures() -> set[str]:
    """Fixtures the docs tell to import from a plugin's testing module (``from
    memcore_chroma_support.testing import chroma_server``) that really are fixtures there."""
    import importlib

    found = set()
    for path in sorted(DOCS.rglob("*.md")):
        for module, name in re.findall(r"from (memcore[\w.]*) import (\w+)", path.read_text(encoding="utf-8")):
            try:
                obj = getattr(importlib.import_module(module), name, None)
            except ImportError:  # the plugin is not installed: its fixture cannot be checked here
                found.add(name)
                continue
            if is_fixture(obj):
                found.add(name)
    return found


def test_docs_name_only_real_fixtures():
    real = plugin_fixtures() | set().union(*(requested(c) for c in CONTRACTS)) | imported_fixtures()
    wrong = [f"{page}: `{name}`" for page, name in named_fixtures() if name not in real]
    assert named_fixtures(), "the plugin docs name their fixtures"
    assert not wrong, f"named as fixtures but not fixtures (real ones: {sorted(real)}): {wrong}"


@pytest.mark.parametrize("contract", CONTRACTS)
def test_suite_table_gives_the_fixture_each_suite_requests(contract):
    text = (DOCS / "plugins" / "testing.md").read_text(encoding="utf-8")
    row = re.search(rf"^\| `{contract}` \| `(\w+)` \|", text, re.M)
    assert row, f"testing.md has no row for {contract}"
    assert row.group(1) in requested(contract), f"{contract} requests {sorted(requested(contract))}, the table says {row.group(1)!r}"


def test_allowed_imports_wording_says_the_standard_library_counts():
    text = (DOCS / "plugins" / "testing.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `allowed_imports` |"))
    assert "standard library" in row


def test_allowed_imports_counts_the_standard_library(tmp_path, monkeypatch):
    package = tmp_path / "memcore_stdlib_probe"
    package.mkdir()
    (package / "__init__.py").write_text("import json\n\nimport memcore\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "memcore_stdlib_probe", raising=False)

    class Probe(memcore.testing.PluginRegistrationContract):
        plugin = "stdlib-probe"
        allowed_imports = {"memcore"}

    with pytest.raises(AssertionError, match="json"):
        Probe().test_its_modules_import_only_the_allowed_packages()
    Probe.allowed_imports = {"memcore", "json"}
    Probe().test_its_modules_import_only_the_allowed_packages()
