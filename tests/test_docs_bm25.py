"""The SciFact quality figures of docs/plugins/bm25.md ("Benchmark") that cannot go
stale: raw bm25s's nDCG@10 and memcore's (the ``bm25`` index searched directly, after a
merge), how many top-10 lists are identical, and the "between merges" paragraph (how many
records were merged, inserted and deleted, both nDCG@10 figures, the top-10 overlap).
They are recomputed the way ``bench/bench_bm25.py`` (its ``scifact`` part) computes them,
with its functions, and compared to the precision shown. The QPS and build rows are
measurements (the page says when, how and under which load).

Needs the shared data (``MEMCORE_SHARED`` or ``../shared``), bm25s and memcore-bm25;
skips cleanly without them. Runtime: about 10 s of CPU (two indexes of 5,183 abstracts,
809 queries each, 519 single inserts).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from importlib import util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = "docs/plugins/bm25.md"
SHARED = Path(os.environ.get("MEMCORE_SHARED") or REPO.parent / "shared")
SCIFACT = SHARED / "data" / "scifact"


def benchmark_text() -> str:
    text = (REPO / PAGE).read_text(encoding="utf-8")
    return text.split("## Benchmark", 1)[1].split("\n## ", 1)[0]


def row(first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first``."""
    for line in benchmark_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells
    raise AssertionError(f"{PAGE} has no table row {first!r}")


BETWEEN = re.compile(
    r"Between merges \(([\d,]+) records merged, the other ([\d,]+) inserted one at a time.*?([\d,]+) deleted.*?nDCG@10 (\d\.\d+) for memcore\s+and for a fresh bm25s\s+index.*?top-10 overlap (\d\.\d+)",
    re.S,
)


def shown() -> dict[str, str]:
    """Every checked figure of the page, as shown."""
    ndcg = row("nDCG@10 (BEIR definition)")
    same = row("identical top-10 lists")[2].split("/")
    between = BETWEEN.search(benchmark_text())
    assert between, f"{PAGE}: the 'Between merges (...)' paragraph is not where the test reads it"
    merged, inserted, deleted, between_ndcg, overlap = between.groups()
    return {
        "raw_ndcg": ndcg[1],
        "memcore_ndcg": ndcg[2],
        "identical": same[0].strip(),
        "queries": same[1].strip(),
        "merged": merged.replace(",", ""),
        "inserted": inserted.replace(",", ""),
        "deleted": deleted.replace(",", ""),
        "between_ndcg": between_ndcg,
        "between_overlap": overlap,
    }


SHOWN = shown()


@pytest.fixture(scope="module")
def measured() -> dict[str, float]:
    if not (SCIFACT / "corpus.jsonl").is_file():
        pytest.skip(f"no SciFact at {SCIFACT} (set MEMCORE_SHARED)")
    for module in ("bm25s", "memcore_bm25"):
        if util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    bench = str(REPO / "bench")
    sys.path.insert(0, bench)
    try:
        import bench_bm25 as bb
    finally:
        sys.path.remove(bench)
    from memcore import Query

    corpus, queries, qrels = bb.load_scifact(SCIFACT)
    ids, qids = list(corpus), list(queries)
    raw = bb.Raw(list(corpus.values()))
    index = bb.memcore_index(corpus)
    raw_rank = {q: bb.raw_ranking(raw, ids, queries[q], 10) for q in qids}
    ours_rank = {q: [h.id for h in index.search(Query(text=queries[q]), 10)] for q in qids}
    judged = {q: qrels[q] for q in qids}
    between = bb.scifact_between_merges(corpus, queries, qrels, qids, argparse.Namespace(seed=0))
    merged, inserted, deleted = (int(n) for n in re.findall(r"\d+", between["setup"]))
    return {
        "raw_ndcg": bb.mean_ndcg(raw_rank, judged),
        "memcore_ndcg": bb.mean_ndcg(ours_rank, judged),
        "identical": sum(raw_rank[q] == ours_rank[q] for q in qids),
        "queries": len(qids),
        "merged": merged,
        "inserted": inserted,
        "deleted": deleted,
        "between_ndcg": between["ndcg@10_memcore"],
        "between_ndcg_fresh": between["ndcg@10_fresh_bm25s"],
        "between_overlap": between["top10_overlap"],
    }


def test_the_figures_are_found():
    assert set(SHOWN) == {"raw_ndcg", "memcore_ndcg", "identical", "queries", "merged", "inserted", "deleted", "between_ndcg", "between_overlap"}
    assert all(re.fullmatch(r"\d+(\.\d+)?", v) for v in SHOWN.values()), SHOWN


@pytest.mark.parametrize("name", sorted(SHOWN))
def test_figure_is_what_the_run_gives(name, measured):
    figure = SHOWN[name]
    decimals = len(figure.split(".")[1]) if "." in figure else 0
    actual = measured[name]
    assert abs(actual - float(figure)) <= 0.5 * 10**-decimals + 1e-9, f"{PAGE}, Benchmark: {name} is {actual}, the page says {figure}"
    if name == "between_ndcg":  # "for memcore and for a fresh bm25s index": one figure for both
        fresh = measured["between_ndcg_fresh"]
        assert abs(fresh - float(figure)) <= 0.5 * 10**-decimals + 1e-9, f"{PAGE}: the fresh bm25s index gives {fresh}, the page says {figure}"
