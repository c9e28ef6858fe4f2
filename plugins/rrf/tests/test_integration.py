"""The fusions through a real SQLite-backed collection: fused recalls (memcore.testing.fused), the fuse stage of a
pipeline declared in settings, close and reopen (identical results)."""

from __future__ import annotations

import numpy as np
import pytest

import memcore
from memcore import Collection, Contribution
from memcore.testing import fused

TEXTS = [
    "Alice booked a flight to Lisbon for her summer vacation",
    "Bob adopted a beagle puppy named Biscuit",
    "Alice plays chess online every night after work",
    "Bob walks Biscuit the beagle in the park every morning",
    "Carol is learning Portuguese before her trip to Lisbon",
    "The chess club meets on Thursday evenings near the park",
    "Alice's flight to Lisbon was delayed by two hours",
    "Carol bakes bread with her grandmother on Sundays",
    "Bob and Carol went hiking in the mountains last summer",
    "Biscuit the beagle chewed Alice's chess board",
]
ITEMS = [{"id": f"t{i}", "text": t, "metadata": {"n": i}} for i, t in enumerate(TEXTS)]
QUERIES = ["flight to Lisbon", "beagle in the park", "chess at night", "summer trip"]
FUSIONS = ["weighted", {"kind": "weighted", "normalization": "zscore", "weights": {"l2": 2.0}}, "dbsf", {"kind": "union", "normalization": "dbsf"}]


def key(hits):
    return [(h.id, round(h.score, 12), h.source, h.provenance) for h in hits]


def run_all(collection: Collection) -> list:
    out = []
    for fusion in FUSIONS:
        for q in QUERIES:
            out.append(key(fused(collection, ["cos", "l2"], q, fusion=fusion, k=5, depth=8)))
    return out


def test_fused_on_sqlite_then_reopen(tmp_path):
    collection = Collection.create(tmp_path)
    collection.create_index("cos", "exact", space="default", metric="cosine")
    collection.create_index("l2", "exact", space="default", metric="l2")
    collection.insert(ITEMS)
    before = run_all(collection)
    hits = fused(collection, ["cos", "l2"], "flight to Lisbon", fusion="dbsf", k=3, depth=8)
    assert hits[0].record is not None and "Lisbon" in hits[0].record.text
    assert all(h.source == "dbsf" for h in hits)
    for hit in hits:  # both lists saw every hit (same space): one contribution each, ranks consistent
        assert [c.source for c in hit.provenance] == ["cos", "l2"]
    collection.close()

    reopened = Collection.create(tmp_path)
    try:
        assert sorted(i["name"] for i in reopened.list_indexes()) == ["cos", "l2"]
        assert run_all(reopened) == before
    finally:
        reopened.close()


def dbsf_by_hand(lists: dict[str, list]) -> dict[str, float]:
    """(s - (mean - 3 sigma)) / (6 sigma) per list (population sigma), summed per id."""
    totals: dict[str, float] = {}
    for hits in lists.values():
        s = np.array([h.score for h in hits], dtype=np.float64)
        mu, sigma = s.mean(), s.std()
        for hit, value in zip(hits, (s - (mu - 3 * sigma)) / (6 * sigma)):
            totals[hit.id] = totals.get(hit.id, 0.0) + float(value)
    return totals


SETTINGS = {
    "spaces": {"default": {"embedder": "hashing"}, "small": {"embedder": {"kind": "hashing", "dim": 128, "bigrams": False}}},
    "indexes": {
        "dense": {"kind": "exact", "space": "default", "metric": "cosine"},
        "words": {"kind": "exact", "space": "small", "metric": "l2"},
    },
    "pipeline": [
        {"kind": "recall", "index": "dense", "k": 8},
        {"kind": "recall", "index": "words", "k": 8},
        {"kind": "fuse", "fusion": {"kind": "dbsf"}},
        {"kind": "limit"},
    ],
}


def test_fuse_stage_with_dbsf_declared_in_settings(tmp_path):
    memory = memcore.open(SETTINGS, path=tmp_path)
    for item in ITEMS:
        memory.insert(item["text"], metadata=item["metadata"], id=item["id"])
    ctx = memory.pipeline.run_context(memory.collection, memory.collection.make_query("beagle in the park", k=4))
    assert list(ctx.lists) == ["dense", "words", "fused"]
    expected = dbsf_by_hand({n: ctx.lists[n] for n in ("dense", "words")})
    for hit in ctx.lists["fused"]:
        assert hit.score == pytest.approx(expected[hit.id], abs=1e-9)
        for c in hit.provenance:
            assert ctx.lists[c.source][c.rank - 1].id == hit.id
            assert isinstance(c, Contribution)
    best = sorted(expected, key=lambda rid: (-expected[rid], rid))[:4]
    before = {q: key(memory.query(q, k=4)) for q in QUERIES}
    assert [h[0] for h in before["beagle in the park"]] == best
    memory.close()

    reopened = memcore.open(SETTINGS, path=tmp_path)
    try:
        assert {q: key(reopened.query(q, k=4)) for q in QUERIES} == before
    finally:
        reopened.close()
