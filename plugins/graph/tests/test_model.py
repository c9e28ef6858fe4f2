"""Incremental upkeep equals a fresh build: random adds, re-adds and removes on small graphs."""

from __future__ import annotations

import random

import pytest

from memcore import Link, Query, Record

NAMES = ["Alice", "Bob", "Carol", "Dave", "'deep work'", "Bank of America"]
IDS = [f"r{i}" for i in range(12)]
RELATIONS = ["related", "cites", "next"]


def random_record(rng: random.Random, rid: str) -> Record:
    targets = rng.sample([i for i in IDS if i != rid], rng.randint(0, 4))
    links = [Link(t, rng.choice(RELATIONS), rng.choice([1.0, 0.5])) for t in targets]
    words = rng.sample(NAMES, rng.randint(0, 2))
    return Record.create(" and ".join(words) + f" note {rid}" if words else f"note {rid}", id=rid, links=links)


def snapshot(index):
    graph = index.graph
    edges = sorted((str(u), str(v), tuple(sorted(d["relations"].items()))) for u, v, d in graph.edges(data=True))
    if not graph.is_directed():
        edges = sorted(tuple(sorted(e[:2])) + (e[2],) for e in edges)
    queries = [
        {"graph": {"mode": "traverse", "start": IDS[:3], "max_depth": 3}},
        {"graph": {"mode": "traverse", "start": [IDS[5]], "algorithm": "dfs", "direction": "both", "max_nodes": 6}},
        {"graph": {"mode": "expand", "seeds": {IDS[1]: 1.0, IDS[7]: 0.6}, "relations": ["cites", "mentions"]}},
        {"graph": {"mode": "path", "source": IDS[0], "target": IDS[11], "direction": "both"}},
        {},
    ]
    results = [
        [
            (h.id, round(h.score, 12), h.raw)
            for h in index.search(Query(text="what about alice and bank of america", extras=q), 20, set(IDS[::2]) if i % 2 else None)
        ]
        for i, q in enumerate(queries)
    ]
    return sorted(map(str, graph.nodes)), edges, index.pending_links(), index.stats(), results


@pytest.mark.parametrize("options", [{}, {"directed": False}, {"entity_nodes": False}], ids=["directed", "undirected", "no-entity-nodes"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_equals_fresh_build(g, tmp_path, options, seed):
    rng = random.Random(seed)
    index = g.make(entity_extraction="rule", max_depth=3, **options)
    current: dict[str, Record] = {}
    for step in range(150):
        op = rng.random()
        if op < 0.6:
            batch = [random_record(rng, rng.choice(IDS)) for _ in range(rng.randint(1, 3))]
            index.add(batch)
            for r in batch:
                current[r.id] = r
        else:
            gone = rng.sample(IDS, rng.randint(1, 3))
            index.remove(gone)
            for rid in gone:
                current.pop(rid, None)
        if step % 10 == 9:
            fresh = g.make(entity_extraction="rule", max_depth=3, **options)
            fresh.add(list(current.values()))
            assert snapshot(index) == snapshot(fresh), f"step {step}"
            assert len(index) == len(current)
    directory = tmp_path / "saved"
    directory.mkdir()
    index.save(directory)
    loaded = g.make(entity_extraction="rule", max_depth=3, **options)
    loaded.load(directory)
    assert snapshot(loaded) == snapshot(index)
