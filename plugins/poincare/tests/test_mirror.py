"""The in-memory particle mirror: the same results as the Chroma path, kept in step with
upserts, deletes and link cleanup, rebuilt from Chroma after a reopen or a load."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from memcore.plugin import IndexContext, SpaceInfo
from memcore import Query, Record, ValidationError
from memcore.testing import IndexContract
from memcore_poincare import HyperAmyRetrieval, HyperAmyStorage, ParticleProjector, PoincareIndex, PoincareIndexConfig, Point
from memcore_poincare.mirror import ParticleMirror


def points(n, dim=6, seed=0, now=1_000_000.0, link_every=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim))
    return [
        Point(f"p{i}", x[i], float(rng.uniform(0.05, 2.0)), 0.5, now - float(rng.uniform(0, 100)), links=[f"p{(i * 7 + 1) % n}"] if i % link_every == 0 else [])
        for i in range(n)
    ]


def ranked(storage, queries, now, **kw):
    r = HyperAmyRetrieval(storage, ParticleProjector(1.0, 2.0))
    return [[(x.id, round(x.score, 5), x.match_type) for x in r.search(q, t_now=now, **kw)] for q in queries]  # float32 round-off


@pytest.fixture
def pair(tmp_path):
    """The same points in a mirrored and an unmirrored storage."""
    pts = points(400)
    on = HyperAmyStorage(tmp_path / "on", collection_name="parts")
    off = HyperAmyStorage(tmp_path / "off", collection_name="parts", mirror=False)
    for s in (on, off):
        s.upsert_points(pts, unknown_links="keep")
    return on, off, pts


def _queries(seed, n=12, dim=6, now=1_000_000.0):
    rng = np.random.default_rng(seed)
    return [Point("Q", rng.standard_normal(dim), float(rng.uniform(0.1, 1.5)), 0.5, now) for _ in range(n)]


def test_the_mirror_gives_the_chroma_results(pair):
    on, off, _ = pair
    assert on.particle_mirror() is not None and off.particle_mirror() is None
    qs = _queries(1)
    for kw in ({"top_k": 5, "cone_width": 400}, {"top_k": 10, "cone_width": 400, "max_neighbors": 2}):
        assert ranked(on, qs, 1_000_000.0, **kw) == ranked(off, qs, 1_000_000.0, **kw)
    allowed = {f"p{i}" for i in range(0, 400, 3)}
    kw = {"top_k": 5, "cone_width": 400, "allowed": allowed}
    assert ranked(on, qs, 1_000_000.0, **kw) == ranked(off, qs, 1_000_000.0, **kw)


def test_the_mirror_follows_upserts_deletes_and_link_cleanup(pair):
    on, off, pts = pair
    on.particle_mirror()  # built: from now on kept in step by the writes
    changed = [Point(p.id, -np.asarray(p.emotion_vector), 1.7, 0.5, p.born, links=["p5"]) for p in pts[:40]]
    for s in (on, off):
        s.upsert_points(changed)
        s.delete([f"p{i}" for i in range(40, 80)] + ["p1"])  # p1: linked from p0, p3...: those links go
    mirror = on.particle_mirror()
    assert len(mirror) == on.count() == 400 - 41
    assert all("p1" not in json.loads(m["links"]) for m in mirror.metadatas)
    kw = {"top_k": 8, "cone_width": 400, "max_neighbors": 3}
    assert ranked(on, _queries(2), 1_000_000.0, **kw) == ranked(off, _queries(2), 1_000_000.0, **kw)


def test_the_mirror_is_rebuilt_after_a_reopen(tmp_path):
    first = HyperAmyStorage(tmp_path / "db", collection_name="parts")
    first.upsert_points(points(50), unknown_links="keep")
    again = HyperAmyStorage(tmp_path / "db", collection_name="parts")
    assert len(again.particle_mirror()) == 50
    off = HyperAmyStorage(tmp_path / "db", collection_name="parts", mirror=False)
    kw = {"top_k": 5, "cone_width": 50}
    assert ranked(again, _queries(3), 1_000_000.0, **kw) == ranked(off, _queries(3), 1_000_000.0, **kw)


def test_mirror_rows_move_into_holes():
    m = ParticleMirror(2)
    meta = {"v": 1.0, "T": 1.0, "born": 0.0, "links": "[]"}
    m.upsert(["a", "b", "c"], np.eye(3, 2, dtype=np.float32), [meta] * 3)
    m.delete(["a", "zz"])
    assert sorted(m.ids) == ["b", "c"] and all(m.ids[m.rows[i]] == i for i in m.ids)
    assert list(m.rows_of(["c", "nope", "b"])) == [m.rows["c"], m.rows["b"]]
    ids, directions, vtb, metas = m.take(m.rows_of(["b"]))
    assert ids == ["b"] and directions.tolist() == [[0.0, 1.0]] and vtb.tolist() == [[1.0, 1.0, 0.0]]


def _ctx(directory=None):
    return IndexContext(name="emo", spaces={"default": SpaceInfo("default", 6, "t")}, directory=directory)


def test_the_index_mirror_follows_add_remove_and_load(tmp_path):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((60, 6)).astype(np.float32)
    records = [Record(id=f"r{i}", text="", vectors={"default": x[i]}, metadata={"v": float(0.1 + i / 60)}) for i in range(60)]
    on = PoincareIndex(PoincareIndexConfig(), _ctx(tmp_path / "idx"))
    off = PoincareIndex(PoincareIndexConfig(mirror="off"), _ctx())
    queries = [Query(vectors={"default": x[i] + 0.1}, extras={"poincare": {"t_now": time.time()}}) for i in (3, 17, 42)]
    for index in (on, off):
        index.add(records)
    assert on.particle_mirror() is not None and off.particle_mirror() is None
    assert on.stats()["mirror"] == 60 and off.stats()["mirror"] is None
    for index in (on, off):
        index.remove([f"r{i}" for i in range(10)])
        index.add([Record(id="new", text="", vectors={"default": x[17] + 0.1}, metadata={"v": 0.5})])

    def hits(index):
        return [[(h.id, round(h.score, 5)) for h in index.search(q, 5)] for q in queries]

    assert hits(on) == hits(off)
    (tmp_path / "idx").mkdir(exist_ok=True)
    on.save(tmp_path / "idx")
    on.close()
    loaded = PoincareIndex(PoincareIndexConfig(), _ctx(tmp_path / "idx"))
    loaded.load(tmp_path / "idx")
    assert len(loaded.particle_mirror()) == 51
    assert hits(loaded) == hits(off)


class TestWithoutMirror(IndexContract):
    """The Chroma path (cone query and neighbour get), as on a server."""

    @pytest.fixture
    def make_index(self):
        config = PoincareIndexConfig(mirror="off")
        return lambda context: PoincareIndex(config, context)


def test_the_index_saves_a_snapshot_and_loads_it_without_reading_chroma(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((40, 6)).astype(np.float32)
    folder = tmp_path / "idx"
    index = PoincareIndex(PoincareIndexConfig(), _ctx(folder))
    index.add([Record(id=f"r{i}", text="", vectors={"default": x[i]}) for i in range(40)])
    folder.mkdir(exist_ok=True)
    index.save(folder)
    index.add([Record(id="late", text="", vectors={"default": x[0] + 0.05})])  # after the save: replayed from the log on reopen
    index.close()
    monkeypatch.setattr(ParticleMirror, "from_collection", classmethod(lambda *a, **k: pytest.fail("the snapshot should be used")))
    loaded = PoincareIndex(PoincareIndexConfig(), _ctx(folder))
    loaded.load(folder)
    assert len(loaded.particle_mirror()) == 40  # the snapshot, as saved
    loaded.add([Record(id="late", text="", vectors={"default": x[0] + 0.05})])  # the catch-up
    assert len(loaded.particle_mirror()) == 41 == len(loaded)
    off = PoincareIndex(PoincareIndexConfig(mirror="off"), _ctx(folder))
    off.load(folder)
    q = Query(vectors={"default": x[0]}, extras={"poincare": {"t_now": 2e9}})
    assert [h.id for h in loaded.search(q, 5)] == [h.id for h in off.search(q, 5)]
    off.save(folder)  # mirror off: no snapshot left behind
    assert not (folder / "mirror-manifest.json").exists() and not list(folder.glob("mirror-*"))
    loaded.close()


@pytest.mark.parametrize("mirror", [True, False])
def test_search_many_is_search_for_each_query(pair, mirror):
    on, off, _ = pair
    storage = on if mirror else off
    r = HyperAmyRetrieval(storage, ParticleProjector(1.0, 2.0))
    qs = _queries(7)
    kw = {"top_k": 6, "cone_width": 60, "max_neighbors": 2, "t_now": 1_000_000.0}
    assert r.search_many(qs, **kw) == [r.search(q, **kw) for q in qs]
    allowed = {f"p{i}" for i in range(0, 400, 2)}
    assert r.search_many(qs, allowed=allowed, **kw) == [r.search(q, allowed=allowed, **kw) for q in qs]
    assert r.search_many([], **kw) == []


def test_the_index_batches_queries_with_their_own_modes(tmp_path):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((80, 6)).astype(np.float32)
    index = PoincareIndex(PoincareIndexConfig(), _ctx())
    index.add([Record(id=f"r{i}", text="", vectors={"default": x[i]}, metadata={"v": float(0.1 + i / 80)}) for i in range(80)])
    queries = [
        Query(vectors={"default": x[1]}, extras={"poincare": {"t_now": 2e9, "v": 0.3}}),
        Query(vectors={"default": x[2]}, extras={"poincare": {"t_now": 2e9 + 50, "cone_width": 5}}),
        Query(vectors={"default": x[3]}, extras={"poincare": {"t_now": 2e9, "v": 1.5}}),
    ]
    assert index.search_batch(queries, 4) == [index.search(q, 4) for q in queries]


def _exact_cone(storage, direction, k, allowed=None):
    """The cone by brute force: the k held particles of highest cosine."""
    m = storage.particle_mirror()
    ids = [i for i in m.ids if allowed is None or i in allowed]
    scores = np.array([float(m.directions[m.rows[i]] @ direction) for i in ids])
    return [ids[j] for j in np.argsort(-scores, kind="stable")[:k]]


@pytest.mark.parametrize("faiss_kernel", [True, False])
def test_the_mirror_cone_is_the_exact_cosine_top(pair, monkeypatch, faiss_kernel):
    on, _, _ = pair
    if not faiss_kernel:
        monkeypatch.setattr("memcore_poincare.mirror._KNN", None)  # as without faiss: numpy
    m = on.particle_mirror()
    rng = np.random.default_rng(11)
    q = rng.standard_normal((5, 6)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    allowed = {f"p{i}" for i in range(0, 400, 4)}
    for i, rows in enumerate(m.cone(q, 25)):
        assert [m.ids[r] for r in rows] == _exact_cone(on, q[i], 25)
    for i, rows in enumerate(m.cone(q, 30, m.rows_of(sorted(allowed)))):
        assert [m.ids[r] for r in rows] == _exact_cone(on, q[i], 30, allowed)
    assert [len(r) for r in m.cone(q[:1], 10_000)] == [400]  # never more than it holds


def test_the_mirror_cone_against_chromas_cone(pair):
    """cone="chroma" keeps Chroma's HNSW query for step 1; at a cone over every point both agree."""
    on, off, _ = pair
    exact = HyperAmyRetrieval(on, ParticleProjector(1.0, 2.0))
    via_chroma = HyperAmyRetrieval(on, ParticleProjector(1.0, 2.0), cone="chroma")
    calls = []
    original = on.collection.query
    on.collection.query = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        for q in _queries(12):
            a = exact.search(q, top_k=6, cone_width=400, t_now=1_000_000.0)
            assert not calls  # the exact cone does not ask Chroma
            b = via_chroma.search(q, top_k=6, cone_width=400, t_now=1_000_000.0)
            assert calls and [(r.id, round(r.score, 5)) for r in a] == [(r.id, round(r.score, 5)) for r in b]
            calls.clear()
    finally:
        on.collection.query = original
    with pytest.raises(ValidationError):
        HyperAmyRetrieval(on, cone="hnsw")


def test_the_index_cone_setting(tmp_path):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((120, 6)).astype(np.float32)
    records = [Record(id=f"r{i}", text="", vectors={"default": x[i]}) for i in range(120)]
    exact = PoincareIndex(PoincareIndexConfig(), _ctx())
    chroma = PoincareIndex(PoincareIndexConfig(cone="chroma"), _ctx())
    for index in (exact, chroma):
        index.add(records)
    assert exact.retrieval.cone_source == "auto" and chroma.retrieval.cone_source == "chroma"
    q = Query(vectors={"default": x[5]}, extras={"poincare": {"t_now": 2e9, "cone_width": 120}})
    assert [h.id for h in exact.search(q, 8)] == [h.id for h in chroma.search(q, 8)]
