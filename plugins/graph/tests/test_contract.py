"""The memcore IndexContract on the graph index, in its main query modes."""

from __future__ import annotations

import pytest

from memcore import Query, Record
from memcore.testing import IndexContract, make_texts
from memcore_graph import GraphIndexConfig
from memcore_graph.index import GraphIndex


class TestGraphTraverse(IndexContract):
    """A traverse from a record ranks that record first (depth 0, score 1.0).

    The contract's records link each record to the previous one (relation ``next``); the
    queries walk those links backwards and forwards from the record.
    """

    @pytest.fixture(params=[True, False], ids=["directed", "undirected"])
    def make_index(self, request):
        config = GraphIndexConfig(directed=request.param, max_depth=3)
        return lambda context: GraphIndex(config, context)

    def query_for(self, index, record):
        return Query(text=record.text, extras={"graph": {"mode": "traverse", "start": [record.id], "direction": "both"}})

    def random_queries(self, index, n, seed=1):
        # start ids the index may or may not hold (unknown ones are ignored)
        return [Query(extras={"graph": {"mode": "traverse", "start": [f"r{(seed * 7 + 11 * i) % 40}"], "algorithm": ("bfs", "dfs")[i % 2]}}) for i in range(n)]


class TestGraphExpand(IndexContract):
    """Expansion from one seed of score 1.0: the seed comes first."""

    @pytest.fixture
    def make_index(self):
        return lambda context: GraphIndex(GraphIndexConfig(decay=0.5, entity_nodes=False), context)

    def query_for(self, index, record):
        return Query(extras={"graph": {"mode": "expand", "seeds": {record.id: 1.0, "r0": 0.25}, "direction": "both"}})

    def random_queries(self, index, n, seed=1):
        return [Query(extras={"graph": {"mode": "expand", "seeds": {f"r{(seed + 13 * i) % 40}": 0.5 + i}, "max_depth": i % 3}}) for i in range(n)]


class TestGraphText(IndexContract):
    """The default text mode: each record's unique word is capitalised, so it is an entity
    of that record, and the record's own text finds it first (seed score 1.0)."""

    @pytest.fixture(params=[True, False], ids=["entity-nodes", "no-entity-nodes"])
    def make_index(self, request):
        config = GraphIndexConfig(entity_nodes=request.param)
        return lambda context: GraphIndex(config, context)

    def records_for(self, index, n, *, start=0, seed=None):
        records = super().records_for(index, n, start=start, seed=seed)
        return [Record.create(r.text[0].upper() + r.text[1:], id=r.id, metadata=r.metadata, links=r.links) for r in records]

    def random_queries(self, index, n, seed=1):
        texts = make_texts(n, seed=self.seed + 1000 + seed, start=10_000)
        # capitalised pseudo-words no record mentions, plus a few stored ones
        return [Query(text=t.title() + (" Kakaka" if i % 2 else "")) for i, t in enumerate(texts)]


class TestGraphTextWithForeignExtras(TestGraphText):
    """The text mode again, every query carrying other indexes' modes in ``extras``: the
    graph index reads ``extras["graph"]`` only, so nothing changes."""

    query_extras = {"faiss": {"nprobe": 4}, "bm25": {"mode": "phrase"}, "mode": "traverse"}

    def random_queries(self, index, n, seed=1):
        return [q.evolve(extras=dict(self.query_extras)) for q in super().random_queries(index, n, seed)]
