"""The exact index scores a dense allowed set (more than a quarter of its rows, no gathered
copy) by one product over every row and picks the allowed rows' scores: the same hits, in the
same order, as the gathering product and as a brute-force ranking."""

from __future__ import annotations

import numpy as np
import pytest

from memcore.plugin import IndexContext, SpaceInfo
from memcore.indexes._exact import ExactIndex, ExactIndexConfig
from memcore import Query, Record

DIM = 8


def build(n: int, metric: str) -> tuple[ExactIndex, np.ndarray, list[str]]:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors[5] = vectors[9]  # a tie: broken by id
    ids = [f"r{i:05d}" for i in range(n)]
    index = ExactIndex(ExactIndexConfig(space="v", metric=metric), IndexContext("e", {"v": SpaceInfo("v", DIM, "none")}))
    index.add([Record(rid, rid, {}, {"v": v}) for rid, v in zip(ids, vectors)])
    return index, vectors, ids


def brute_force(vectors: np.ndarray, ids: list[str], allowed: set[str], q: np.ndarray, k: int, metric: str) -> list[str]:
    if metric == "cosine":
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        q = q / np.linalg.norm(q)
    scores = vectors.astype(np.float64) @ q.astype(np.float64)
    ranked = sorted((i for i, rid in enumerate(ids) if rid in allowed), key=lambda i: (-scores[i], ids[i]))
    return [ids[i] for i in ranked[:k]]


@pytest.mark.parametrize("metric", ["cosine", "ip"])
@pytest.mark.parametrize("fraction", [0.2, 0.3, 0.5, 0.9])
def test_dense_allowed_sets_rank_like_brute_force(metric, fraction):
    index, vectors, ids = build(400, metric)
    rng = np.random.default_rng(int(fraction * 100))
    allowed = {rid for rid in ids if rng.random() < fraction} | {"r00005", "r00009", "not-held"}
    for seed in range(5):
        q = np.random.default_rng(100 + seed).standard_normal(DIM).astype(np.float32)
        if seed == 0:
            q = vectors[5].copy()  # the tied pair at the top
        hits = index.search(Query(vectors={"v": q}, k=10), 10, allowed=allowed)
        assert [h.id for h in hits] == brute_force(vectors, ids, allowed, q, 10, metric)
        assert all(h.id in allowed for h in hits)
        gathered = index.search_batch([Query(vectors={"v": q}, k=10)], 10, allowed=allowed)[0]  # the gathering product
        assert [h.id for h in hits] == [h.id for h in gathered]
        np.testing.assert_allclose([h.score for h in hits], [h.score for h in gathered], rtol=1e-5, atol=1e-6)


def test_the_product_over_every_row_is_taken_above_a_quarter():
    index, vectors, ids = build(300, "cosine")
    calls = []

    class Spy(np.ndarray):
        def __getitem__(self, item):
            calls.append(item if isinstance(item, slice) else "rows")
            return super().__getitem__(item)

    index._matrix = index._matrix.view(Spy)
    q = np.ones(DIM, dtype=np.float32)
    index.search(Query(vectors={"v": q}, k=5), 5, allowed=set(ids[:100]))  # a third: every row scored
    assert calls[0] == slice(None, 300, None)  # (later calls index the product, itself a spy)
    calls.clear()
    index.search(Query(vectors={"v": q}, k=5), 5, allowed=set(ids[:50]))  # a sixth: its rows gathered
    assert calls[0] == "rows"
