"""Texts are embedded outside the collection's lock (session 19): a search's query, an insert's new records.

An embedder may take milliseconds per text (MiniLM on the CPU); a search or an insert that
embedded under the collection's one lock held up every other search and write of the memory
meanwhile. A blocking embedder shows it: while one search (or insert) waits inside the
embedder, another search by vector (and an insert) complete, and the blocked call still
answers as before.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

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


def completes(fn: Callable[[], Any], what: str) -> Any:
    """``fn()`` run in another thread, which must finish within 10 s (else it waited for the blocked call)."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(fn()))
    worker.start()
    worker.join(10)
    assert out, what
    return out[0]


@contextmanager
def blocked_in_embedder(embedder: GatedEmbedder, call: Callable[[], Any]) -> Iterator[list[Any]]:
    """Run ``call`` in a thread until it is blocked inside the embedder; yield, then let it go
    on; the list holds its value (or its exception) once it has finished."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # checked by the test
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert embedder.entered.wait(10)
        yield outcome
    finally:
        embedder.gate.set()
        thread.join(30)


def by_vector(col: Collection, embedder: GatedEmbedder, text: str) -> list[str]:
    """The ids of the best hit of a search by ``text``'s vector (nothing to embed)."""
    vector = embedder.inner.embed_queries([text])[0]
    return [h.id for h in col.search_index("vec", col.request(Query(vectors={"default": vector}, k=1)), 1)]


def test_a_search_embedding_its_query_holds_up_no_other_search_or_write(gated: tuple[Collection, GatedEmbedder]) -> None:
    col, embedder = gated
    search = lambda: [h.id for h in col.search_index("vec", col.request(Query(text="wait for record number 3", k=3)), 3)]  # noqa: E731
    with blocked_in_embedder(embedder, search) as outcome:
        assert completes(lambda: by_vector(col, embedder, "record number 5"), "a search by vector waited for another search's embedding") == ["r5"]
        assert completes(lambda: col.insert({"id": "new", "text": "a record written meanwhile"}), "an insert waited for a search's embedding") == ["new"]
    assert outcome and outcome[0][0] == "r3"


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
    with blocked_in_embedder(embedder, lambda: col.insert({"id": "slow", "text": "wait for me, a new record"})) as outcome:
        assert completes(lambda: by_vector(col, embedder, "record number 5"), "a search waited for an insert's embedding") == ["r5"]
        assert col.count() == 20  # the insert is not committed yet
    assert outcome == [["slow"]] and col.count() == 21
    assert np.allclose(col.get("slow").vectors["default"], embedder.inner.embed_documents(["wait for me, a new record"])[0])


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
