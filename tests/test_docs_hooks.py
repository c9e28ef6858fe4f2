"""The plugin guide's running example works: memcore-extras, built from the guide's pages.

docs/plugins/writing.md and the hook pages (docs/plugins/hooks/register_*.md) show one
package, ``memcore_extras``, module by module. Which ``python`` blocks run is said by their
first line:

- ``# memcore_extras/<module>.py``: that module of the package, whole;
- ``# tests/test_extras.py``: a part of the package's test module (the contract suites);
- ``# with memcore-extras installed``: a usage example; a ``text`` block right after it is
  what it prints (compared line by line, numbers rounded to 3 decimals).

Every other block is an excerpt and does not run. The test writes the package to a
temporary directory, registers it (``memcore.testing.register_plugin``), runs the usage
examples in order in a fresh working directory, and runs the assembled test module with
pytest in a subprocess, where an autouse fixture registers the package for each test.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memcore.testing import register_plugin

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "docs" / "plugins" / "writing.md", *sorted((REPO / "docs" / "plugins" / "hooks").glob("register_*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n?", re.S | re.M)
MODULE = re.compile(r"^# (memcore_extras/\w+\.py)$")
TEST_MODULE = "# tests/test_extras.py"
USAGE = "# with memcore-extras installed"
NUMBER = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")


def blocks(path: Path) -> list[tuple[str, str, str | None]]:
    """(language, code, shown output) per fenced block of a page, in order."""
    text = path.read_text(encoding="utf-8")
    found = list(FENCE.finditer(text))
    out: list[tuple[str, str, str | None]] = []
    for i, match in enumerate(found):
        shown = None
        if match.group(1) == "python" and i + 1 < len(found):
            nxt = found[i + 1]
            if nxt.group(1) == "text" and not text[match.end() : nxt.start()].strip():
                shown = nxt.group(2)
        out.append((match.group(1), match.group(2), shown))
    return out


def python_blocks(first_line: str | re.Pattern[str]) -> list[tuple[Path, str, str | None]]:
    """The python blocks of every page whose first line is (or matches) ``first_line``."""
    out = []
    for page in PAGES:
        for lang, code, shown in blocks(page):
            head = code.split("\n", 1)[0]
            hit = first_line.match(head) if isinstance(first_line, re.Pattern) else head == first_line
            if lang == "python" and hit:
                out.append((page, code, shown))
    return out


def normalise(output: str) -> list[str]:
    """Lines without trailing blanks, every decimal number rounded to 3 decimals."""
    return [NUMBER.sub(lambda m: f"{float(m.group()):.3f}", line.rstrip()) for line in output.strip("\n").splitlines()]


def write_package(root: Path) -> None:
    """Write memcore_extras/ under ``root`` from the pages' module blocks (each file once)."""
    (root / "memcore_extras").mkdir(parents=True)
    for page, code, _ in python_blocks(MODULE):
        head, body = code.split("\n", 1)
        target = root / MODULE.match(head).group(1)
        assert not target.exists(), f"{page.name}: {target.name} is shown twice"
        target.write_text(body, encoding="utf-8")


@pytest.fixture
def extras(tmp_path, monkeypatch):
    """The memcore_extras package written from the pages, importable and registered."""
    write_package(tmp_path / "src")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    for key in [k for k in sys.modules if k == "memcore_extras" or k.startswith("memcore_extras.")]:
        monkeypatch.delitem(sys.modules, key)
    module = importlib.import_module("memcore_extras")
    with register_plugin(module, name="extras") as info:
        yield info
    for key in [k for k in sys.modules if k == "memcore_extras" or k.startswith("memcore_extras.")]:
        sys.modules.pop(key, None)


def test_the_pages_show_the_whole_package():
    modules = {MODULE.match(code.split("\n", 1)[0]).group(1) for _, code, _ in python_blocks(MODULE)}
    expected = {"__init__", "stores", "embedders", "indexes", "stages", "fusions", "services", "llms", "commands"}
    assert modules == {f"memcore_extras/{name}.py" for name in expected}
    usage_pages = {page.stem for page, _, _ in python_blocks(USAGE)}
    test_pages = {page.stem for page, _, _ in python_blocks(TEST_MODULE)}
    hook_pages = {page.stem for page in PAGES[1:]}
    assert hook_pages - {"register_commands"} <= usage_pages, "every component hook's page shows its component in use"
    assert hook_pages <= test_pages, "every hook's page shows how to test it"


def test_the_package_registers_one_component_per_hook(extras):
    assert extras.error is None
    assert extras.registers == {
        "stores": ["dict"],
        "embedders": ["trigram"],
        "indexes": ["words"],
        "stages": ["dedupe"],
        "fusions": ["max_score"],
        "services": ["capped"],
        "llms": ["echo"],
    }
    assert "register_commands" in extras.hooks


@pytest.mark.parametrize("page", sorted({page for page, _, _ in python_blocks(USAGE)}), ids=lambda p: p.stem)
def test_usage_examples_run_and_print_what_the_page_shows(page, extras, tmp_path, monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    for n, (_, code, shown) in enumerate(b for b in python_blocks(USAGE) if b[0] == page):
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            try:
                exec(compile(code, f"{page.name}:usage{n}", "exec"), {"__name__": "__docs__"})
            except Exception as exc:  # noqa: BLE001 - report which block of which page
                pytest.fail(f"{page.name}, usage block {n} raises {type(exc).__name__}: {exc}\n{code}")
        if shown is not None:
            assert normalise(stdout.getvalue()) == normalise(shown), f"{page.name}, usage block {n} is stale; it prints:\n{stdout.getvalue()}"


CONFTEST = '''
import pytest

import memcore_extras
from memcore.testing import register_plugin


@pytest.fixture(autouse=True)
def extras_plugin():
    """memcore-extras registered for every test (it is not installed)."""
    with register_plugin(memcore_extras, name="extras"):
        yield
'''


def test_the_test_module_of_the_pages_passes(tmp_path):
    parts = python_blocks(TEST_MODULE)
    assert len(parts) >= 8
    write_package(tmp_path)
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (tests / "test_extras.py").write_text("\n\n".join(code.split("\n", 1)[1] for _, code, _ in parts), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCORE_") or k == "MEMCORE_DEFAULT_EMBEDDER"}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *filter(None, [env.get("PYTHONPATH")])])
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary)}
    assert not counts.get("failed") and not counts.get("error") and not counts.get("errors"), summary
    assert counts.get("passed", 0) >= 100, f"the five contract suites and the plain tests ran: {summary}"
