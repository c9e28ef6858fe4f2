"""The cluster-pruned exact cone (:mod:`memcore_poincare.clusters`): exact against brute
force, sound bounds, follows writes, steps aside (to the float16 pre-scan) on data without
clusters."""

from __future__ import annotations

import json

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from memcore_poincare import clusters  # noqa: E402
from memcore_poincare.clusters import GIVE_UP, ClusterCone  # noqa: E402
from memcore_poincare.mirror import ParticleMirror  # noqa: E402
from memcore_poincare.prescan import rebuild_limit  # noqa: E402

DIM = 16
N = clusters.MIN_ROWS + 4000


def _unit(x):
    x = np.asarray(x, dtype=np.float64)
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _meta(i):
    return {"v": 1.0, "T": 0.5, "born": 1000.0, "last_updated": 1000.0, "links": json.dumps([])}


def _mirror(n=N, seed=0, spread=None):
    rng = np.random.default_rng(seed)
    if spread is None:
        centres = rng.standard_normal((48, DIM))
        x = _unit(centres[rng.integers(0, 48, n)] + 0.35 * rng.standard_normal((n, DIM)))
    else:
        x = _unit(rng.standard_normal((n, DIM)))
    return ParticleMirror.from_arrays(DIM, [f"p{i}" for i in range(n)], x, [_meta(i) for i in range(n)])


def _queries(m, n=20, seed=1):
    rng = np.random.default_rng(seed)
    return _unit(m.directions[rng.integers(0, len(m), n)] + 0.2 * rng.standard_normal((n, DIM)))


def _exact(m, q, k):
    scores = m.directions.astype(np.float64) @ q.astype(np.float64)
    return set(np.argsort(-scores, kind="stable")[:k].tolist())


def _knn(q, base, k):
    return faiss.knn(q, np.ascontiguousarray(base), k, metric=faiss.METRIC_INNER_PRODUCT)


@pytest.mark.parametrize("k", [1, 50, 100, 500])
def test_the_pruned_cone_is_the_exact_cone(k):
    m = _mirror()
    qs = _queries(m)
    cones = m.cone(qs, k)
    stats = m.cone_stats()
    assert stats["clusters_served"] + stats["clusters_declined"] == len(qs)
    if k <= 100:  # (a cone of 500 of 24,000 16-d rows reaches past most clusters' bounds: declined, then pre-scanned)
        assert stats["clusters_served"] >= len(qs) // 2  # pruning answered most (the others: the float16 pre-scan)
    for q, rows in zip(qs, cones):
        assert set(rows.tolist()) == _exact(m, q, k)
        assert np.all(np.diff(m.directions[rows] @ q) <= 1e-7)  # best first


def test_the_bounds_hold_for_every_member():
    m = _mirror(seed=3)
    c = ClusterCone(m.directions, faiss)
    x = m.directions.astype(np.float64)
    for q in _queries(m, 8, seed=5).astype(np.float64):
        cos = np.clip(c.centroids @ q, -1, 1)
        bound = np.cos(np.maximum(np.arccos(cos) - c.rho, 0.0))
        for j in range(len(c.sizes)):
            members = c.order[c.starts[j] : c.starts[j + 1]]
            if len(members):
                assert (x[members] @ q).max() <= bound[j] + 1e-12


def test_the_pruned_cone_follows_writes():
    m = _mirror(seed=2)
    qs = _queries(m, 10, seed=4)
    m.cone(qs, 100)
    built = m._clusters
    rng = np.random.default_rng(9)
    m.upsert([f"p{i}" for i in range(0, 400, 2)], _unit(qs[np.arange(200) % 10] + 0.05 * rng.standard_normal((200, DIM))), [_meta(i) for i in range(200)])
    m.upsert([f"n{i}" for i in range(150)], _unit(qs[np.arange(150) % 10] + 0.05 * rng.standard_normal((150, DIM))), [_meta(i) for i in range(150)])
    m.delete([f"p{i}" for i in range(1, 900, 3)] + [f"n{i}" for i in range(0, 150, 5)])
    for q, rows in zip(qs, m.cone(qs, 100)):
        assert set(rows.tolist()) == _exact(m, q, 100)
    assert m._clusters is built and built.served >= 10  # the written rows scored exactly, no rebuild
    extra = rebuild_limit(len(m)) + 1
    m.upsert([f"w{i}" for i in range(extra)], _unit(rng.standard_normal((extra, DIM))), [_meta(0)] * extra)
    for q, rows in zip(qs, m.cone(qs, 100)):
        assert set(rows.tolist()) == _exact(m, q, 100)
    assert m._clusters is not built


def test_ties_are_kept_exact():
    m = _mirror(seed=6)
    d = _unit(np.random.default_rng(7).standard_normal(DIM))
    m.upsert([f"t{i}" for i in range(300)], np.repeat(d[None], 300, axis=0), [_meta(i) for i in range(300)])
    (rows,) = m.cone(d[None], 100)
    assert len(rows) == 100 and {m.ids[r] for r in rows} <= {f"t{i}" for i in range(300)}


def test_without_clusters_it_steps_aside_and_the_cone_stays_exact():
    m = _mirror(spread=True)
    qs = _queries(m, GIVE_UP + 8, seed=8)
    cones = m.cone(qs, 100)
    for q, rows in zip(qs, cones):
        assert set(rows.tolist()) == _exact(m, q, 100)
    stats = m.cone_stats()
    assert stats["clusters_served"] == 0 and stats["clusters_declined"] == GIVE_UP  # it stopped trying
    assert stats["certified"] + stats["refused"] == len(qs)  # the float16 pre-scan (or the float32 scan) answered
    assert not m._clusters.useful


def test_small_mirrors_and_wide_cones_are_not_clustered():
    m = _mirror(n=clusters.MIN_ROWS - 1)
    m.cone(_queries(m, 2), 50)
    assert m._clusters is None
    m = _mirror()
    m.cone(_queries(m, 2), N // 10 + 1)
    assert m._clusters is None
