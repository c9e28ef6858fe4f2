"""BEIR figures that cannot go stale: every SciFact figure of the quality tables in
docs/concepts.md (to the 3 decimals shown), of the relevance-vs-diversity table of
docs/plugins/mmr.md (``bench/bench_mmr_tradeoff.py``, 4 decimals), the memcore BM25
nDCG@10 of docs/plugins/bm25.md and the rows of docs/plugins/llm.md's ``llm_rerank``
table that need no model (``advanced``, the oracle reordering: ``bench/bench_llm_rerank.py``
before it starts the model) is recomputed and compared.

A table with a ```--variants``` column names, per row, the ``bench/bench_presets.py``
variants its figures come from (``a`` / ``b`` for rows of several figures); the test runs
them the way the bench does (SciFact train, 809 queries, the corpus's precomputed MiniLM
vectors in an in-memory collection with an ``exact`` index and a ``bm25`` index). A row
without a variant is an example file run with ``memcore eval beir`` (the builtin hashing
file: no model). Needs the shared data (``MEMCORE_SHARED`` or ``../shared``) and
memcore-bm25; skips cleanly without them. Machine-dependent speed figures are not
compared (the docs say where they come from, when and under which load; a test checks
that every speed table names its command and the load).

Runtime with the data: about 76 s of CPU for the whole module (the SciFact memory is built
once per module, each figure's run when a test first needs it, so no test nears the suite's
per-test timeout: the longest test takes ~20 s); 2 min 45 s of wall time on the shared 2-core
machine, 10 minutes when it was at load ~14.
"""

from __future__ import annotations

import json
import os
import re
import sys
from importlib import util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "concepts.md"
SHARED = Path(os.environ.get("MEMCORE_SHARED") or REPO.parent / "shared")
SCIFACT = SHARED / "data" / "scifact"
METRICS = {"nDCG@10": "ndcg@10", "SciFact nDCG@10": "ndcg@10", "recall@100": "recall@100", "MRR@10": "mrr@10"}
NUMBER = re.compile(r"\d+\.\d+")


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header cells, rows of cells) of every markdown table with a ``--variants`` column."""
    found = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and "`--variants`" in line:
            header = [c.strip() for c in line.strip("|").split("|")]
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip("|").split("|")])
            found.append((header, rows))
    return found


def figures(text: str) -> list[tuple[str, str, str, float]]:
    """``(row label, variant or "", metric, figure)`` of every checked cell."""
    out = []
    for header, rows in tables(text):
        column = header.index("`--variants`")
        for cells in rows:
            variants = re.findall(r"`([^`]+)`", cells[column]) or [""]
            for name, cell in zip(header, cells):
                if name not in METRICS:
                    continue
                values = [float(v) for v in NUMBER.findall(cell)]
                assert len(values) == len(variants), f"{cells[0]}: {len(values)} figures in {name!r} for variants {variants}"
                out += [(cells[0], v, METRICS[name], value) for v, value in zip(variants, values)]
    return out


FIGURES = figures(PAGE.read_text(encoding="utf-8"))


def test_the_tables_are_found_and_name_their_variants():
    assert len(FIGURES) >= 40
    assert {v for _, v, _, _ in FIGURES} >= {"", "basic", "advanced", "semantic", "bm25", "dense"}
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from bench_presets import VARIANTS
    finally:
        sys.path.remove(str(REPO / "bench"))
    assert {v for _, v, _, _ in FIGURES if v} <= set(VARIANTS), "every variant named in the docs exists in bench/bench_presets.py"


@pytest.fixture(scope="module")
def scifact():
    """The bench's SciFact memory: ``(memory, queries, qrels)``; the bench modules importable."""
    if not (SCIFACT / "minilm" / "corpus.npy").is_file():
        pytest.skip(f"no SciFact data with MiniLM vectors at {SCIFACT} (set MEMCORE_SHARED)")
    if util.find_spec("memcore_bm25") is None:
        pytest.skip("memcore-bm25 is not installed")
    bench = str(REPO / "bench")
    sys.path.insert(0, bench)
    try:
        import _scifact

        _scifact.DATA = SCIFACT
        memory, queries, qrels = _scifact.hybrid_memory("train")
        with memory:
            yield memory, queries, qrels
    finally:
        sys.path.remove(bench)


class Runs(dict):
    """Results by variant, each computed on first use: one test never waits for every run
    (the suite's per-test timeout holds on a loaded machine)."""

    def __init__(self, compute):
        super().__init__()
        self.compute = compute

    def __missing__(self, name: str):
        self[name] = self.compute(name)
        return self[name]


@pytest.fixture(scope="module")
def measured(scifact):
    from bench_presets import VARIANTS, evaluate

    from memcore import Pipeline
    from memcore._plugins._host import get_registry

    memory, queries, qrels = scifact

    def compute(name: str):
        if name == "":
            return hashing_example()
        pipeline = Pipeline.from_config(VARIANTS[name], get_registry())
        if pipeline.skipped:  # e.g. mmr without memcore-mmr: not the documented pipeline
            pytest.skip(f"{name}: a plugin of its pipeline ({pipeline.skipped}) is not installed")
        pipeline.check(memory.collection)
        return evaluate(memory, pipeline, queries, qrels)

    return Runs(compute)


def hashing_example() -> dict[str, float]:
    """``memcore eval beir`` with examples/beir_hashing.toml (builtins only)."""
    from click.testing import CliRunner

    from memcore.cli import main

    args = ["eval", "beir", "--data", str(SCIFACT), "--split", "train", "--config", str(REPO / "examples" / "beir_hashing.toml"), "--json"]
    result = CliRunner().invoke(main, args, env={"MEMCORE_LOG": None})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(("row", "variant", "metric", "figure"), FIGURES, ids=[f"{v or 'beir_hashing'}-{m}" for _, v, m, _ in FIGURES])
def test_documented_figure_is_what_the_run_gives(row, variant, metric, figure, measured):
    actual = measured[variant][metric]
    assert abs(actual - figure) <= 0.0005 + 1e-9, (
        f"docs/concepts.md, {row!r}: {metric} of {variant or 'beir_hashing.toml'} is {actual:.4f}, the page says {figure}"
    )


# -- single figures on plugin pages ------------------------------------------------------------

CELLS = [
    # (page, the table row's first cell, which cell (0-based), variant, metric)
    ("docs/plugins/bm25.md", "nDCG@10 (BEIR definition)", 2, "bm25", "ndcg@10"),  # the memcore `bm25` column
]


def cell(page: str, first: str, index: int) -> str:
    for line in (REPO / page).read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells[index]
    raise AssertionError(f"{page} has no table row {first!r}")


@pytest.mark.parametrize(("page", "first", "index", "variant", "metric"), CELLS, ids=[c[0] for c in CELLS])
def test_plugin_page_figure_is_what_the_run_gives(page, first, index, variant, metric, measured):
    shown = cell(page, first, index)
    decimals = len(shown.split(".")[1])
    actual = measured[variant][metric]
    assert abs(actual - float(shown)) <= 0.5 * 10**-decimals + 1e-9, f"{page}, {first!r}: {metric} of {variant} is {actual:.4f}, the page says {shown}"


def test_plugin_page_cells_are_found():
    assert [float(cell(page, first, index)) for page, first, index, _, _ in CELLS]


# -- docs/plugins/mmr.md: relevance vs diversity ---------------------------------------------

MMR_PAGE = REPO / "docs" / "plugins" / "mmr.md"
MMR_ROWS = {"no MMR": "no_mmr", "lambda = 0.9": "mmr_0.9", "lambda = 0.7": "mmr_0.7", "lambda = 0.5": "mmr_0.5"}
MMR_COLUMNS = {
    "nDCG@10": "ndcg@10",
    "Δ nDCG@10": "delta_ndcg@10",
    "recall@10": "recall@10",
    "Δ recall@10": "delta_recall@10",
    "ILD@10": "ild@10",
    "Δ ILD@10": "delta_ild@10",
}
SIGNED = re.compile(r"[−+-]?\d+\.\d+")


def mmr_figures() -> list[tuple[str, str, str]]:
    """``(setting, metric, figure as shown)`` of the "Relevance vs diversity" table."""
    lines = MMR_PAGE.read_text(encoding="utf-8").split("## Relevance vs diversity on SciFact", 1)[1].splitlines()
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")]
    header, body = rows[0], [r for r in rows[2:] if r[0] in MMR_ROWS]
    out = []
    for cells in body:
        for name, cell in zip(header, cells):
            match = SIGNED.match(cell)
            if name in MMR_COLUMNS and match:
                out.append((MMR_ROWS[cells[0]], MMR_COLUMNS[name], match.group().replace("−", "-").lstrip("+")))
    return out


MMR_FIGURES = mmr_figures()


def test_the_mmr_table_is_found():
    assert len(MMR_FIGURES) == 4 * 3 + 3 * 3


@pytest.fixture(scope="module")
def mmr_measured(scifact):
    if util.find_spec("memcore_mmr") is None:
        pytest.skip("memcore-mmr is not installed")
    import numpy as np
    from bench_mmr_tradeoff import run_setting, settings

    from memcore import Pipeline
    from memcore._plugins._host import get_registry

    memory, queries, qrels = scifact
    ids = json.loads((SCIFACT / "minilm" / "corpus_ids.json").read_text())
    vectors = np.load(SCIFACT / "minilm" / "corpus.npy", allow_pickle=False).astype(np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    row = {d: i for i, d in enumerate(ids)}
    stages = settings()

    def compute(name: str):
        pipeline = Pipeline.from_config(stages[name], get_registry())
        pipeline.check(memory.collection)
        r = run_setting(memory, pipeline, queries, qrels, unit, row)
        base = r if name == "no_mmr" else runs["no_mmr"]
        for metric in ("ndcg@10", "recall@10", "ild@10"):
            r[f"delta_{metric}"] = r[metric] - base[metric]
        return r

    runs = Runs(compute)
    return runs


@pytest.mark.parametrize(("setting", "metric", "shown"), MMR_FIGURES, ids=[f"{s}-{m}" for s, m, _ in MMR_FIGURES])
def test_mmr_tradeoff_figure_is_what_the_run_gives(setting, metric, shown, mmr_measured):
    decimals = len(shown.split(".")[1])
    actual = mmr_measured[setting][metric]
    assert abs(actual - float(shown)) <= 0.5 * 10**-decimals + 1e-9, f"docs/plugins/mmr.md: {metric} of {setting} is {actual:.4f}, the page says {shown}"


def test_figures_parse():
    text = "| x | `--variants` | nDCG@10 | LoCoMo recall@10 |\n| --- | --- | --- | --- |\n| a | `p` / `q` | 0.1 / 0.2 | 0.9 / 0.8 |\n\n"
    assert figures(text) == [("a", "p", "ndcg@10", 0.1), ("a", "q", "ndcg@10", 0.2)]


# -- speed figures are measurements, labelled as such ---------------------------------------

SPEED = re.compile(r"q/s|queries/s|texts/s|turns/s|docs/s|records/s|\bms\b|µs|latency|throughput", re.I)
HOW = re.compile(r"python bench/|memcore eval|bench_\w+\.py")


def speed_tables() -> list[tuple[str, str, str]]:
    """``(page, section title, section text with its ``##`` parent)`` of every section with
    a markdown table of speed figures (a unit in the table)."""
    found = []
    for path in sorted((REPO / "docs").rglob("*.md")):
        parts = re.split(r"(?m)^(#{1,3} .*)$", path.read_text(encoding="utf-8"))
        parent = ""
        for title, body in zip(parts[1::2], parts[2::2]):
            if not title.startswith("### "):
                parent = body
            lines = body.splitlines()
            table = [line for line in lines if line.startswith("|")]
            if any(SPEED.search(line) for line in table):
                found.append((str(path.relative_to(REPO)), title, body + parent))
    return found


def test_speed_figures_say_how_and_under_which_load_they_were_measured():
    """Machine-dependent figures are not checked by the tests; each table of them says the
    command that measured it and the machine's load (docs/index.md, "Docs that are tested")."""
    tables = speed_tables()
    assert len(tables) >= 8
    unlabelled = [f"{page}: {title}" for page, title, text in tables if not (HOW.search(text) and re.search(r"\bload", text))]
    assert not unlabelled, "speed tables without the measuring command or the load: " + ", ".join(unlabelled)


# -- docs/plugins/llm.md: the rows of the llm_rerank table that need no LLM ------------------

EMBED_PAGE = REPO / "docs" / "plugins" / "llm.md"
EMBED_ROWS = {"`advanced` (no LLM)": "advanced", "oracle reordering of the first 10": "oracle"}


def embed_figures() -> list[tuple[str, str, str]]:
    """``(row, metric, figure as shown)`` of the rows of "Measured against SmolLM2-135M"
    that ``bench/bench_llm_rerank.py`` computes without the model: the ``advanced`` preset
    on the first 50 judged train queries (k = 100) and the oracle reordering of its first
    10 hits. The ``llm_rerank`` rows are a dated measurement (an LLM, 8 minutes)."""
    text = EMBED_PAGE.read_text(encoding="utf-8").split("### Measured against SmolLM2-135M", 1)[1]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]
    header = rows[0]
    out = []
    for cells in rows[2:]:
        if cells[0] in EMBED_ROWS:
            out += [(EMBED_ROWS[cells[0]], metric, cell) for metric, cell in zip(header, cells) if metric in ("nDCG@10", "MRR@10") and NUMBER.fullmatch(cell)]
    return out


EMBED_FIGURES = embed_figures()


def test_the_embed_rows_are_found():
    assert EMBED_FIGURES == [
        ("advanced", "nDCG@10", EMBED_FIGURES[0][2]),
        ("advanced", "MRR@10", EMBED_FIGURES[1][2]),
        ("oracle", "nDCG@10", EMBED_FIGURES[2][2]),
    ]


@pytest.fixture(scope="module")
def llm_rerank_baseline(scifact) -> dict[str, dict[str, float]]:
    """What bench_llm_rerank.py measures before it talks to the model (50 queries, k 100, top_n 10)."""
    import statistics

    from memcore.eval import evaluate_run
    from memcore.eval.metrics import ndcg_at_k
    from memcore import Pipeline
    from memcore._plugins._host import get_registry
    from memcore import Query

    memory, queries, qrels = scifact
    queries = queries[:50]
    qrels = {q: qrels[q] for q, _, _ in queries}
    pipeline = Pipeline.from_config("advanced", get_registry())
    pipeline.check(memory.collection)
    run, oracle = {}, []
    for qid, text, vec in queries:
        hits = pipeline.run_context(memory.collection, Query(text=text, vectors={"default": vec}, k=100)).current[:100]
        run[qid] = {h.id: h.score for h in hits}
        ranked = [h.id for h in hits]
        best_head = sorted(ranked[:10], key=lambda d: -qrels[qid].get(d, 0))
        oracle.append(ndcg_at_k(best_head + ranked[10:], qrels[qid], 10))
    metrics = evaluate_run(run, qrels, k=10, recall_k=100)
    return {"advanced": {"nDCG@10": metrics["ndcg@10"], "MRR@10": metrics["mrr@10"]}, "oracle": {"nDCG@10": statistics.fmean(oracle)}}


@pytest.mark.parametrize(("row", "metric", "shown"), EMBED_FIGURES, ids=[f"{r}-{m}" for r, m, _ in EMBED_FIGURES])
def test_llm_rerank_baseline_figure_is_what_the_run_gives(row, metric, shown, llm_rerank_baseline):
    decimals = len(shown.split(".")[1])
    actual = llm_rerank_baseline[row][metric]
    assert abs(actual - float(shown)) <= 0.5 * 10**-decimals + 1e-9, f"docs/plugins/llm.md: {metric} of {row} is {actual:.4f}, the page says {shown}"
