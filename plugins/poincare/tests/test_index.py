"""The ``poincare`` index: IndexContract (embedded and on a real Chroma server), query
modes, time evolution, neighbours through record links, and memcore collections."""

from __future__ import annotations

import numpy as np
import pytest

import memcore
from memcore import DimensionError, Query, Record, ValidationError
from memcore.plugin import IndexContext, SpaceInfo
from memcore.testing import IndexContract
from memcore_poincare import PoincareIndex, PoincareIndexConfig


def maker(**options):
    config = PoincareIndexConfig(**options)
    return lambda context: PoincareIndex(config, context)


class TestEmbedded(IndexContract):
    @pytest.fixture
    def make_index(self):
        return maker()


class TestCurvedWithForgetting(IndexContract):
    """Curvature 2.5, power-law forgetting, at most 2 neighbours per node; a fixed t_now
    (with a time-dependent law, two searches at different instants may differ)."""

    query_extras = {"poincare": {"t_now": 2_000_000_000.0, "v": 0.2}}

    @pytest.fixture
    def make_index(self):
        return maker(curvature=2.5, scaling_factor=1.0, f={"law": "power"}, max_neighbors=2)


class TestServer(IndexContract):
    @pytest.fixture
    def make_index(self, chroma_server):
        host, port = chroma_server
        return maker(connection={"mode": "http", "host": host, "port": port})


def ctx(dim=3):
    return IndexContext(name="emo", spaces={"default": SpaceInfo("default", dim, "test")})


def rec(rid, vec, v, born=100.0, links=(), T=0.5):
    return Record(
        id=rid,
        text=rid,
        metadata={"v": v, "T": T, "born": born},
        vectors={"default": np.asarray(vec, dtype=np.float32)},
        links=tuple(memcore.Link(t) for t in links),
    )


ANGER, HAPPY = [0.9, 0.1, 0.0], [0.0, 0.1, 0.9]


def q(vec, **mode):
    return Query(vectors={"default": np.asarray(vec, dtype=np.float32)}, extras={"poincare": mode})


def test_abc_through_the_index():
    index = PoincareIndex(PoincareIndexConfig(), ctx())
    index.add([rec("A", ANGER, 0.9, links=["B", "C"]), rec("B", ANGER, 0.2), rec("C", HAPPY, 0.5)])
    hits = index.search(q(ANGER, v=0.9, t_now=100.0, cone_width=2, neighbor_penalty=1.2), 3)
    assert [h.id for h in hits] == ["A", "B", "C"]
    assert hits[0].score == pytest.approx(0.0, abs=1e-6) and hits[1].score == pytest.approx(-1.4, rel=1e-5)
    assert all(h.score == -h.raw for h in hits)
    strong, weak = index.search(q(ANGER, v=0.2, t_now=100.0), 2), index.search(q(ANGER, v=0.9, t_now=100.0), 2)
    assert strong[0].id == "B" and weak[0].id == "A"  # the intensity of the query selects the shell


def test_time_evolution_in_the_index():
    index = PoincareIndex(PoincareIndexConfig(f={"law": "exponential", "half_life": 10.0}), ctx())
    index.add([rec("old", ANGER, 0.9, born=0.0), rec("new", ANGER, 0.3, born=100.0)])
    assert [h.id for h in index.search(q(ANGER, v=0.9, t_now=0.0), 1)] == ["old"]
    assert [h.id for h in index.search(q(ANGER, v=0.3, t_now=100.0), 2)] == ["new", "old"]


@pytest.mark.parametrize(
    "record,error",
    [
        (Record(id="x", text="x", vectors={"default": np.zeros(3, dtype=np.float32)}), ValidationError),
        (Record(id="x", text="x", vectors={"default": np.array([np.nan, 1, 1], dtype=np.float32)}), ValidationError),
        (Record(id="x", text="x", vectors={"default": np.ones(4, dtype=np.float32)}), DimensionError),
        (Record(id="x", text="x", metadata={"v": "high"}, vectors={"default": np.ones(3, dtype=np.float32)}), ValidationError),
        (Record(id="x", text="x", metadata={"v": -1.0}, vectors={"default": np.ones(3, dtype=np.float32)}), ValidationError),
        (Record(id="x", text="x", metadata={"born": float("inf")}, vectors={"default": np.ones(3, dtype=np.float32)}), ValidationError),
    ],
)
def test_bad_records_are_refused_before_chroma(record, error):
    index = PoincareIndex(PoincareIndexConfig(), ctx())
    index.add([rec("A", ANGER, 0.9)])
    with pytest.raises(error):
        index.add([rec("B", ANGER, 0.2), record])
    assert len(index) == 1


def test_bad_queries_are_typed_errors():
    index = PoincareIndex(PoincareIndexConfig(), ctx())
    index.add([rec("A", ANGER, 0.9)])
    with pytest.raises(ValidationError):  # memcore's Query refuses NaN itself
        index.search(q([np.nan, 1, 0]), 3)
    for bad in (
        q([0, 0, 0]),
        q(ANGER, v=-1),
        q(ANGER, cone_width=0),
        q(ANGER, neighbor_penalty=0.9),
        q(ANGER, colour="red"),
        Query(vectors={"default": np.ones(5, dtype=np.float32)}),
    ):
        with pytest.raises(ValidationError):
            index.validate_query(bad)
        with pytest.raises(ValidationError):
            index.search(bad, 3)
    with pytest.raises(ValidationError):
        index.search(q(ANGER), 0)


def test_collection_with_links_and_where(tmp_path):
    settings = {"spaces": {"default": {"embedder": {"kind": "hashing", "dim": 32}}}, "indexes": {"emo": {"kind": "poincare"}}}
    memory = memcore.open(settings, path=tmp_path)
    c = memory.collection
    [a] = c.insert([{"id": "a", "text": "furious about the broken promise", "metadata": {"v": 2.0, "mood": "anger"}}])
    c.insert([{"id": "b", "text": "a calm walk by the lake", "metadata": {"v": 0.3, "mood": "calm"}, "links": ["a"]}])
    hits = c.retrieve(Query(text="furious about the broken promise", extras={"poincare": {"v": 2.0}}), k=2)
    assert hits[0].id == "a" and hits[0].record.text.startswith("furious")
    assert [h.id for h in c.retrieve("furious about the broken promise", k=2, where={"mood": "calm"})] == ["b"]
    memory.close()
    again = memcore.open(settings, path=tmp_path)
    assert len(again.collection.index("emo")) == 2
    assert again.collection.retrieve(Query(text="a calm walk by the lake", extras={"poincare": {"v": 0.3}}), k=1)[0].id == "b"
    again.close()
