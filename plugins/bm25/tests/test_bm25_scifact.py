"""The ``bm25`` index on real data: BEIR SciFact (train), from the shared folder beside the
repository. Skipped when it is absent (a fresh clone has no ``../shared``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from memcore.plugin import IndexContext
from memcore import Query, Record

from memcore_bm25.bm25 import BM25Config, BM25Index

SCIFACT = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "scifact"

pytestmark = pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").is_file(), reason=f"SciFact not found at {SCIFACT}")


@pytest.fixture(scope="module")
def scifact():
    corpus = {}
    for line in (SCIFACT / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        corpus[str(doc["_id"])] = (doc.get("title", "") + " " + doc.get("text", "")).strip()
    qrels: dict[str, dict[str, int]] = {}
    for line in (SCIFACT / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, did, grade = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(grade)
    queries = {}
    for line in (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        if str(q["_id"]) in qrels:
            queries[str(q["_id"])] = q["text"]
    return corpus, queries, qrels


def ndcg10(ranking: list[str], rel: dict[str, int]) -> float:
    """BEIR nDCG@10: graded gains, log2 discount, ideal ranking from the judgements."""
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:10]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(rel.values(), reverse=True)[:10]))
    return dcg / ideal if ideal else 0.0


def raw_rankings(docs: dict[str, str], queries: dict[str, str]) -> dict[str, list[str]]:
    """Raw bm25s, the documented recipe: tokenize (en stopwords, English stemmer), index, retrieve."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    ids = list(docs)
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(bm25s.tokenize(list(docs.values()), stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    qids = list(queries)
    tokens = bm25s.tokenize([queries[q] for q in qids], stopwords="en", stemmer=stemmer, show_progress=False)
    found, scores = retriever.retrieve(tokens, k=10, show_progress=False)
    return {q: [ids[d] for d, s in zip(found[i].tolist(), scores[i].tolist()) if s > 0] for i, q in enumerate(qids)}


def ours(index: BM25Index, queries: dict[str, str]) -> dict[str, list[str]]:
    batch = index.search_batch([Query(text=t) for t in queries.values()], 10)
    return {q: [h.id for h in hits] for q, hits in zip(queries, batch)}


def mean_ndcg(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> float:
    return float(np.mean([ndcg10(rankings[q], qrels[q]) for q in rankings]))


def test_merged_index_matches_raw_bm25s_and_the_reference_figure(scifact):
    corpus, queries, qrels = scifact
    index = BM25Index(BM25Config(), IndexContext("scifact"))
    index.add([Record.create(t, id=i) for i, t in corpus.items()])
    ranked = ours(index, queries)  # the first search merges (5,183 > the 1,000 threshold)
    assert index.merges == 1 and index.pending == 0
    raw = raw_rankings(corpus, queries)
    assert abs(mean_ndcg(ranked, qrels) - mean_ndcg(raw, qrels)) <= 0.002
    assert mean_ndcg(ranked, qrels) == pytest.approx(0.696, abs=0.002)  # shared/data/README.md


def test_between_merges_within_design_tolerances(scifact):
    corpus, queries, qrels = scifact
    rng = np.random.default_rng(0)
    ids = list(corpus)
    order = rng.permutation(len(ids))
    cut = int(0.9 * len(ids))
    index = BM25Index(BM25Config(), IndexContext("scifact"))
    index.add([Record.create(corpus[ids[i]], id=ids[i]) for i in order[:cut]])
    index.merge()
    for i in order[cut:]:
        index.add([Record.create(corpus[ids[i]], id=ids[i])])
    gone = {str(x) for x in rng.choice(ids, size=len(ids) // 100, replace=False)}
    index.remove(sorted(gone))
    assert index.merges == 1 and 0 < index.pending <= index.merge_threshold
    live = {rid: text for rid, text in corpus.items() if rid not in gone}
    judged = {q: {d: g for d, g in rel.items() if d in live} for q, rel in qrels.items()}
    judged = {q: rel for q, rel in judged.items() if rel}
    asked = {q: queries[q] for q in judged}
    mine, theirs = ours(index, asked), raw_rankings(live, asked)
    assert index.merges == 1, "no merge while the threshold is not reached"
    assert abs(mean_ndcg(mine, judged) - mean_ndcg(theirs, judged)) <= 0.002
    overlap = np.mean([len(set(mine[q]) & set(theirs[q])) / max(1, len(theirs[q])) for q in judged])
    assert overlap >= 0.95
