"""Saving and loading: node-link JSON, identical results after reload, corrupt files refused."""

from __future__ import annotations

import json

import pytest

from memcore import CorruptError, Query, Record
from memcore.plugin import IndexContext
from memcore_graph import GraphIndexConfig
from memcore_graph.index import GraphIndex
from memcore_graph.persistence import GRAPH_FILE

QUERIES = [
    {"graph": {"mode": "traverse", "start": ["a"]}},
    {"graph": {"mode": "traverse", "start": ["a", "e"], "algorithm": "dfs", "max_nodes": 4}},
    {"graph": {"mode": "traverse", "start": ["d"], "direction": "both", "max_depth": 4}},
    {"graph": {"mode": "expand", "seeds": {"a": 1.0, "f": 2.0}, "relations": ["related", "mentions"]}},
    {"graph": {"mode": "path", "source": "a", "target": "f"}},
    {"graph": {"mode": "path", "source": "c", "target": "a", "direction": "in"}},
    {},
]


def build(g, **options):
    index = g.make(**{"entity_extraction": "rule", "max_depth": 3, **options})
    index.add(
        [
            g.rec("a", "b", ("g", "cites", 0.5), text="Alice wrote to Bob"),
            g.rec("b", "c", "e", text="Bob asked Carol"),
            g.rec("c", "d", text="Carol met 'Project X'"),
            g.rec("d", "missing", text="nothing named"),
            g.rec("e", "f", text="Dave and Carol"),
            g.rec("f", text="Erin"),
        ]
    )
    index.remove(["g-never"])
    return index


def results(index, allowed=None):
    return [[(h.id, h.score, h.raw) for h in index.search(Query(text="alice and carol?", extras=extras), 20, allowed)] for extras in QUERIES]


@pytest.mark.parametrize("options", [{}, {"directed": False}, {"entity_nodes": False}, {"entity_extraction": "none"}])
def test_reload_gives_identical_results(g, tmp_path, options):
    index = build(g, **options)
    index.save(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [GRAPH_FILE]
    fresh = g.make(**{"entity_extraction": "rule", "max_depth": 3, **options})
    fresh.load(tmp_path)
    assert results(fresh) == results(index)
    assert results(fresh, {"a", "c", "e", "f"}) == results(index, {"a", "c", "e", "f"})
    assert fresh.stats() == index.stats()
    assert fresh.pending_links() == index.pending_links() == {"g": ["a"], "missing": ["d"]}
    assert sorted(map(str, fresh.graph.edges)) == sorted(map(str, index.graph.edges))
    # the loaded index keeps working: pending links resolve, removals clean up
    for each in (index, fresh):
        each.add([g.rec("missing", text="Zed")])
        each.remove(["b"])
    assert results(fresh) == results(index)
    assert fresh.stats() == index.stats()


def test_reload_is_independent_of_insertion_history(g, tmp_path):
    """The same graph built in a different order gives the same results (ties broken by id)."""
    one = build(g)
    two = g.make(entity_extraction="rule", max_depth=3)
    records = [g.rec("f", text="Erin"), g.rec("e", "f", text="Dave and Carol"), g.rec("d", "missing", text="nothing named")]
    two.add(records)
    two.add([g.rec("c", "d", text="Carol met 'Project X'"), g.rec("a", "b", ("g", "cites", 0.5), text="Alice wrote to Bob")])
    two.add([g.rec("b", "c", "e", text="Bob asked Carol")])
    assert results(one) == results(two)
    two.save(tmp_path)
    three = g.make(entity_extraction="rule", max_depth=3)
    three.load(tmp_path)
    assert results(three) == results(one)


def test_file_is_networkx_node_link_json(g, tmp_path):
    import networkx as nx

    index = build(g)
    index.save(tmp_path)
    data = json.loads((tmp_path / GRAPH_FILE).read_text())
    assert data["directed"] is True and data["multigraph"] is False and "edges" in data and "links" not in data
    assert data["graph"]["memcore_graph"]["format"] == 1
    record_a = next(n for n in data["nodes"] if n["id"] == "a")
    assert record_a["links"] == {"b": {"related": 1.0}, "g": {"cites": 0.5}}  # the pending link to g is kept
    assert ["entity", "alice"] in [n["id"] for n in data["nodes"]]
    # networkx reads it as it is (entity ids as tuples)
    for node in data["nodes"]:
        node["id"] = tuple(node["id"]) if isinstance(node["id"], list) else node["id"]
    for edge in data["edges"]:
        for end in ("source", "target"):
            edge[end] = tuple(edge[end]) if isinstance(edge[end], list) else edge[end]
    graph = nx.node_link_graph(data, edges="edges")
    assert set(graph.edges) == set(index.graph.edges)


def test_save_empty_and_load_replaces(g, tmp_path):
    empty = g.make(entity_extraction="rule")
    empty.save(tmp_path)
    full = build(g)
    full.load(tmp_path)
    assert len(full) == 0 and full.graph.number_of_nodes() == 0 and full.pending_links() == {}


def _corrupt(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(directed=False),
        lambda d: d.update(multigraph=True),
        # (the settings recorded in d["graph"] are not re-checked: the core's index.json does)
        lambda d: d.pop("edges"),
        lambda d: d["edges"].pop(),
        lambda d: d["edges"].append({"source": "a", "target": "f", "relations": {"x": 1.0}}),
        lambda d: d["nodes"].append({"id": "zz"}),
        lambda d: d["nodes"].append({"id": ["entity", "orphan"]}),
        lambda d: d["nodes"].append({"id": ["weird", "x"]}),
        lambda d: d["nodes"].append({"id": 7}),
        lambda d: next(n for n in d["nodes"] if n["id"] == "a")["links"].update(b={"related": "heavy"}),
        lambda d: next(n for n in d["nodes"] if n["id"] == "a").update(entities=[3]),
        lambda d: next(n for n in d["nodes"] if n["id"] == "a")["links"].update(a={"self": 1.0}),
    ],
)
def test_corrupt_or_mismatched_files_raise_corrupt_error(g, tmp_path, change):
    index = build(g)
    index.save(tmp_path)
    _corrupt(tmp_path / GRAPH_FILE, change)
    fresh = build(g)
    before = results(fresh)
    with pytest.raises(CorruptError):
        fresh.load(tmp_path)
    assert results(fresh) == before  # a failed load leaves the index as it was


@pytest.mark.parametrize("content", [b"", b"{not json", b"[]", "\u00e9".encode("latin-1"), b'{"nodes": [], "edges": []}'])
def test_unreadable_files_raise_corrupt_error(g, tmp_path, content):
    (tmp_path / GRAPH_FILE).write_bytes(content)
    with pytest.raises(CorruptError):
        g.make().load(tmp_path)


def test_missing_file_raises_corrupt_error(g, tmp_path):
    with pytest.raises(CorruptError):
        g.make().load(tmp_path)


def test_other_settings_refuse_the_file(g, tmp_path):
    """A graph of another shape is refused; in a collection the core's index.json refuses
    any changed build-time setting (name_field, entity_extraction...) before the file is read."""
    build(g).save(tmp_path)
    for options in ({"directed": False}, {"entity_nodes": False}):
        with pytest.raises(CorruptError, match="directed|unexpected node"):
            g.make(**{"entity_extraction": "rule", **options}).load(tmp_path)
    # query-time settings may change: decay, max_depth, max_nodes
    other = GraphIndex(GraphIndexConfig(decay=0.5, max_depth=1, max_nodes=5), IndexContext("g"))
    other.load(tmp_path)
    assert len(other) == 6


def test_save_is_atomic_and_leaves_no_temp_files(g, tmp_path):
    index = build(g)
    index.save(tmp_path)
    first = (tmp_path / GRAPH_FILE).read_bytes()
    index.add([Record.create("new", id="new")])
    index.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [GRAPH_FILE]
    assert (tmp_path / GRAPH_FILE).read_bytes() != first
