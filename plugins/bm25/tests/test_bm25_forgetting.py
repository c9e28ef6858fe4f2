"""Forgetting in the ``bm25`` index (issue 20): a save after a removal merges, so the files
keep no tombstone, id or term of a removed document; a merge drops the terms no live
document uses and still equals a fresh index over the live documents (docs/architecture.md §9)."""

from __future__ import annotations

import os

import pytest

import memcore
from memcore.plugin import IndexContext
from memcore import Query, Record
from memcore.testing import assert_no_bytes, check_scope_forgotten, find_bytes, make_texts

from memcore_bm25.bm25 import BM25Config, BM25Index

SETTINGS = {
    "indexes": {"keywords": {"kind": "bm25"}},
    "pipeline": [{"kind": "recall", "index": "keywords"}, {"kind": "limit"}],
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("MEMCORE_") and key != "MEMCORE_DEFAULT_EMBEDDER":  # the suite's default embedder (conftest.py) stays
            monkeypatch.delenv(key)


@pytest.mark.parametrize("merge_threshold", [None, 1])
@pytest.mark.parametrize("rounds", [1, 3])
def test_memory_with_bm25_forgets_a_scope(tmp_path, merge_threshold, rounds):
    """Fresh segment (no merge yet) and base segment (merged at every write) alike."""
    settings = {**SETTINGS, "indexes": {"keywords": {"kind": "bm25", "merge_threshold": merge_threshold}}}
    check_scope_forgotten(lambda path: memcore.open(settings, path=path), tmp_path, rounds=rounds)


def test_metadata_fields_are_forgotten_too(tmp_path):
    settings = {**SETTINGS, "indexes": {"keywords": {"kind": "bm25", "fields": ["text", "metadata.note"]}}}
    check_scope_forgotten(lambda path: memcore.open(settings, path=path), tmp_path)


def _index(**options) -> BM25Index:
    return BM25Index(BM25Config(**options), IndexContext("kw"))


def _results(index: BM25Index, queries: list[str]) -> list[list[tuple[str, float]]]:
    return [[(h.id, round(h.score, 5)) for h in index.search(Query(text=q), 10)] for q in queries]


@pytest.mark.parametrize("stemmer", ["english", None])
@pytest.mark.parametrize("method", ["lucene", "bm25+"])
def test_merge_after_removals_equals_a_fresh_index(stemmer, method):
    texts = make_texts(300, seed=7)
    records = [Record.create(f"{t} zqxonly{i}", id=f"r{i}") for i, t in enumerate(texts)]
    index = _index(stemmer=stemmer, method=method, merge_threshold=50)
    index.add(records[:200])
    index.search(Query(text="apple"), 5)  # merged: a base segment
    index.remove([f"r{i}" for i in range(0, 200, 3)])
    index.add(records[200:])
    index.remove([f"r{i}" for i in range(201, 300, 4)])
    assert index.holds_removed
    index.merge()
    assert not index.holds_removed
    live = [r for i, r in enumerate(records) if not (i < 200 and i % 3 == 0) and not (i > 200 and (i - 201) % 4 == 0)]
    fresh = _index(stemmer=stemmer, method=method, merge_threshold=50)
    fresh.add(live)
    fresh.merge()
    assert sorted(index._tokenizer.terms()) == sorted(fresh._tokenizer.terms())
    queries = ["apple river", "zqxonly3", "zqxonly4 zqxonly5", "garden window coffee", "zebra"] + texts[:20]
    assert _results(index, queries) == _results(fresh, queries)


def test_save_after_a_removal_keeps_nothing_of_it(tmp_path):
    """Below the merge threshold a save merges anyway when a removal left something."""
    index = _index()
    index.add([Record.create("a plain text about apples", id="keep"), Record.create("zqxsecretword in the zqxdiary", id="zqxgone")])
    index.save(tmp_path)
    assert find_bytes(tmp_path, ["zqxsecretword", "zqxgone"])
    index.remove(["zqxgone"])
    index.save(tmp_path)
    assert_no_bytes(tmp_path, ["zqxsecretword", "zqxdiari", "zqxgone"])
    again = _index()
    again.load(tmp_path)
    assert [h.id for h in again.search(Query(text="apples"), 5)] == ["keep"]
    assert again.search(Query(text="zqxsecretword"), 5) == []


def test_save_without_removals_does_not_merge(tmp_path):
    index = _index()
    index.add([Record.create(t, id=f"r{i}") for i, t in enumerate(make_texts(20, seed=1))])
    index.save(tmp_path)
    assert index.merges == 0 and not index.holds_removed
