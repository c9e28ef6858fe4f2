"""The float16 pre-scan of the mirror's cone (:mod:`memcore_poincare.prescan`): the cone it
returns is the exact float32 cone, it follows writes, and it gives up (the caller scans in
float32) when its certificate fails."""

from __future__ import annotations

import json

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from memcore_poincare import HyperAmyRetrieval, ParticleProjector, Point  # noqa: E402
from memcore_poincare.mirror import ParticleMirror  # noqa: E402
from memcore_poincare.prescan import ERROR_BOUND, MIN_ROWS, Fp16Prescan, rebuild_limit  # noqa: E402

DIM = 16


def _unit(x):
    x = np.asarray(x, dtype=np.float64)
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _meta(i, links=()):
    return {"v": 1.0 + (i % 7) / 7, "T": 0.5, "born": 1000.0, "last_updated": 1000.0, "links": json.dumps(list(links))}


def _mirror(n, seed=0, clusters=32):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, DIM))
    x = _unit(centres[rng.integers(0, clusters, n)] + 0.6 * rng.standard_normal((n, DIM)))
    return ParticleMirror.from_arrays(DIM, [f"p{i}" for i in range(n)], x, [_meta(i) for i in range(n)])


def _queries(m, n=20, seed=1):
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(m), n)
    return _unit(m.directions[picks] + 0.3 * rng.standard_normal((n, DIM)))


def _exact(m, q, k):
    """The top k rows by cosine, brute force in float64."""
    scores = m.directions.astype(np.float64) @ q.astype(np.float64)
    return set(np.argsort(-scores, kind="stable")[:k].tolist()), np.sort(scores)[::-1][:k]


@pytest.mark.parametrize("k", [1, 50, 100, 500])
def test_the_prescanned_cone_is_the_exact_cone(k):
    m = _mirror(MIN_ROWS + 4000)
    qs = _queries(m)
    cones = m.cone(qs, k)
    assert m._prescan is not None and m._prescan.certified == len(qs) and m._prescan.refused == 0  # the pre-scan answered
    flat = [faiss.knn(q.reshape(1, -1), m.directions, k, metric=faiss.METRIC_INNER_PRODUCT)[1][0] for q in qs]
    for q, rows, ref in zip(qs, cones, flat):
        want, best = _exact(m, q, k)
        assert set(rows.tolist()) == want == set(ref.tolist())
        got = np.sort(m.directions[rows].astype(np.float64) @ q.astype(np.float64))[::-1]
        assert np.allclose(got, best, rtol=0, atol=1e-12)  # the same scores
        assert np.all(np.diff(m.directions[rows] @ q) <= 1e-7)


def test_the_error_bound_holds():
    """|q·x - q·fp16(x)| <= ERROR_BOUND for unit float32 q and x, as the float16 index scores them."""
    rng = np.random.default_rng(3)
    x = _unit(rng.standard_normal((4000, DIM)) * rng.uniform(0.01, 100, (4000, DIM)))  # components of every size
    p = Fp16Prescan(x, faiss)
    for q in _unit(rng.standard_normal((10, DIM))):
        approx, rows = p.index.search(q.reshape(1, -1), len(x))
        exact = x[rows[0]] @ q
        assert np.max(np.abs(approx[0] - exact)) <= ERROR_BOUND
        assert np.max(np.abs(approx[0] - exact)) > 0  # it is an approximation: the bound is what makes it exact


def test_small_mirrors_and_wide_cones_scan_in_float32():
    m = _mirror(MIN_ROWS - 1)
    m.cone(_queries(m, 3), 50)
    assert m._prescan is None
    m = _mirror(MIN_ROWS + 100)
    m.cone(_queries(m, 3), (MIN_ROWS + 100) // 2)
    assert m._prescan is None


def test_ties_at_the_border_fall_back_to_the_float32_scan():
    """300 copies of one direction, a cone of 100: the border is an exact tie, the certificate
    cannot hold, and the float32 scan answers (the cone is 100 of the tied rows)."""
    m = _mirror(MIN_ROWS + 500)
    rng = np.random.default_rng(5)
    d = _unit(rng.standard_normal(DIM))
    m.upsert([f"t{i}" for i in range(300)], np.repeat(d[None], 300, axis=0), [_meta(i) for i in range(300)])
    m.cone(_queries(m, 2), 100)  # builds the copy with the tied rows in it
    m._prescan = None
    m.cone(_queries(m, 2), 100)
    refused = m._prescan.refused
    (rows,) = m.cone(d[None], 100)
    assert m._prescan.refused == refused + 1
    assert {m.ids[r] for r in rows} <= {f"t{i}" for i in range(300)} and len(rows) == 100


def test_the_cone_follows_writes_after_the_copy_is_built():
    m = _mirror(MIN_ROWS + 2000, seed=2)
    qs = _queries(m, 10, seed=4)
    m.cone(qs, 100)
    built = m._prescan
    rng = np.random.default_rng(9)
    # rows moved next to the queries (updates), new rows there too (appends), deletes that move rows into holes
    m.upsert([f"p{i}" for i in range(0, 400, 2)], _unit(qs[np.arange(200) % 10] + 0.05 * rng.standard_normal((200, DIM))), [_meta(i) for i in range(200)])
    m.upsert([f"n{i}" for i in range(150)], _unit(qs[np.arange(150) % 10] + 0.05 * rng.standard_normal((150, DIM))), [_meta(i) for i in range(150)])
    m.delete([f"p{i}" for i in range(1, 600, 3)] + [f"n{i}" for i in range(0, 150, 5)])
    for q, rows in zip(qs, m.cone(qs, 100)):
        assert set(rows.tolist()) == _exact(m, q, 100)[0]
    assert m._prescan is built and built.certified > 10  # answered with the written rows scored exactly, no rebuild
    m.upsert(
        [f"w{i}" for i in range(rebuild_limit(len(m)) + 1)],
        _unit(rng.standard_normal((rebuild_limit(len(m)) + 1, DIM))),
        [_meta(0)] * (rebuild_limit(len(m)) + 1),
    )
    for q, rows in zip(qs, m.cone(qs, 100)):
        assert set(rows.tolist()) == _exact(m, q, 100)[0]
    assert m._prescan is not built  # too many rows written since: rebuilt


def test_search_results_are_the_same_with_and_without_the_prescan(monkeypatch):
    m = _mirror(MIN_ROWS + 1000, seed=6)
    linked = np.arange(0, len(m), 5)
    _, near = faiss.knn(m.directions[linked], m.directions, 4, metric=faiss.METRIC_INNER_PRODUCT)  # links to close particles
    for i, targets in zip(linked.tolist(), near[:, 1:].tolist()):
        m.set_metadata([m.ids[i]], [{"links": json.dumps([m.ids[t] for t in targets])}])

    class Source:
        collection = None
        dim = DIM

        def existing(self, ids):
            return {i for i in ids if i in m.rows}

        def count(self):
            return len(m)

        def particle_mirror(self):
            return m

    r = HyperAmyRetrieval(Source(), ParticleProjector(1.0, 2.0))
    qs = [Point("Q", q, 0.8, 0.5, 1000.0) for q in _queries(m, 15, seed=8)]
    with_prescan = [[(x.id, x.score, x.match_type) for x in r.search(q, 10, 20, 3, 1.1, t_now=2000.0)] for q in qs]
    assert m._prescan is not None and m._prescan.certified >= len(qs)
    monkeypatch.setattr("memcore_poincare.mirror.MIN_ROWS", 10**9)  # the float32 scan only
    without = [[(x.id, x.score, x.match_type) for x in r.search(q, 10, 20, 3, 1.1, t_now=2000.0)] for q in qs]
    assert with_prescan == without
    assert any(t == "neighbor" for res in without for _, _, t in res)


def test_links_are_parsed_once_per_metadata_version():
    m = _mirror(10)
    m.set_metadata(["p1"], [{"links": json.dumps(["p2", "p3"])}])
    row = m.rows["p1"]
    first = m.links_of(row)
    assert first == ("p2", "p3") and m.links_of(row) is first  # cached
    m.set_metadata(["p1"], [{"links": json.dumps(["p4"])}])
    assert m.links_of(row) == ("p4",)
    m.set_metadata(["p1"], [{"links": "not json"}])
    assert m.links_of(row) == ()
    m.set_metadata(["p1"], [{"links": json.dumps(["p5", 3, None])}])
    assert m.links_of(row) == ("p5",)
    m.delete(["p1"])  # the last row moves into p1's row: its own links are read
    assert m.links_of(row) == ()
