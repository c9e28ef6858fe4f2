"""The graph index inside a real SQLite-backed Collection / memcore.open: links, deletes,
scopes, index membership, close and reopen, the CLI with examples/graph.toml."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import memcore
from memcore import Collection, Query, ValidationError
from memcore.testing import fused

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "graph.toml"


def walk(collection, start, index="g", **options):
    """(id, score) of a traverse through the collection (``extras["graph"]``)."""
    q = Query(extras={"graph": {"mode": "traverse", "start": [start] if isinstance(start, str) else start, **options}}, k=50)
    return [(h.id, round(h.score, 6)) for h in collection.retrieve(q, index=index, with_records=False)]


def ids_of(hits):
    return [h[0] for h in hits]


@pytest.fixture
def coll(tmp_path):
    collection = Collection.create(tmp_path / "mem")
    collection.create_index("g", "graph", max_depth=5, entity_extraction="rule")
    collection.create_index("vec", "exact")
    yield collection
    collection.close()


def test_insert_link_unlink_delete(coll):
    coll.insert([{"id": "a", "text": "Alice wrote"}, {"id": "b", "text": "something"}, {"id": "c", "text": "another"}])
    assert walk(coll, "a") == [("a", 1.0)]
    coll.link("a", "b", "knows")
    coll.link("b", "c", "knows", weight=0.5)
    assert walk(coll, "a") == [("a", 1.0), ("b", 0.7), ("c", 0.49)]
    graph = coll.index("g").graph
    assert graph.edges["b", "c"]["relations"] == {"knows": 0.5}
    # unlink: the edge goes, both records stay
    assert coll.unlink("a", "b") == 1
    assert walk(coll, "a") == [("a", 1.0)] and not coll.index("g").graph.has_edge("a", "b")
    coll.link("a", "b", "knows")
    # deleting a record removes its node, its edges and the links to it (no orphans)
    coll.delete("b")
    g = coll.index("g")
    assert not g.graph.has_node("b") and walk(coll, "a") == [("a", 1.0)]
    assert g.pending_links() == {} and coll.get("a").links == ()
    assert walk(coll, "c", direction="in") == [("c", 1.0)]
    coll.delete(["a"])
    assert ("entity", "alice") not in g.graph  # its only mention is gone
    assert g.graph.number_of_edges() == 0 and len(g) == 1


def test_links_given_at_insert_and_update(coll):
    coll.insert(
        [
            {"id": "x", "text": "x", "links": [{"target": "y", "relation": "next"}]},
            {"id": "y", "text": "y", "links": ["z"]},
            {"id": "z", "text": "z"},
        ]
    )
    assert ids_of(walk(coll, "x")) == ["x", "y", "z"]
    coll.update("y", links=[])
    assert ids_of(walk(coll, "x")) == ["x", "y"]
    coll.upsert([{"id": "y", "text": "y changed", "links": [{"target": "x", "relation": "back"}]}])
    assert ids_of(walk(coll, "y")) == ["y", "x"]
    assert ids_of(walk(coll, "x", relations=["next"])) == ["x", "y"]


def test_link_target_outside_the_index_is_pending_until_it_joins(coll):
    coll.insert([{"id": "t", "text": "target"}], indexes=["vec"])  # not in the graph index
    coll.insert([{"id": "s", "text": "source", "links": ["t"]}])
    g = coll.index("g")
    assert g.pending_links() == {"t": ["s"]} and walk(coll, "s") == [("s", 1.0)]
    coll.insert_to_index("g", ["t"])  # the collection does not re-add s: the index resolves it
    assert walk(coll, "s") == [("s", 1.0), ("t", 0.7)] and g.pending_links() == {}
    coll.remove_from_index("g", ["t"])
    assert g.pending_links() == {"t": ["s"]} and walk(coll, "s") == [("s", 1.0)]
    assert coll.get("t").links == () and coll.get("s").links[0].target == "t"  # the store keeps the link


def test_scoped_retrieve_never_sees_other_scopes(coll):
    coll.insert([{"id": "u2", "text": "Alice notes"}], scope={"user_id": "u"})
    coll.insert([{"id": "v1", "text": "Alice secret", "links": ["u2"]}], scope={"user_id": "v"})
    coll.insert([{"id": "u1", "text": "Alice diary", "links": ["v1"]}], scope={"user_id": "u"})
    for extras in (
        {"graph": {"mode": "traverse", "start": ["u1"]}},
        {"graph": {"mode": "traverse", "start": ["u1", "v1"], "algorithm": "dfs"}},
        {"graph": {"mode": "expand", "seeds": {"u1": 1.0, "v1": 1.0}}},
        {"graph": {"mode": "path", "source": "u1", "target": "u2"}},
        {"graph": {"mode": "traverse", "start": ["u1"], "pass_through": True}},
        {},
    ):
        q = Query(text="what about alice", extras=extras, k=20)
        got = [h.id for h in coll.retrieve(q, index="g", scope={"user_id": "u"})]
        assert "v1" not in got
        assert set(got) <= {"u1", "u2"}
    # by links, u1 -> v1 -> u2 only connects through v's record: no such path inside u's scope
    by_links = Query(extras={"graph": {"mode": "path", "source": "u1", "target": "u2", "relations": ["related"]}})
    assert [h.id for h in coll.retrieve(by_links, index="g", scope={"user_id": "u"})] == []
    assert [h.id for h in coll.retrieve(by_links, index="g")] == ["u1", "v1", "u2"]
    # entity nodes are shared names, not records: u1 -> (alice) -> u2 stays inside the scope
    by_names = Query(extras={"graph": {"mode": "path", "source": "u1", "target": "u2"}})
    assert [(h.id, h.raw) for h in coll.retrieve(by_names, index="g", scope={"user_id": "u"})] == [("u1", 0.0), ("u2", 2.0)]
    # text mode: both of u's records mention alice
    assert sorted(h.id for h in coll.retrieve("alice", index="g", scope={"user_id": "u"})) == ["u1", "u2"]
    assert [h.id for h in coll.retrieve(Query(extras={"graph": {"mode": "traverse", "start": ["v1"]}}), index="g", scope={"user_id": "u"})] == []


def test_where_filter_restricts_hits(coll):
    coll.insert([{"id": f"n{i}", "text": f"note {i}", "metadata": {"even": i % 2 == 0}, "links": [f"n{i + 1}"] if i < 4 else []} for i in range(5)][::-1])
    got = [
        h.id for h in coll.retrieve(Query(extras={"graph": {"mode": "traverse", "start": ["n0"], "pass_through": True}}, k=10), index="g", where={"even": True})
    ]
    assert got == ["n0", "n2", "n4"]
    got = [h.id for h in coll.retrieve(Query(extras={"graph": {"mode": "traverse", "start": ["n0"]}}, k=10), index="g", where={"even": True})]
    assert got == ["n0"]


def test_bad_queries_through_the_collection(coll):
    coll.insert([{"id": "a", "text": "a"}])
    with pytest.raises(ValidationError, match="bad query extras"):
        coll.retrieve(Query(extras={"graph": {"mode": "traverse", "start": ["a"], "max_depth": -1}}), index="g")
    with pytest.raises(ValidationError, match="no text"):
        coll.retrieve(Query(), index="g")
    with pytest.raises(ValidationError):
        coll.retrieve(Query(extras={"graph": {"mode": "traverse", "start": ["a"]}}), index="g", k=0)


def test_the_index_reads_only_extras_graph(coll):
    coll.insert([{"id": "a", "text": "Alice wrote", "links": ["b"]}, {"id": "b", "text": "a reply"}, {"id": "c", "text": "Carol"}])
    walk_a = {"mode": "traverse", "start": ["a"]}
    alone = [(h.id, h.score) for h in coll.retrieve(Query(extras={"graph": walk_a}), index="g", with_records=False)]
    assert alone == [("a", 1.0), ("b", 0.7)]
    # modes of other indexes in the same query are ignored
    mixed = Query(extras={"faiss": {"nprobe": 4}, "bm25": {"mode": "phrase"}, "graph": walk_a})
    assert [(h.id, h.score) for h in coll.retrieve(mixed, index="g", with_records=False)] == alone
    # no "graph" key: the default text mode, even with other indexes' modes (or an old top-level "mode")
    text_hits = [h.id for h in coll.retrieve("alice", index="g")]
    assert text_hits[0] == "a"
    for extras in ({"bm25": {"mode": "phrase"}}, {"mode": "traverse", "start": ["c"]}):
        assert [h.id for h in coll.retrieve(Query(text="alice", extras=extras), index="g")] == text_hits
        with pytest.raises(ValidationError, match="no text"):
            coll.retrieve(Query(extras=extras), index="g")
    # inside its own key the index is strict
    with pytest.raises(ValidationError, match=r"extras\.graph must be a dict"):
        coll.retrieve(Query(extras={"graph": "traverse"}), index="g")
    with pytest.raises(ValidationError, match=r"extras\.graph\.depth"):
        coll.retrieve(Query(extras={"graph": {**walk_a, "depth": 1}, "faiss": {"nprobe": 4}}), index="g")


def test_one_query_carries_modes_for_several_indexes(coll):
    coll.insert([{"id": "a", "text": "Alice wrote", "links": ["b"]}, {"id": "b", "text": "a reply"}, {"id": "c", "text": "Carol"}])
    query = Query(text="carol", extras={"graph": {"mode": "traverse", "start": ["a"]}, "faiss": {"nprobe": 4}}, k=5)
    hits = fused(coll, ["g", "vec"], query, k=5, with_records=False)
    sources = {h.id: {c.source for c in h.provenance} for h in hits}
    assert sources["a"] >= {"g"} and sources["b"] >= {"g"}  # the graph walked from a
    assert "vec" in sources["c"]  # the vector index searched the text


def test_close_reopen_identical_and_loaded_from_disk(tmp_path):
    path = tmp_path / "mem"
    queries = [
        Query(extras={"graph": {"mode": "traverse", "start": ["a"]}}, k=20),
        Query(extras={"graph": {"mode": "expand", "seeds": {"d": 1.0}, "direction": "both"}}, k=20),
        Query(extras={"graph": {"mode": "path", "source": "a", "target": "d"}}, k=20),
        Query(text="Carol and bob", k=20),
    ]
    with Collection.create(path) as coll:
        coll.create_index("g", "graph", max_depth=4)
        coll.insert(
            [
                {"id": "a", "text": "Alice met Bob", "links": ["b"]},
                {"id": "b", "text": "Bob called Carol", "links": ["c"]},
                {"id": "c", "text": "Carol", "links": [{"target": "d", "relation": "cites", "weight": 2.0}]},
                {"id": "d", "text": "the end"},
            ]
        )
        coll.delete("b")
        coll.link("a", "c")
        before = [[(h.id, h.score, h.raw) for h in coll.retrieve(q, index="g", with_records=False)] for q in queries]
        assert all(before)
    with Collection.create(path) as coll:
        assert coll._indexes["g"].loaded_from_disk  # the saved graph, not a rebuild
        after = [[(h.id, h.score, h.raw) for h in coll.retrieve(q, index="g", with_records=False)] for q in queries]
        assert after == before
        coll.rebuild_index("g")  # and a rebuild from the store gives the same graph
        assert [[(h.id, h.score, h.raw) for h in coll.retrieve(q, index="g", with_records=False)] for q in queries] == before
    # a damaged file is rebuilt from the store on open, with the same results
    (path / "indexes" / "g" / "graph.json").write_text("{broken")
    with Collection.create(path) as coll:
        assert not coll._indexes["g"].loaded_from_disk
        assert [[(h.id, h.score, h.raw) for h in coll.retrieve(q, index="g", with_records=False)] for q in queries] == before


def graph_score(hit):
    """The hit's score in the graph index's list (its provenance), before the preset's stages."""
    return next(c.score for c in hit.provenance if c.source == "links")


def test_memcore_open_with_settings(tmp_path):
    settings = {"indexes": {"links": {"kind": "graph", "decay": 0.5, "entity_extraction": "rule"}}}
    with memcore.open(settings, path=tmp_path / "mem") as memory:
        memory.collection.insert(
            [
                {"id": "m1", "text": "Alice works at Acme", "links": [{"target": "m2", "relation": "then"}]},
                {"id": "m2", "text": "she moved to Lisbon"},
                {"id": "m3", "text": "Bob likes Acme coffee"},
            ]
        )
        first = [(h.id, graph_score(h)) for h in memory.query("where does alice work", k=5)]
        walked = [(h.id, h.score) for h in memory.collection.retrieve(Query(extras={"graph": {"mode": "traverse", "start": ["m1"]}}), index="links")]
    assert first == [("m1", 1.0), ("m2", 0.5), ("m3", 0.25)]  # m3 through the Acme entity node
    assert walked == [("m1", 1.0), ("m2", 0.5), ("m3", 0.25)]  # m1 -> Acme -> m3
    with memcore.open(settings, path=tmp_path / "mem") as memory:
        assert [(h.id, graph_score(h)) for h in memory.query("where does alice work", k=5)] == first
        assert [(h.id, h.score) for h in memory.collection.retrieve(Query(extras={"graph": {"mode": "traverse", "start": ["m1"]}}), index="links")] == walked


def test_unknown_option_is_a_config_error(tmp_path):
    with pytest.raises(memcore.ConfigError, match="indexes.links.decay"):
        memcore.open({"indexes": {"links": {"kind": "graph", "decay": 1.5}}}, path=tmp_path / "mem")
    with pytest.raises(memcore.ConfigError, match="indexes.links.hops"):
        memcore.open({"indexes": {"links": {"kind": "graph", "hops": 2}}}, path=tmp_path / "mem2")


def test_cli_with_the_example_settings(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from memcore.cli import main

    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)
    data = tmp_path / "data.jsonl"
    rows = [
        {"id": "a1", "text": "Alice booked a flight to Lisbon"},
        {"id": "b1", "text": "Bob adopted a puppy named Biscuit"},
        {"id": "a2", "text": "Alice plays chess with Bob"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runner = CliRunner()
    result = runner.invoke(main, ["ingest", "--config", str(EXAMPLE), "--path", str(tmp_path / "mem"), str(data)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["query", "--config", str(EXAMPLE), "--path", str(tmp_path / "mem"), "--index", "graph", "--json", "biscuit"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    assert [(h["id"], round(h["score"], 6)) for h in hits] == [("b1", 1.0), ("a2", 0.49)]  # a2 shares Bob with b1
    result = runner.invoke(main, ["query", "--config", str(EXAMPLE), "--path", str(tmp_path / "mem"), "--json", "what does Alice do"])
    assert result.exit_code == 0, result.output
    assert {h["id"] for h in json.loads(result.stdout)[:2]} == {"a1", "a2"}
