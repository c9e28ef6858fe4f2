"""The in-memory particle mirror: the same results as the Chroma path, kept in step with
upserts, deletes and link cleanup, rebuilt from Chroma after a reopen or a load."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from memcore import IndexContext, Query, Record, SpaceInfo
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
    return [[(x.id, round(x.score, 9), x.match_type) for x in r.search(q, t_now=now, **kw)] for q in queries]


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
    for index in (on, off):
        index.remove([f"r{i}" for i in range(10)])
        index.add([Record(id="new", text="", vectors={"default": x[17] + 0.1}, metadata={"v": 0.5})])

    def hits(index):
        return [[(h.id, round(h.score, 9)) for h in index.search(q, 5)] for q in queries]

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
