"""The four-step search: shell ranking, neighbour penalty, caps, cone width, time evolution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memcore import DimensionError, ValidationError
from memcore_poincare import HyperAmyRetrieval, ParticleProjector, Point, TimePhysics, default_cone_width
from memcore_poincare.retrieval import neighbour_ids


def q(vec, v=0.9, born=0.0):
    return Point("Q", np.asarray(vec, dtype=float), v, 0.5, born)


def test_abc_scenario(storage, retrieval, abc):
    now, anger, happy, points = abc
    storage.upsert_points(points)
    res = retrieval.search(Point("Q", anger, 0.9, 0.5, now), top_k=3, cone_width=50, neighbor_penalty=1.2)
    assert [(r.id, r.match_type) for r in res] == [("A", "direct"), ("B", "direct"), ("C", "direct")]
    assert res[0].score == pytest.approx(0.0, abs=1e-6)
    assert res[1].score == pytest.approx(2 * (0.9 - 0.2), rel=1e-5)  # same direction: radial distance 2(a_q - a_b)
    # a cone of 2 holds the two anger points only; C (happy) comes through A's link, penalised
    res = retrieval.search(Point("Q", anger, 0.9, 0.5, now), top_k=3, cone_width=2, neighbor_penalty=1.2)
    assert [(r.id, r.match_type) for r in res] == [("A", "direct"), ("B", "direct"), ("C", "neighbor")]
    proj = retrieval.projector
    raw = proj.distance(
        proj.states(np.array([anger / np.linalg.norm(anger)]), 0.9, 0.5, now, now), proj.states(np.array([happy / np.linalg.norm(happy)]), 0.5, 0.5, now, now)
    )[0]
    assert res[2].score == pytest.approx(1.2 * raw, rel=1e-5)


def test_neighbour_penalty_ordering(storage, retrieval):
    proj = retrieval.projector
    x = np.array([1.0, 0.0, 0.0])
    n_dir = np.array([1.0, 0.05, 0.0])
    storage.upsert_points(
        [
            Point("A", x, 0.9, 0.5, 0.0, links=["N"]),
            Point("B", x, 0.45, 0.5, 0.0),
            Point("N", n_dir, 0.6, 0.5, 0.0),
        ]
    )
    query = q(x)
    state = proj.states(np.array([x]), 0.9, 0.5, 0.0, 0.0)
    d_b = proj.distance(state, proj.states(np.array([x]), 0.45, 0.5, 0.0, 0.0))[0]
    d_n = proj.distance(state, proj.states(np.array([n_dir / np.linalg.norm(n_dir)]), 0.6, 0.5, 0.0, 0.0))[0]
    assert d_n < d_b < 1.5 * d_n  # the setting of the test
    res = retrieval.search(query, top_k=3, cone_width=2, neighbor_penalty=1.0, t_now=0.0)
    assert [(r.id, r.match_type) for r in res] == [("A", "direct"), ("N", "neighbor"), ("B", "direct")]
    assert res[1].score == pytest.approx(d_n, rel=1e-5)
    res = retrieval.search(query, top_k=3, cone_width=2, neighbor_penalty=1.5, t_now=0.0)
    assert [(r.id, r.match_type) for r in res] == [("A", "direct"), ("B", "direct"), ("N", "neighbor")]
    assert res[2].score == pytest.approx(1.5 * d_n, rel=1e-5)
    # a neighbour that is already a direct result is not repeated
    res = retrieval.search(query, top_k=3, cone_width=3, neighbor_penalty=1.5, t_now=0.0)
    assert sorted(r.id for r in res) == ["A", "B", "N"] and all(r.match_type == "direct" for r in res)
    # max_neighbors=0: no expansion
    res = retrieval.search(query, top_k=3, cone_width=2, max_neighbors=0, t_now=0.0)
    assert [r.id for r in res] == ["A", "B"]


def test_neighbour_caps():
    lists = [["a", "b", "c"], ["c", "d", "e"], ["f"]]
    assert neighbour_ids(lists, 2, exclude=set()) == ["a", "b", "c", "d", "f"]
    assert neighbour_ids(lists, 1, exclude={"a"}) == ["c", "f"]
    assert neighbour_ids([["x"] * 1 + [f"n{i}" for i in range(50)]], 3, exclude=set()) == ["x", "n0", "n1"]
    assert neighbour_ids(lists, 5, exclude=set(), allowed={"e", "b"}) == ["b", "e"]
    many = [[f"n{j}-{i}" for i in range(10)] for j in range(4)]
    assert len(neighbour_ids(many, 10, exclude=set())) == 40
    assert neighbour_ids([], 3, exclude=set()) == []


def test_global_cap_in_search(storage, retrieval):
    x = np.array([1.0, 0.0])
    hub_links = [f"n{i}" for i in range(30)]
    rng = np.random.default_rng(0)
    storage.upsert_points([Point(f"n{i}", rng.standard_normal(2), 0.5, 0.5, 0.0) for i in range(30)])
    storage.upsert_point(Point("hub", x, 0.9, 0.5, 0.0, links=hub_links))
    res = retrieval.search(q(x), top_k=10, cone_width=1, max_neighbors=4, t_now=0.0)
    assert res[0].id == "hub" and {r.id for r in res[1:]} <= {"n0", "n1", "n2", "n3"} and len(res) == 5


def test_time_evolution_changes_the_ranking(tmp_path):
    from memcore_poincare import HyperAmyStorage

    s = HyperAmyStorage(tmp_path / "db")
    x = np.array([1.0, 0.0])
    s.upsert_points([Point("old", x, 0.9, 0.5, 0.0), Point("new", x, 0.3, 0.5, 1000.0)])
    query = q(x, v=0.9, born=1000.0)
    ident = HyperAmyRetrieval(s, ParticleProjector())
    assert [r.id for r in ident.search(query, top_k=2, t_now=1000.0)] == ["old", "new"]
    decay = HyperAmyRetrieval(s, ParticleProjector(physics=TimePhysics(f={"law": "exponential", "half_life": 100.0})))
    res = decay.search(query, top_k=2, t_now=1000.0)  # "old" has decayed to 0.9/1024, the query is fresh
    assert [r.id for r in res] == ["new", "old"]
    assert res[1].score == pytest.approx(2 * (0.9 - 0.9 / 1024), rel=1e-5)


def test_allowed_restricts_direct_and_neighbour_results(storage, retrieval, abc):
    now, anger, _, points = abc
    storage.upsert_points(points)
    res = retrieval.search(Point("Q", anger, 0.9, 0.5, now), top_k=3, allowed={"A", "C", "ghost"})
    assert [r.id for r in res] == ["A", "C"]
    res = retrieval.search(Point("Q", anger, 0.9, 0.5, now), top_k=3, cone_width=1, allowed={"A", "C", "B"} - {"B"})
    assert [(r.id, r.match_type) for r in res] == [("A", "direct"), ("C", "neighbor")]
    assert retrieval.search(Point("Q", anger, 0.9, 0.5, now), allowed=set()) == []
    assert retrieval.search(Point("Q", anger, 0.9, 0.5, now), allowed={"ghost"}) == []


def test_bad_queries_are_typed_errors(storage, retrieval, abc):
    storage.upsert_points(abc[3])
    anger = abc[1]
    for bad in (np.zeros(3), np.array([np.nan, 1.0, 0.0]), np.array([np.inf, 1.0, 0.0])):
        with pytest.raises(ValidationError):
            retrieval.search(q(bad))
    with pytest.raises(DimensionError):
        retrieval.search(q(np.ones(4)))
    with pytest.raises(ValidationError):
        retrieval.search(Point("Q", anger, float("nan"), 0.5, 0.0))
    for kwargs in (
        {"top_k": 0},
        {"top_k": 2.5},
        {"cone_width": 0},
        {"max_neighbors": -1},
        {"neighbor_penalty": 0.5},
        {"neighbor_penalty": float("nan")},
        {"top_k": True},
    ):
        with pytest.raises(ValidationError):
            retrieval.search(q(anger), **kwargs)


def test_empty_storage(retrieval):
    assert retrieval.search(q([1.0, 0.0])) == []


def test_default_cone_width_rule():
    assert default_cone_width(1, 3) == 3
    assert default_cone_width(10, 3) == 10
    assert default_cone_width(1000, 3) == 70
    assert default_cone_width(100_000, 3) == math.ceil(10 * math.log(100_000)) == 116
    assert default_cone_width(100, 200) == 200


def test_derived_cone_finds_everything_in_a_small_collection(storage, retrieval):
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((40, 4))
    storage.upsert_points([Point(f"p{i}", vecs[i], float(rng.uniform(0, 2)), 0.5, 0.0) for i in range(40)])
    res = retrieval.search(q(vecs[0], v=1.0), top_k=40, max_neighbors=0, t_now=0.0)
    assert len(res) == 40 and all(a.score <= b.score for a, b in zip(res, res[1:]))
