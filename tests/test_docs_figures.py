"""Every quality figure in the docs is either recomputed by a named test or stated as a
dated measurement (docs/index.md, "Docs that are tested").

A *quality figure* is a recall, nDCG, MRR, F1, hits@k, agreement, accuracy, precision,
ILD or BLEU value: a markdown table with such a metric in its header (or in a row's first
cell) and a decimal number under it, or a sentence naming such a metric followed closely by
a decimal number. Each section (a ``#``..``####`` heading down to the next) holding one
carries a marker, an HTML comment invisible on the rendered page::

    <!-- figures: checked by tests/test_docs_ann.py -->
    <!-- figures: measured -->
    <!-- figures: checked by tests/test_docs_ann.py (SciFact rows); measured (the 1,000,000 rows) -->

``checked by PATH``: PATH is a test module of this repository that reads the page (it
names the page's path), i.e. recomputes its figures and fails when one is stale.
``measured``: the figures cannot run in CI (an LLM, a 20-minute build, a full LoCoMo
run...); the section's visible text then says when (a ``YYYY-MM-DD`` date), with which
command (``memcore eval ...``, ``python bench/...``) and under which machine load.

So a new quality figure cannot land silently: without a marker this test fails, and a
``checked by`` marker only passes with a test that reads the page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

METRIC = re.compile(
    r"(?<![\w-])(recall(?:@\d+)?|nDCG(?:@\d+)?|MRR(?:@\d+)?|F1|hits@\d+|agreement|accuracy|precision(?:@\d+)?|ILD(?:@\d+)?|BLEU(?:-1)?)(?![\w-])",
    re.I,
)
"""A quality metric's name (not inside a code span: the ``recall`` stage is no figure)."""
FIGURE = re.compile(r"(?<![\d.,])(?:\d?\.\d{2,}|0\.\d)(?![\d.])|(?<![\d.])\d{1,3}(?:\.\d+)? ?%")
"""A decimal figure such as 0.791, .95 or 0.7 (not a version number like 1.5.9), or a percentage."""
CODE_SPAN = re.compile(r"`[^`]*`")
FENCE = re.compile(r"(?ms)^ *```.*?^ *```[^\n]*$")
HEADING = re.compile(r"(?m)^(#{1,4} .*)$")
MARKER = re.compile(r"<!--\s*figures:(.*?)-->", re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)
CHECKED_BY = re.compile(r"checked by (\S+\.py)")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
COMMAND = re.compile(r"memcore eval|python bench/|bench/bench_\w+\.py|bench_\w+\.py")
LOAD = re.compile(r"\bload\b", re.I)
NEAR = 80
"""Characters after a metric's name within which a decimal makes a sentence a figure."""


def sections(text: str) -> list[tuple[str, str, str]]:
    """``(heading, body, context)`` of every section, code blocks removed (their outputs
    are compared by tests/test_docs_outputs.py and tests/test_docs_python.py). ``context``
    is the body with the bodies of the sections it is nested in (a ``###`` under its
    ``##``...): a subsection's measurement may be dated and described by its parent."""
    parts = HEADING.split(FENCE.sub("", text))
    out = [("(top of the page)", parts[0], parts[0])]
    parents: list[tuple[int, str]] = []
    for heading, body in zip(parts[1::2], parts[2::2]):
        level = len(heading) - len(heading.lstrip("#"))
        parents = [(lv, b) for lv, b in parents if lv < level]
        out.append((heading, body, body + "".join(b for _, b in parents)))
        parents.append((level, body))
    return out


def table_figures(lines: list[str]) -> list[str]:
    """The quality figures of one markdown table (its header row, or each body row whose
    first cell names a metric), as the header or row they are read from."""
    header, body = CODE_SPAN.sub("", lines[0]), lines[2:]
    if METRIC.search(header) and any(FIGURE.search(row) for row in body):
        return [lines[0]]
    return [row for row in body if METRIC.search(CODE_SPAN.sub("", row.strip().strip("|").split("|")[0])) and FIGURE.search(row)]


def figures(body: str) -> list[str]:
    """What makes a section hold quality figures: table headers / rows and sentences."""
    found: list[str] = []
    lines = COMMENT.sub("", body).splitlines()
    prose: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("|"):
            j = i
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                j += 1
            found += table_figures(lines[i:j])
            i = j
            prose.append("")
            continue
        prose.append(lines[i])
        i += 1
    for paragraph in re.split(r"\n\s*\n", "\n".join(prose)):
        text = " ".join(CODE_SPAN.sub("", paragraph).split())
        for match in METRIC.finditer(text):
            if FIGURE.search(text, match.end(), match.end() + NEAR):
                found.append(text[match.start() : match.end() + NEAR])
                break
    return found


def inventory() -> list[tuple[str, str, str, str, list[str]]]:
    """``(page, heading, section text, context, figures)`` of every section with quality figures."""
    out = []
    for path in PAGES:
        for heading, body, context in sections(path.read_text(encoding="utf-8")):
            found = figures(body)
            if found:
                out.append((str(path.relative_to(REPO)), heading, body, context, found))
    return out


INVENTORY = inventory()


def problems(page: str, body: str, context: str | None = None) -> list[str]:
    """What is wrong with a section's markers (empty: fine). A measurement's date, command
    and load may stand in the section or in a section it is nested in (``context``)."""
    markers = [m.strip() for m in MARKER.findall(body)]
    if not markers:
        return ["no `<!-- figures: checked by tests/... -->` or `<!-- figures: measured -->` marker"]
    out = []
    visible = COMMENT.sub("", body if context is None else context)
    for marker in markers:
        tests = CHECKED_BY.findall(marker)
        measured = re.search(r"\bmeasured\b", marker)
        if not tests and not measured:
            out.append(f"marker {marker!r} says neither `checked by tests/....py` nor `measured`")
        for test in tests:
            module = REPO / test
            if not module.is_file():
                out.append(f"{test} does not exist")
            elif page not in module.read_text(encoding="utf-8"):
                out.append(f"{test} does not read {page}")
        if measured:
            if not DATE.search(visible):
                out.append("measured figures without a YYYY-MM-DD date in the text")
            if not COMMAND.search(visible):
                out.append("measured figures without the command that measured them")
            if not LOAD.search(visible):
                out.append("measured figures without the machine load")
    return out


def test_the_inventory_finds_the_known_figures():
    where = {(page, heading.lstrip("# ").strip()) for page, heading, _, _, _ in INVENTORY}
    assert {
        ("docs/concepts.md", "Pipeline, stages and presets"),
        ("docs/plugins/faiss.md", "Benchmark"),
        ("docs/plugins/lsh.md", "Choosing the parameters"),
        ("docs/plugins/bm25.md", "Benchmark"),
        ("docs/evaluation.md", "Figures on the dev file"),
        ("docs/plugins/mmr.md", "Relevance vs diversity on SciFact"),
    } <= where
    assert len(INVENTORY) >= 20


@pytest.mark.parametrize(("page", "heading", "body", "context"), [i[:4] for i in INVENTORY], ids=[f"{i[0]}:{i[1].lstrip('# ')}" for i in INVENTORY])
def test_quality_figures_are_checked_by_a_test_or_dated_measurements(page, heading, body, context):
    wrong = problems(page, body, context)
    assert not wrong, f"{page}, {heading.strip()}: " + "; ".join(wrong) + " (see tests/test_docs_figures.py and docs/index.md)"


# -- the detector and the marker rules themselves -----------------------------------------------


def test_tables_and_sentences_with_figures_are_found():
    table = "| config | recall@10 |\n| --- | --- |\n| a | 0.791 |\n"
    assert figures(table) == ["| config | recall@10 |"]
    rows = "| | raw | ours |\n| --- | --- | --- |\n| nDCG@10 (BEIR) | 0.6960 | 0.6960 |\n| build | 0.6 s | 0.6 s |\n"
    assert figures(rows) == ["| nDCG@10 (BEIR) | 0.6960 | 0.6960 |"]
    assert figures("The hybrid reaches recall@10 0.791 on the dev file.\n")
    assert figures("agreement with the exhaustive search: .95 of the queries\n")
    assert figures("more probes buy recall: the defaults find 82% of the top 10\n")
    assert figures("its nDCG@10 = 0.7 here\n")


def test_option_tables_stage_names_and_versions_are_no_figures():
    options = "| option | default | meaning |\n| --- | --- | --- |\n| `recall` | `0.5` | over-fetch of the `recall` stage |\n"
    assert figures(options) == []
    assert figures("The `recall` stage over-fetches 2.0 times.\n") == []
    assert figures("Chroma 1.5.9 at its defaults gave recall 1 of 2.\n") == []
    assert sections("```console\n$ memcore demo\nhits@3: 6/6 = 1.00 recall@10 0.5\n```\n")[0][1].strip() == ""


def test_a_subsection_reads_its_parents_for_the_measurement():
    page = "## Figures\nOn 2026-11-26, `python bench/bench_x.py`, load 3.\n### Detail\nrecall 0.5\n## Other\nx\n"
    (_, _, _), (_, _, figures_context), (_, body, context), (_, _, other) = sections(page)
    assert "2026-11-26" in context and "recall 0.5" in body and "2026-11-26" not in other
    marked = "<!-- figures: measured -->\nrecall 0.5\n"
    assert problems("docs/x.md", marked, marked + figures_context) == []
    assert len(problems("docs/x.md", marked)) == 3


def test_markers_are_checked():
    page = "docs/plugins/faiss.md"
    assert problems(page, "| a | recall@10 |\n") == ["no `<!-- figures: checked by tests/... -->` or `<!-- figures: measured -->` marker"]
    assert problems(page, "<!-- figures: checked by tests/test_docs_ann.py -->\n") == []
    assert problems(page, "<!-- figures: checked by tests/test_nothing_here.py -->\n") == ["tests/test_nothing_here.py does not exist"]
    assert problems(page, "<!-- figures: checked by tests/test_docs_figures.py -->\n") == []  # this module names faiss.md
    assert problems("docs/elsewhere.md", "<!-- figures: checked by tests/test_docs_ann.py -->\n") == ["tests/test_docs_ann.py does not read docs/elsewhere.md"]
    assert len(problems(page, "<!-- figures: measured 2026-01-01 -->\n")) == 3  # the date must be visible, and the command, and the load
    dated = "<!-- figures: measured -->\nOn 2026-11-26, `python bench/bench_x.py` at load average 3: recall 0.5.\n"
    assert problems(page, dated) == []
    assert problems(page, "<!-- figures: whatever -->\n") == ["marker 'whatever' says neither `checked by tests/....py` nor `measured`"]
