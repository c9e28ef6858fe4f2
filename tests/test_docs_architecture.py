"""The architecture document lives in the repository (docs/architecture.md) and nothing in
the repository cites a document outside it.

- docs/architecture.md exists, is in the mkdocs nav and has its numbered sections §1..§9;
- no tracked file except CHANGELOG.md (history) cites the old out-of-repository design file;
- every ``docs/architecture.md §N`` / ``architecture.md#N-...`` citation names a section
  the page has.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"

OUTSIDE = re.compile(r"DESIGN(?:\.md|\s*§|\s+section\b)")
"""A citation of the design file that is not in the repository (its file name, or its
stem followed by ``§`` or ``section``)."""
CITATION = re.compile(r"architecture\.md(?: §|#)(\d+)")
SECTION = re.compile(r"(?m)^## §(\d+) \S")


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in out.decode().split("\0") if name]


def texts():
    for path in tracked_files():
        if path.name == "CHANGELOG.md" or not path.is_file():
            continue
        try:
            yield path, path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue


def nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return []


def test_the_architecture_page_exists_and_is_in_the_nav():
    assert PAGE.is_file()
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert "architecture.md" in nav_pages(config["nav"])


def test_the_sections_are_numbered_one_to_nine():
    numbers = [int(n) for n in SECTION.findall(PAGE.read_text(encoding="utf-8"))]
    assert numbers == list(range(1, 10))


def test_the_page_stands_alone():
    text = PAGE.read_text(encoding="utf-8")
    assert not OUTSIDE.search(text)
    assert "../shared" not in text and "design notes" not in text.lower()


def test_nothing_cites_the_design_file_outside_the_repository():
    found = [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()}" for path, text in texts() for m in OUTSIDE.finditer(text)]
    assert not found, "cite docs/architecture.md §N instead:\n" + "\n".join(found)


def test_citations_of_the_architecture_page_name_existing_sections():
    sections = set(SECTION.findall(PAGE.read_text(encoding="utf-8")))
    cited = {(str(path.relative_to(ROOT)), n) for path, text in texts() for n in CITATION.findall(text)}
    assert cited, "nothing cites docs/architecture.md"
    assert not [(path, n) for path, n in sorted(cited) if n not in sections]
