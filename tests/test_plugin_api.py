"""The declared plugin API: ``memcore.__all__`` (+ ``memcore.testing``), documented, and every
plugin of the repository imports nothing else from memcore."""

from __future__ import annotations


import re
import tomllib
from pathlib import Path

import pytest

import memcore
import memcore.plugin
from memcore.testing import plugin_api_violations
from memcore.testing.plugin_api import metadata as plugin_api_metadata
from memcore.testing.plugin_api import dependency_packages, source_violations

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(ROOT.glob("plugins/*/memcore_*")) + sorted(ROOT.glob("examples/*/memcore_*"))


def test_every_exported_name_exists():
    assert len(set(memcore.__all__)) == len(memcore.__all__)
    missing = [name for name in memcore.__all__ if not hasattr(memcore, name)]
    assert missing == []


def documented_faces() -> tuple[set[str], set[str]]:
    """The names of the two tables of the guide's "What a plugin may import": what
    ``memcore.plugin`` exports, then what ``memcore`` adds for applications."""
    text = (ROOT / "docs" / "plugins" / "writing.md").read_text(encoding="utf-8")
    section = text.split("## What a plugin may import", 1)[1].split("\n## ", 1)[0]
    tables = re.findall(r"^(?:\|.*\n)+", section, re.MULTILINE)  # runs of table lines
    assert len(tables) == 2, "two tables: memcore.plugin, then memcore"

    def names(table: str) -> set[str]:
        rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| Group")]
        return {name for row in rows for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", row.split("|")[2])}

    return names(tables[0]), names(tables[1])


def test_the_api_tables_in_the_docs_list_exactly_the_exported_names():
    plugin_face, application_face = documented_faces()
    assert plugin_face == set(memcore.plugin.__all__)
    assert application_face <= set(memcore.__all__)
    assert set(memcore.__all__) <= plugin_face | application_face


def _distribution(package: Path) -> str:
    return tomllib.loads((package.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_each_plugin_imports_only_the_plugin_api(package):
    assert plugin_api_violations(package, libraries=dependency_packages(_distribution(package))) == []


def test_a_plugin_may_import_the_library_distributions_it_depends_on():
    assert dependency_packages("memcore-chroma") == {"memcore_chroma_support"}
    assert dependency_packages("memcore-poincare") == {"memcore_chroma_support"}
    assert dependency_packages("memcore-faiss") == frozenset()
    assert dependency_packages("memcore-not-installed") == frozenset()
    source = "from memcore_chroma_support import CollectionHome"
    assert source_violations(source, "m.py", "memcore_chroma", libraries={"memcore_chroma_support"}) == []
    assert len(source_violations(source, "m.py", "memcore_faiss")) == 1  # not a dependency of this one


def test_a_dependency_that_is_a_plugin_stays_off_limits(monkeypatch):
    real = plugin_api_metadata.requires
    monkeypatch.setattr(
        plugin_api_metadata,
        "requires",
        lambda name: ["memcore-faiss>=0.1", "memcore-chroma-support", 'memcore-lsh; extra == "x"'] if name == "memcore-mine" else real(name),
    )
    assert dependency_packages("memcore-mine") == {"memcore_chroma_support"}  # faiss and lsh have memcore entry points


def test_the_repository_has_plugins_to_check():
    assert len(PACKAGES) >= 5


@pytest.mark.parametrize(
    "source",
    [
        "from memcore.model._checks import validate_k",
        "from memcore.model._text import tokenize",
        "import memcore.indexes._index",
        "from memcore import Index",
        "from memcore.plugin import open_everything",
        "from memcore import parse_time",
        "import memcore\nmemcore.model.validate_k(3)",
        "import memcore as mc\nmc._plugins.get_registry()",
        "def f():\n    from memcore.retrieval._pipeline import Stage",
        "import memcore_lsh",
        "from memcore_faiss.index import FaissIndex",
    ],
)
def test_the_check_rejects_imports_outside_the_api(source):
    problems = source_violations(source, "m.py", "memcore_mine")
    assert len(problems) == 1, problems


@pytest.mark.parametrize(
    "source",
    [
        "import memcore\n@memcore.hookimpl\ndef register_indexes(register): pass",
        "from memcore.plugin import Index, validate_k, atomic_write_json, Record, NotFoundError",
        "from memcore import Record, NotFoundError, open",
        "import memcore.plugin\nmemcore.plugin.Index",
        "from memcore.testing import IndexContract",
        "import memcore.testing.data",
        "from memcore_mine.config import Config",
        "from . import config\nimport numpy, json",
    ],
)
def test_the_check_accepts_the_api(source):
    assert source_violations(source, "m.py", "memcore_mine") == []


def test_it_names_file_and_line(tmp_path):
    package = tmp_path / "memcore_mine"
    package.mkdir()
    (package / "__init__.py").write_text("import memcore\n")
    (package / "bad.py").write_text('"""doc"""\n\nfrom memcore.records import Hit\n')
    [problem] = plugin_api_violations(package)
    assert problem.startswith(f"{package / 'bad.py'}:3: from memcore.records import Hit")
