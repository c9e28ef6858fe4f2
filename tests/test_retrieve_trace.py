"""A traced ``retrieve`` does each piece of work once: one Query object, one parse of the
``where`` filter (however many recall stages), one read of the candidates' records shared
by the rerank stage and the record attachment."""

from __future__ import annotations

from collections import Counter

import pytest

import memcore
import memcore.model._query as records_module
from memcore import Query


@pytest.fixture
def memory(tmp_path):
    settings = {
        "path": str(tmp_path / "m"),
        "indexes": {"vector": {"kind": "exact", "space": "default"}, "ip": {"kind": "exact", "space": "default", "metric": "ip"}},
        "pipeline": [
            {"kind": "recall", "index": "vector", "over_fetch": 2.0},
            {"kind": "recall", "index": "ip", "over_fetch": 2.0},
            {"kind": "fuse"},
            {"kind": "rerank", "keyword_weight": 0.5},
            {"kind": "limit"},
        ],
    }
    with memcore.open(settings) as m:
        for i in range(30):
            m.insert(f"note {i} about {'cats' if i % 2 else 'dogs'} and the garden", metadata={"n": i, "even": i % 2 == 0}, scope={"user_id": "u1"})
        yield m


@pytest.fixture
def trace(monkeypatch, memory):
    counts: Counter[str] = Counter()
    post_init = Query.__post_init__
    parse = records_module.parse_filter
    store = memory.collection.store
    get, texts = store.get, store.texts

    def counted_post_init(self):
        counts["query built"] += 1
        post_init(self)

    def counted_parse(where):
        counts["filter parsed"] += 1
        return parse(where)

    def counted_get(ids, *args, **kwargs):
        counts["store reads"] += 1
        counts["ids read"] += len(ids)
        return get(ids, *args, **kwargs)

    def counted_texts(ids, *args, **kwargs):
        counts["store reads"] += 1
        counts["ids read"] += len(ids)
        return texts(ids, *args, **kwargs)

    monkeypatch.setattr(Query, "__post_init__", counted_post_init)
    monkeypatch.setattr(records_module, "parse_filter", counted_parse)
    monkeypatch.setattr(store, "get", counted_get)
    monkeypatch.setattr(store, "texts", counted_texts)
    return counts


def test_a_retrieve_does_each_piece_of_work_once(memory, trace):
    results = memory.retrieve("cats in the garden", where={"even": False}, k=5, scope={"user_id": "u1"})
    assert len(results) == 5 and all(r["metadata"]["even"] is False for r in results)
    assert trace["query built"] == 1  # the scope goes into the one query, not a copy
    assert trace["filter parsed"] == 1  # two recall stages, one parse
    assert trace["store reads"] == 1  # the rerank's read serves the attachment too
    assert trace["ids read"] <= 20  # the fused candidates (2 x k per list), each read once


def test_query_parses_its_filter_once():
    calls = []
    parse = records_module.parse_filter
    q = Query(text="x", where={"n": {"$gt": 3}})
    records_module.parse_filter, original = (lambda w: calls.append(w) or parse(w)), records_module.parse_filter
    try:
        assert q.parsed_where() is q.parsed_where()
        assert len(calls) == 1
        assert q.evolve(where={"n": 1}).parsed_where() is not q.parsed_where()  # a new filter is parsed again
    finally:
        records_module.parse_filter = original
