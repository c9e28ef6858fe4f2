"""The graph index on hand-made graphs: walks, scores, limits, links, removal, allowed."""

from __future__ import annotations

import re

import pytest

from memcore import Link, Query, Record, ValidationError

D = 0.7


# -- traverse ---------------------------------------------------------------------------


def test_bfs_scores_are_decay_to_the_depth(g, chain):
    got = g.search(chain, mode="traverse", start=["a"])
    assert [i for i, _ in got] == ["a", "b", "g", "c", "e", "d", "f"]  # by depth, then id
    depth = {"a": 0, "b": 1, "g": 1, "c": 2, "e": 2, "d": 3, "f": 3}
    for node, score in got:
        assert score == pytest.approx(D ** depth[node], rel=1e-12)
    raw = {h.id: h.raw for h in chain.search(Query(extras={"graph": {"mode": "traverse", "start": ["a"]}}), 10)}
    assert raw == {n: float(d) for n, d in depth.items()}


def test_custom_decay_exact(g):
    index = g.make(decay=0.5)
    index.add([g.rec("a", "b"), g.rec("b", "c"), g.rec("c")])
    assert g.search(index, mode="traverse", start=["a"]) == [("a", 1.0), ("b", 0.5), ("c", 0.25)]


def test_max_depth_from_config_and_query(g, chain):
    assert g.ids(chain, mode="traverse", start=["a"], max_depth=0) == ["a"]
    assert g.ids(chain, mode="traverse", start=["a"], max_depth=1) == ["a", "b", "g"]
    shallow = g.make()  # default max_depth = 2
    shallow.add([g.rec("a", "b"), g.rec("b", "c"), g.rec("c", "d"), g.rec("d")])
    assert g.ids(shallow, mode="traverse", start=["a"]) == ["a", "b", "c"]


def test_max_nodes_bounds_the_visit(g, chain):
    assert g.ids(chain, mode="traverse", start=["a"], max_nodes=3) == ["a", "b", "g"]
    assert g.ids(chain, mode="traverse", start=["a"], max_nodes=4) == ["a", "b", "g", "c"]
    assert chain.last_visited == 4
    capped = g.make(max_nodes=2, max_depth=10)
    capped.add([g.rec("a", "b"), g.rec("b", "c"), g.rec("c")])
    assert g.ids(capped, mode="traverse", start=["a"]) == ["a", "b"]


def test_k_cuts_the_result(g, chain):
    assert g.ids(chain, 2, mode="traverse", start=["a"]) == ["a", "b"]


def test_include_start_false(g, chain):
    assert g.ids(chain, mode="traverse", start=["a"], include_start=False, max_depth=1) == ["b", "g"]


def test_several_starts_take_the_nearest(g, chain):
    got = dict(g.search(chain, mode="traverse", start=["e", "a"], max_depth=1))
    assert got == {"a": 1.0, "e": 1.0, "b": D, "g": D, "f": D}


def test_unknown_starts_are_ignored(g, chain):
    assert g.ids(chain, mode="traverse", start=["nope"]) == []
    assert g.ids(chain, mode="traverse", start=["nope", "d"]) == ["d"]


def test_dfs_depths_follow_the_dfs_tree(g):
    # a -> b -> c and a -> c: DFS reaches c through b (depth 2), BFS directly (depth 1)
    index = g.make(max_depth=5)
    index.add([g.rec("a", "b", "c"), g.rec("b", "c"), g.rec("c", "d"), g.rec("d")])
    assert dict(g.search(index, mode="traverse", start=["a"], algorithm="bfs")) == pytest.approx({"a": 1, "b": D, "c": D, "d": D**2})
    assert dict(g.search(index, mode="traverse", start=["a"], algorithm="dfs")) == pytest.approx({"a": 1, "b": D, "c": D**2, "d": D**3})


def test_dfs_and_bfs_differ_under_max_nodes(g):
    # a -> b, a -> c, b -> d: BFS visits a, b, c; DFS goes deep first: a, b, d
    index = g.make(max_depth=5)
    index.add([g.rec("a", "b", "c"), g.rec("b", "d"), g.rec("c"), g.rec("d")])
    assert g.ids(index, mode="traverse", start=["a"], max_nodes=3) == ["a", "b", "c"]
    assert g.ids(index, mode="traverse", start=["a"], max_nodes=3, algorithm="dfs") == ["a", "b", "d"]


# -- directed / undirected / direction / relations ----------------------------------------


def test_directed_follows_links_forwards_only(g, chain):
    assert g.ids(chain, mode="traverse", start=["d"]) == ["d"]
    assert g.ids(chain, mode="traverse", start=["d"], direction="in") == ["d", "c", "b", "a"]
    assert g.ids(chain, mode="traverse", start=["c"], direction="both", max_depth=1) == ["c", "b", "d"]


def test_undirected_graph_walks_both_ways(g):
    index = g.make(directed=False, max_depth=10)
    index.add([g.rec("a", "b"), g.rec("b", "c"), g.rec("c")])
    assert g.ids(index, mode="traverse", start=["c"]) == ["c", "b", "a"]
    assert index.graph.number_of_edges() == 2
    index.add([g.rec("c", ("b", "back"))])  # links both ways: still one edge, both relations
    assert index.graph.number_of_edges() == 2
    assert index.graph.edges["b", "c"]["relations"] == {"related": 1.0, "back": 1.0}
    assert g.ids(index, mode="traverse", start=["a"], relations=["back"]) == ["a"]
    assert g.ids(index, mode="traverse", start=["c"], relations=["back"]) == ["c", "b"]


def test_relation_filter(g, chain):
    assert g.ids(chain, mode="traverse", start=["a"], relations=["x"]) == ["a", "g"]
    assert g.ids(chain, mode="traverse", start=["a"], relations=["related"]) == ["a", "b", "c", "e", "d", "f"]
    assert g.ids(chain, mode="traverse", start=["a"], relations=["nothing"]) == ["a"]


def test_multiple_relations_between_two_records(g):
    index = g.make()
    index.add([g.rec("a", ("b", "friend"), ("b", "colleague", 0.5)), g.rec("b")])
    assert index.graph.edges["a", "b"]["relations"] == {"friend": 1.0, "colleague": 0.5}
    assert g.ids(index, mode="traverse", start=["a"], relations=["colleague"]) == ["a", "b"]


# -- expand -------------------------------------------------------------------------------


def test_expand_keeps_the_best_score_over_seeds_and_paths(g, chain):
    got = dict(g.search(chain, mode="expand", seeds={"a": 1.0, "c": 0.5}, max_depth=3))
    # d: from a at 3 hops (0.343) or from c at 1 hop (0.35) -> 0.35
    assert got["d"] == pytest.approx(0.5 * D)
    # c: seed 0.5, or from a at 2 hops (0.49) -> 0.5
    assert got["c"] == pytest.approx(0.5)
    assert got["b"] == pytest.approx(D) and got["e"] == pytest.approx(D**2) and got["f"] == pytest.approx(D**3)
    scores = [s for _, s in g.search(chain, mode="expand", seeds={"a": 1.0, "c": 0.5}, max_depth=3)]
    assert scores == sorted(scores, reverse=True)


def test_expand_raw_is_hops_from_the_best_seed(chain):
    hits = {h.id: h.raw for h in chain.search(Query(extras={"graph": {"mode": "expand", "seeds": {"a": 1.0, "c": 0.5}, "max_depth": 3}}), 20)}
    assert hits["d"] == 1.0 and hits["c"] == 0.0 and hits["f"] == 3.0


def test_expand_seed_scores_above_one_and_without_seeds(g, chain):
    got = g.search(chain, mode="expand", seeds={"b": 4}, max_depth=1, include_seeds=False)
    assert got == [("c", pytest.approx(4 * D)), ("e", pytest.approx(4 * D))]


def test_expand_max_nodes(g, chain):
    assert g.ids(chain, mode="expand", seeds={"a": 1.0}, max_nodes=2) == ["a", "b"]


# -- path -----------------------------------------------------------------------------------


def test_path_mode(g, chain):
    assert g.search(chain, mode="path", source="a", target="f") == [("a", 1.0), ("b", D), ("e", pytest.approx(D**2)), ("f", pytest.approx(D**3))]
    assert g.ids(chain, mode="path", source="f", target="a") == []  # directed
    assert g.ids(chain, mode="path", source="f", target="a", direction="in") == ["f", "e", "b", "a"]
    assert g.ids(chain, mode="path", source="c", target="c") == ["c"]
    assert g.ids(chain, mode="path", source="a", target="zz") == []
    assert g.ids(chain, mode="path", source="a", target="d", max_depth=2) == []
    assert g.ids(chain, mode="path", source="a", target="d", max_depth=3) == ["a", "b", "c", "d"]
    assert g.ids(chain, 2, mode="path", source="a", target="d") == ["a", "b"]


def test_path_is_shortest_and_deterministic(g):
    # two shortest paths a-b-d and a-c-d: the one through the smaller id wins, whatever the order
    one = g.make()
    one.add([g.rec("a", "c", "b"), g.rec("c", "d"), g.rec("b", "d"), g.rec("d")])
    two = g.make()
    two.add([g.rec("d"), g.rec("b", "d"), g.rec("c", "d"), g.rec("a", "b", "c")])
    assert g.ids(one, mode="path", source="a", target="d") == g.ids(two, mode="path", source="a", target="d") == ["a", "b", "d"]
    one.add([g.rec("a", "c", "b", "d")])  # a direct link is shorter
    assert g.ids(one, mode="path", source="a", target="d") == ["a", "d"]


def test_path_relation_filter(g, chain):
    assert g.ids(chain, mode="path", source="a", target="g", relations=["related"]) == []
    assert g.ids(chain, mode="path", source="a", target="g", relations=["x"]) == ["a", "g"]


# -- pending links, removal, replacement -------------------------------------------------


def test_link_to_an_absent_target_waits_for_it(g):
    index = g.make()
    index.add([g.rec("a", "b", ("c", "cites"))])
    assert index.pending_links() == {"b": ["a"], "c": ["a"]}
    assert g.ids(index, mode="traverse", start=["a"]) == ["a"]
    index.add([g.rec("c")])
    assert index.pending_links() == {"b": ["a"]}
    assert index.graph.edges["a", "c"]["relations"] == {"cites": 1.0}
    index.add([g.rec("b")])
    assert index.pending_links() == {} and index.stats()["pending_links"] == 0
    assert g.ids(index, mode="traverse", start=["a"]) == ["a", "b", "c"]


def test_removing_a_target_makes_its_incoming_links_pending_again(g, chain):
    chain.remove(["c"])
    assert not chain.graph.has_node("c")
    assert chain.pending_links() == {"c": ["b"]}
    assert g.ids(chain, mode="traverse", start=["a"]) == ["a", "b", "g", "e", "f"]
    chain.add([g.rec("c", "d")])
    assert g.ids(chain, mode="traverse", start=["a"]) == ["a", "b", "g", "c", "e", "d", "f"]


def test_removing_a_source_forgets_its_pending_links(g):
    index = g.make()
    index.add([g.rec("a", "missing"), g.rec("b")])
    index.remove(["a", "never-there"])
    assert index.pending_links() == {}
    index.add([g.rec("missing")])
    assert index.graph.number_of_edges() == 0
    assert len(index) == 2


def test_remove_leaves_no_orphans(g):
    index = g.make(entity_extraction="rule")
    index.add([g.rec("a", "b", text="Alice met Bob"), g.rec("b", "a", text="Bob phoned Carol"), g.rec("c", text="Carol")])
    assert index.stats()["entities"] == 3
    index.remove(["a"])
    nodes = set(index.graph.nodes)
    assert ("entity", "alice") not in nodes and ("entity", "bob") in nodes
    index.remove(["b", "c"])
    assert index.graph.number_of_nodes() == 0 and index.graph.number_of_edges() == 0
    assert index.stats()["entities"] == 0 and index.pending_links() == {} and len(index) == 0


def test_readd_replaces_links(g):
    index = g.make()
    index.add([g.rec("a", "b"), g.rec("b"), g.rec("c")])
    index.add([g.rec("a", "c")])
    assert list(index.graph.successors("a")) == ["c"]
    assert index.pending_links() == {}


def test_duplicate_ids_in_a_batch_last_wins(g):
    index = g.make()
    index.add([g.rec("a", "b"), g.rec("b"), g.rec("c"), g.rec("a", "c")])
    assert len(index) == 3
    assert list(index.graph.successors("a")) == ["c"]


def test_batch_order_does_not_matter(g):
    records = [g.rec("a", "b"), g.rec("b", "c"), g.rec("c", "a"), g.rec("d", "a")]
    one, two = g.make(), g.make()
    one.add(records)
    two.add(records[::-1][:2])
    two.add(records[::-1][2:])
    assert set(one.graph.edges) == set(two.graph.edges)
    for start in "abcd":
        assert g.search(one, mode="traverse", start=[start]) == g.search(two, mode="traverse", start=[start])


# -- allowed -------------------------------------------------------------------------------


def test_allowed_never_leaks_and_does_not_walk_through_others(g, chain):
    allowed = {"a", "c", "d", "g"}
    for extras in (
        {"graph": {"mode": "traverse", "start": ["a"]}},
        {"graph": {"mode": "traverse", "start": ["a", "b", "c"], "algorithm": "dfs"}},
        {"graph": {"mode": "expand", "seeds": {"a": 1.0, "b": 1.0}}},
        {"graph": {"mode": "path", "source": "a", "target": "d"}},
    ):
        got = [h.id for h in chain.search(Query(extras=extras), 50, allowed)]
        assert set(got) <= allowed
    # b is outside: the walk from a stops there (c, d unreachable without passing b)
    assert g.ids(chain, allowed=allowed, mode="traverse", start=["a"]) == ["a", "g"]
    assert g.ids(chain, allowed=allowed, mode="path", source="a", target="d") == []
    assert g.ids(chain, allowed=allowed, mode="traverse", start=["b"]) == []


def test_pass_through_walks_through_others_but_never_returns_them(g, chain):
    allowed = {"a", "c", "d"}
    got = g.search(chain, allowed=allowed, mode="traverse", start=["a"], pass_through=True)
    assert got == [("a", 1.0), ("c", pytest.approx(D**2)), ("d", pytest.approx(D**3))]
    assert g.ids(chain, allowed=allowed, mode="path", source="a", target="d", pass_through=True) == ["a", "c", "d"]
    assert g.ids(chain, allowed=allowed, mode="expand", seeds={"b": 1.0}, pass_through=True) == ["c", "d"]
    assert g.ids(chain, allowed=set(), mode="traverse", start=["a"], pass_through=True) == []


def test_entity_nodes_are_never_returned(g):
    index = g.make(entity_extraction="rule", max_depth=4)
    index.add([g.rec("a", text="Alice"), g.rec("b", text="Alice and Bob"), g.rec("c", text="Bob")])
    got = g.ids(index, mode="traverse", start=["a"])
    assert got == ["a", "b", "c"]
    assert all(isinstance(i, str) for i in got)
    # a -> Alice -> b -> Bob -> c: entity hops count
    assert dict(g.search(index, mode="traverse", start=["a"])) == pytest.approx({"a": 1.0, "b": D**2, "c": D**4})


# -- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extras",
    [
        {"graph": {"mode": "walk"}},
        {"graph": {"mode": "traverse"}},
        {"graph": {"mode": "traverse", "start": []}},
        {"graph": {"mode": "traverse", "start": "a"}},
        {"graph": {"mode": "traverse", "start": ["a"], "max_depth": -1}},
        {"graph": {"mode": "traverse", "start": ["a"], "max_depth": "2"}},
        {"graph": {"mode": "traverse", "start": ["a"], "max_nodes": 0}},
        {"graph": {"mode": "traverse", "start": ["a"], "algorithm": "astar"}},
        {"graph": {"mode": "traverse", "start": ["a"], "relations": []}},
        {"graph": {"mode": "traverse", "start": ["a"], "direction": "up"}},
        {"graph": {"mode": "traverse", "start": ["a"], "include_start": "yes"}},
        {"graph": {"mode": "traverse", "start": ["a"], "depth": 2}},
        {"graph": {"mode": "traverse", "start": [""]}},
        {"graph": {"mode": "expand", "seeds": {}}},
        {"graph": {"mode": "expand", "seeds": {"a": float("nan")}}},
        {"graph": {"mode": "expand", "seeds": {"a": float("inf")}}},
        {"graph": {"mode": "expand", "seeds": {"a": -1.0}}},
        {"graph": {"mode": "expand", "seeds": {"a": "high"}}},
        {"graph": {"mode": "expand", "seeds": ["a"]}},
        {"graph": {"mode": "path", "source": "a"}},
        {"graph": {"mode": "path", "source": "a", "target": "b", "max_depth": 0}},
        {"graph": {"mode": "path", "source": "a", "target": "b", "algorithm": "bfs"}},
        {"graph": {"max_depth": -3}},
        {"graph": {"unknown": 1}},
        {"graph": {"mode": "text", "unknown": 1}},
    ],
)
def test_bad_extras_are_validation_errors(chain, extras):
    query = Query(text="Alice", extras=extras)
    with pytest.raises(ValidationError, match="graph index 'g': bad query extras"):
        chain.validate_query(query)
    with pytest.raises(ValidationError):
        chain.search(query, 5)


# -- the extras convention: the index reads extras["graph"] only ---------------------------


def test_foreign_extras_keys_are_ignored(g, chain):
    walk = {"mode": "traverse", "start": ["a"], "max_depth": 1}
    alone = [(h.id, h.score, h.raw) for h in chain.search(Query(extras={"graph": walk}), 10)]
    assert [i for i, _, _ in alone] == ["a", "b", "g"]
    for others in (
        {"faiss": {"nprobe": 4}},
        {"faiss": {"nprobe": 4}, "bm25": {"mode": "phrase", "whatever": True}},
        {"fifo": "not even a dict", "intent": {"name": "lookup"}, "recency": 3},
        {"mode": "path", "source": "a", "target": "d"},  # a top-level "mode" is not the graph's
    ):
        query = Query(extras={**others, "graph": walk})
        chain.validate_query(query)
        assert [(h.id, h.score, h.raw) for h in chain.search(query, 10)] == alone


def test_without_a_graph_key_the_query_is_a_text_query(g):
    index = g.make(entity_extraction="rule")
    index.add([g.rec("a", "b", text="Alice met Bob"), g.rec("b", text="Bob left"), g.rec("c", text="Carol")])
    plain = [(h.id, h.score) for h in index.search(Query(text="where is alice"), 10)]
    assert plain and plain[0] == ("a", 1.0)
    for extras in (
        {"bm25": {"mode": "phrase"}},
        {"faiss": {"nprobe": 4}, "sorted": {"mode": "range"}},
        {"mode": "traverse", "start": ["c"]},  # old-style top-level keys: someone else's, ignored
        {"graph": None},  # like no entry
        {"graph": {}},
    ):
        query = Query(text="where is alice", extras=extras)
        index.validate_query(query)
        assert [(h.id, h.score) for h in index.search(query, 10)] == plain
        # the default text mode still needs text, foreign extras or not
        with pytest.raises(ValidationError, match="no text"):
            index.validate_query(Query(extras=extras))


@pytest.mark.parametrize("value", ["traverse", ["traverse"], 3, True, ("mode", "traverse")])
def test_a_non_dict_under_graph_is_a_validation_error(chain, value):
    query = Query(text="Alice", extras={"graph": value, "faiss": {"nprobe": 4}})
    with pytest.raises(ValidationError, match=r"graph index 'g': bad query extras: extras\.graph must be a dict"):
        chain.validate_query(query)
    with pytest.raises(ValidationError, match=r"extras\.graph must be a dict"):
        chain.search(query, 5)


@pytest.mark.parametrize(
    ("mode", "where"),
    [
        ({"mode": "traverse", "start": ["a"], "depth": 2}, "extras.graph.depth"),
        ({"mode": "expand", "seeds": {"a": 1.0}, "nprobe": 4}, "extras.graph.nprobe"),
        ({"mode": "path", "source": "a", "target": "b", "algorithm": "bfs"}, "extras.graph.algorithm"),
        ({"unknown": 1}, "extras.graph.unknown"),
        ({"graph": {"mode": "traverse", "start": ["a"]}}, "extras.graph.graph"),  # nested once too often
        ({"mode": "walk"}, "extras.graph.mode"),
        ({"mode": "traverse"}, "extras.graph.start"),
        ({"mode": "traverse", "start": ["a"], "max_depth": -1}, "extras.graph.max_depth"),
        ({"mode": "expand", "seeds": {"a": -1.0}}, "extras.graph.seeds.a"),
    ],
)
def test_bad_keys_inside_graph_are_named(chain, mode, where):
    query = Query(text="Alice", extras={"graph": mode, "bm25": {"mode": "phrase"}})
    with pytest.raises(ValidationError, match=re.escape(f"graph index 'g': bad query extras: {where}")):
        chain.validate_query(query)
    with pytest.raises(ValidationError, match=re.escape(where)):
        chain.search(query, 5)


def test_bad_keys_name_the_fields_of_the_mode_given(chain):
    query = Query(extras={"graph": {"mode": "path", "source": "a", "target": "b", "algorithm": "bfs"}})
    with pytest.raises(
        ValidationError, match=re.escape("allowed in mode 'path': ['direction', 'max_depth', 'mode', 'pass_through', 'relations', 'source', 'target']")
    ):
        chain.validate_query(query)
    with pytest.raises(
        ValidationError, match=re.escape("extras.graph.mode: ") + ".*" + re.escape("allowed mode values: ['expand', 'path', 'text', 'traverse']")
    ):
        chain.validate_query(Query(extras={"graph": {"mode": "walk"}}))


def test_text_mode_needs_text(chain):
    for query in (Query(), Query(text="   ")):
        with pytest.raises(ValidationError, match="no text"):
            chain.validate_query(query)


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3"])
def test_bad_k(chain, k):
    with pytest.raises(ValidationError):
        chain.search(Query(extras={"graph": {"mode": "traverse", "start": ["a"]}}), k)


@pytest.mark.parametrize(
    "record",
    [
        Record(id="a", text="x", links=(Link("a"),)),
        Record(id="a", text="x", links=(Link(""),)),
        Record(id="a", text="x", links=(Link("b", ""),)),
        Record(id="a", text="x", links=(Link("b", "r", float("nan")),)),
        Record(id="a", text="x", links=(Link("b", "r", float("inf")),)),
        Record(id="a", text="x", links=("b",)),  # type: ignore[arg-type]
        Record(id="", text="x"),
        Record(id="a", text=None),  # type: ignore[arg-type]
    ],
)
def test_bad_records_are_rejected_before_any_change(g, record):
    index = g.make()
    index.add([g.rec("z")])
    with pytest.raises(ValidationError):
        index.validate([record])
    with pytest.raises(ValidationError):
        index.add([g.rec("y"), record])
    assert len(index) == 1 and index.graph.number_of_nodes() == 1


def test_empty_index_and_batches(g):
    index = g.make()
    index.add([])
    index.remove([])
    assert g.ids(index, mode="traverse", start=["a"]) == []
    assert index.search_batch([], 3) == []
    assert index.stats()["size"] == 0


def test_search_batch_equals_search(chain):
    queries = [Query(extras={"graph": {"mode": "traverse", "start": [s]}}) for s in "abc"] + [
        Query(extras={"graph": {"mode": "path", "source": "a", "target": "f"}})
    ]
    assert [[h.id for h in hits] for hits in chain.search_batch(queries, 5)] == [[h.id for h in chain.search(q, 5)] for q in queries]


def test_failed_add_changes_nothing(g, monkeypatch):
    index = g.make(entity_extraction="rule")
    index.add([g.rec("a", "b", text="Alice"), g.rec("b", text="Bob")])
    before = (sorted(map(str, index.graph.edges)), index.pending_links(), index.stats())

    def boom(text):
        if "Carol" in text:
            raise RuntimeError("extractor failed")
        return []

    monkeypatch.setattr(index._extractor, "extract", boom)
    with pytest.raises(RuntimeError):
        index.add([g.rec("a", "c", text="replaced"), g.rec("c", text="Carol")])
    assert (sorted(map(str, index.graph.edges)), index.pending_links(), index.stats()) == before


def test_shared_relation_dicts_are_never_changed(g):
    index = g.make()
    index.add([g.rec("x", "y"), g.rec("z", "y", ("y", "friend", 0.5)), g.rec("y")])
    assert index.graph.edges["x", "y"]["relations"] == {"related": 1.0}
    assert index.graph.edges["z", "y"]["relations"] == {"related": 1.0, "friend": 0.5}
    index.add([g.rec("x", ("y", "related"), ("y", "boss"))])
    assert index.graph.edges["z", "y"]["relations"] == {"related": 1.0, "friend": 0.5}
    assert index.graph.edges["x", "y"]["relations"] == {"related": 1.0, "boss": 1.0}
    assert g.ids(index, mode="traverse", start=["z"], relations=["boss"]) == ["z"]
