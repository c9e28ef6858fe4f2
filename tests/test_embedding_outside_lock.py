"""Texts are embedded outside the collection's lock (session 19): a search's query, an insert's new records.

An embedder may take milliseconds per text (MiniLM on the CPU); a search or an insert that
embedded under the collection's one lock held up every other search and write of the memory
meanwhile. A blocking embedder shows it: while one search (or insert) waits inside the
embedder, another search by vector (and an insert) complete, and the blocked call still
answers as before.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from memcore import Collection, Query
from memcore._plugins._host import get_registry
from memcore.embedders._embedder import HashingEmbedder, Space
from memcore.plugin import Embedder
from memcore.stores._sqlite import SQLiteStore


class GatedEmbedder(Embedder):
    """The hashing embedder; a text starting with "wait" blocks until ``gate`` is set. Counts the documents embedded."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.dim = self.inner.dim
        self.model_id = "gated-v1"
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.documents: list[str] = []

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.documents.extend(texts)
        if any(t.startswith("wait") for t in texts):
            self.entered.set()
            assert self.gate.wait(30), "the gate was never opened"
        return self.inner.embed_documents(texts)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        if any(t.startswith("wait") for t in texts):
            self.entered.set()
            assert self.gate.wait(30), "the gate was never opened"
        return self.inner.embed_queries(texts)


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[Collection, GatedEmbedder]]:
    embedder = GatedEmbedder()
    col = Collection(SQLiteStore(tmp_path), {"default": Space("default", embedder.dim, embedder, "gated")}, get_registry(), tmp_path)
    col.create_index("vec", "exact", space="default")
    col.insert([{"id": f"r{i}", "text": f"record number {i}"} for i in range(20)])
    try:
        yield col, embedder
    finally:
        embedder.gate.set()
        col.close()


def test_a_search_embedding_its_query_holds_up_no_other_search_or_write(gated: tuple[Collection, GatedEmbedder]) -> None:
    col, embedder = gated
    found: list[list[str]] = []
    failed: list[BaseException] = []

    def blocked() -> None:
        try:
            q = col.request(Query(text="wait for record number 3", k=3))
            found.append([h.id for h in col.search_index("vec", q, 3)])
        except BaseException as exc:  # reported by the test below
            failed.append(exc)

    thread = threading.Thread(target=blocked)
    thread.start()
    try:
        assert embedder.entered.wait(10)
        # the blocked search is inside its embedder: the lock is free for the others
        vector = embedder.inner.embed_queries(["record number 5"])[0]
        done = threading.Event()
        others: list[object] = []

        def other() -> None:
            others.append([h.id for h in col.search_index("vec", col.request(Query(vectors={"default": vector}, k=1)), 1)])
            others.append(col.insert({"id": "new", "text": "a record written meanwhile"}))
            done.set()

        worker = threading.Thread(target=other)
        worker.start()
        assert done.wait(10), "a search by vector and an insert waited for another search's embedding"
        worker.join(10)
        assert others == [["r5"], ["new"]]
    finally:
        embedder.gate.set()
        thread.join(30)
    assert not failed and found and found[0][0] == "r3"


def test_a_query_embedded_ahead_answers_as_one_embedded_under_the_lock(gated: tuple[Collection, GatedEmbedder]) -> None:
    """The same hits and scores whether the query's vector came ahead of the lock or with a vector given."""
    col, embedder = gated
    embedder.gate.set()
    text = "record number 7"
    ahead = col.search_index("vec", col.request(Query(text=text, k=5)), 5)
    given = col.search_index("vec", col.request(Query(text=text, vectors={"default": embedder.inner.embed_queries([text])[0]}, k=5)), 5)
    assert [(h.id, h.score) for h in ahead] == [(h.id, h.score) for h in given]
    assert ahead[0].id == "r7"


def test_an_insert_embedding_its_records_holds_up_no_search(gated: tuple[Collection, GatedEmbedder]) -> None:
    col, embedder = gated
    failed: list[BaseException] = []

    def blocked() -> None:
        try:
            col.insert({"id": "slow", "text": "wait for me, a new record"})
        except BaseException as exc:  # reported below
            failed.append(exc)

    thread = threading.Thread(target=blocked)
    thread.start()
    try:
        assert embedder.entered.wait(10)
        vector = embedder.inner.embed_queries(["record number 5"])[0]
        done = threading.Event()
        hits: list[list[str]] = []

        def search() -> None:
            hits.append([h.id for h in col.search_index("vec", col.request(Query(vectors={"default": vector}, k=1)), 1)])
            done.set()

        worker = threading.Thread(target=search)
        worker.start()
        assert done.wait(10), "a search waited for an insert's embedding"
        worker.join(10)
        assert hits == [["r5"]] and col.count() == 20  # the insert is not committed yet
    finally:
        embedder.gate.set()
        thread.join(30)
    assert not failed and col.count() == 21
    stored = col.get("slow")
    assert np.allclose(stored.vectors["default"], embedder.inner.embed_documents(["wait for me, a new record"])[0])


def test_an_insert_embeds_only_what_is_new_and_reports_its_errors_as_before(gated: tuple[Collection, GatedEmbedder]) -> None:
    """Records already stored are not embedded again; a conflicting record and an unknown
    index raise what they raised, and nothing is written."""
    from memcore.errors import DuplicateIdError, NotFoundError

    col, embedder = gated
    embedder.gate.set()
    embedder.documents.clear()
    assert col.insert([{"id": "r1", "text": "record number 1"}, {"id": "n1", "text": "a new one"}]) == ["r1", "n1"]
    assert embedder.documents == ["a new one"]
    with pytest.raises(DuplicateIdError):
        col.insert([{"id": "r2", "text": "other content"}, {"id": "n2", "text": "another new one"}])
    with pytest.raises(NotFoundError):
        col.insert({"id": "n3", "text": "into nowhere"}, indexes=["no-such-index"])
    assert col.count() == 21 and col.get_many(["n2", "n3"]) == [None, None]
