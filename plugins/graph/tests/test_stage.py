"""The ``graph_recall`` stage: the StageContract, and expansion of earlier hits in a pipeline."""

from __future__ import annotations

import pytest

import memcore
from memcore import Collection, ConfigError, Contribution, Hit, Query
from memcore.plugin import PipelineContext
from memcore.testing import StageContract, build_stage
from memcore_graph.stage import GraphRecall, seed_scores


class TestGraphRecallContract(StageContract):
    """Seeds from the working list (an exact vector recall), expanded along s_i -> s_(i+1) links."""

    collection_indexes = {
        "vector": {"kind": "exact", "space": "default", "metric": "cosine"},
        "graph": {"kind": "graph", "max_depth": 2},
    }

    @pytest.fixture(params=["rank", "minmax", "score"])
    def stage(self, request):
        return build_stage("graph_recall", seeds=3, seed_score=request.param, direction="both")

    def make_collection(self) -> Collection:
        collection = super().make_collection()
        for i in range(0, self.n_records - 1, 2):
            collection.link(f"s{i}", f"s{i + 1}", "next")
        return collection


def _ctx(collection, hits, query=None):
    ctx = PipelineContext(collection, query or Query(text="q", k=10))
    for rank, hit in enumerate(hits, start=1):
        hit.source = "seed"
        hit.provenance = (Contribution("seed", rank, hit.score),)
    ctx.add_list("seed", hits)
    return ctx


@pytest.fixture
def linked():
    collection = Collection.create()
    collection.create_index("graph", "graph", entity_extraction="none", max_depth=3)
    collection.create_index("vector", "exact")
    collection.insert([{"id": i, "text": f"text {i}"} for i in "abcdef"])
    collection.insert([{"id": "p", "text": "private", "metadata": {"private": True}}])
    for s, t in ("ab", "bc", "cd", "ep", "pf"):
        collection.link(s, t)
    yield collection
    collection.close()


def test_expands_seeds_with_decay(linked):
    stage = build_stage("graph_recall", seeds=2, max_depth=2)
    stage.check(linked)
    ctx = _ctx(linked, [Hit("a", 0.9), Hit("e", 0.2), Hit("f", 0.1)])
    stage.run(ctx)
    got = [(h.id, round(h.score, 6)) for h in ctx.current]
    # rank seeds: a 1.0, e 0.5; f (third) is not a seed; e -> p -> f reaches f at 2 hops
    assert got == [("a", 1.0), ("b", 0.7), ("e", 0.5), ("c", 0.49), ("p", 0.35), ("f", 0.245)]
    assert ctx.lists["graph_recall"] is ctx.current
    assert [c.source for h in ctx.current for c in h.provenance] == ["graph_recall"] * 6


def test_where_filter_and_source_list(linked):
    stage = build_stage("graph_recall", source="seed", seeds=5, max_depth=3, name="neighbours")
    stage.check(linked)
    ctx = _ctx(linked, [Hit("e", 1.0)], Query(text="q", k=10, where={"private": {"$ne": True}}))
    stage.run(ctx)
    assert [h.id for h in ctx.lists["neighbours"]] == ["e"]  # p is filtered out, so f is unreachable
    stage = build_stage("graph_recall", source="seed", max_depth=3, include_seeds=False)
    stage.check(linked)
    ctx = _ctx(linked, [Hit("a", 1.0)])
    stage.run(ctx)
    assert [h.id for h in ctx.current] == ["b", "c", "d"]


def test_the_expand_query_goes_in_extras_graph(linked, monkeypatch):
    sent = []
    search_index = linked.reader.search_index  # what stages search through: the collection's reader

    def spy(name, query, k, **kw):
        sent.append((name, query))
        return search_index(name, query, k, **kw)

    monkeypatch.setattr(linked.reader, "search_index", spy)
    stage = build_stage("graph_recall", seeds=2, max_depth=2, relations=["related"], direction="both", include_seeds=False)
    stage.check(linked)
    # the pipeline query carries modes of other indexes (and its own graph mode): none reach the stage's query
    pipeline_query = Query(text="q", k=10, extras={"faiss": {"nprobe": 4}, "graph": {"mode": "traverse", "start": ["f"]}})
    ctx = _ctx(linked, [Hit("a", 0.9), Hit("e", 0.2)], pipeline_query)
    stage.run(ctx)
    [(name, query)] = sent
    assert name == "graph" and query.text == "q" and query.k == 10
    assert query.extras == {
        "graph": {"mode": "expand", "seeds": {"a": 1.0, "e": 0.5}, "direction": "both", "include_seeds": False, "max_depth": 2, "relations": ["related"]}
    }
    assert [(h.id, round(h.score, 6)) for h in ctx.current] == [("b", 0.7), ("c", 0.49), ("p", 0.35), ("f", 0.245)]


def test_empty_input_gives_an_empty_list(linked):
    stage = build_stage("graph_recall")
    stage.check(linked)
    ctx = _ctx(linked, [])
    stage.run(ctx)
    assert ctx.lists["graph_recall"] == [] and ctx.current == []


def test_check_finds_or_refuses_the_index(linked):
    assert isinstance(build_stage("graph_recall"), GraphRecall)
    with pytest.raises(ConfigError, match="is a 'exact' index"):
        build_stage("graph_recall", index="vector").check(linked)
    with pytest.raises(ConfigError, match="does not exist"):
        build_stage("graph_recall", index="nope").check(linked)
    linked.create_index("graph2", "graph")
    with pytest.raises(ConfigError, match="name the graph index"):
        build_stage("graph_recall").check(linked)
    build_stage("graph_recall", index="graph2").check(linked)
    with pytest.raises(ConfigError, match="no list 'missing'"):
        build_stage("graph_recall", index="graph", source="missing").run(_ctx(linked, [Hit("a", 1.0)]))


@pytest.mark.parametrize("options", [{"seeds": 0}, {"seed_score": "softmax"}, {"max_depth": -1}, {"hops": 2}, {"relations": []}])
def test_bad_options_are_config_errors(options):
    with pytest.raises(ConfigError):
        build_stage("graph_recall", **options)


def test_seed_scores():
    hits = [Hit("a", 3.0), Hit("b", -1.0), Hit("a", 9.0), Hit("c", 1.0)]
    assert seed_scores(hits, "rank") == {"a": 1.0, "b": 0.5, "c": pytest.approx(1 / 3)}
    assert seed_scores(hits, "score") == {"a": 3.0, "b": 0.0, "c": 1.0}
    assert seed_scores(hits, "minmax") == {"a": 1.0, "b": 0.0, "c": 0.5}
    assert seed_scores([Hit("x", 2.0), Hit("y", 2.0)], "minmax") == {"x": 1.0, "y": 1.0}


def test_in_a_declared_pipeline(tmp_path):
    settings = {
        "indexes": {
            "vector": {"kind": "exact", "space": "default"},
            "graph": {"kind": "graph", "entity_extraction": "none"},
        },
        "pipeline": [
            {"kind": "recall", "index": "vector", "over_fetch": 2.0},
            {"kind": "graph_recall", "seeds": 1, "max_depth": 1},
            {"kind": "fuse", "fusion": "rrf"},
            {"kind": "limit"},
        ],
    }
    with memcore.open(settings, path=tmp_path / "mem") as memory:
        c = memory.collection
        c.insert([{"id": "q", "text": "quantum computing with qubits"}, {"id": "z", "text": "zebra stripes"}])
        c.link("q", "z", "see_also")
        hits = memory.query("quantum qubits", k=2)
        assert [h.id for h in hits] == ["q", "z"]
        assert {c.source for c in hits[1].provenance} == {"vector", "graph_recall"}
