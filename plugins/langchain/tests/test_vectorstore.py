"""MemcoreVectorStore and MemcoreRetriever beyond LangChain's standard suites: memcore
filters, memcore's MMR, scopes, the memory's own embedder, provenance, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

import memcore
from memcore import FilterError, ValidationError
from memcore_langchain import MemcoreEmbeddings, MemcoreRetriever, MemcoreVectorStore

HASHING = {"store": {"kind": "memory"}, "spaces": {"default": {"embedder": "hashing"}}}
BOOKS = [
    ("A space opera about a lost colony ship", {"genre": "sf", "year": 1999}),
    ("A detective story in foggy London", {"genre": "crime", "year": 2004}),
    ("Robots rebel on a mining colony ship", {"genre": "sf", "year": 2012}),
    ("A quiet novel about a baker in Lyon", {"genre": "literary", "year": 2018}),
]


@pytest.fixture
def store():
    vectorstore = MemcoreVectorStore(config=HASHING)
    vectorstore.add_texts([t for t, _ in BOOKS], [m for _, m in BOOKS], ids=["a", "b", "c", "d"])
    yield vectorstore
    vectorstore.close()


def test_the_memorys_own_embedder_serves_langchain(store):
    assert isinstance(store.embeddings, MemcoreEmbeddings)
    assert len(store.embeddings.embed_query("colony")) == store.memory.collection.spaces["default"].dim
    assert store.similarity_search("colony ship robots", k=1)[0].id == "c"


def test_memcore_where_filters(store):
    found = store.similarity_search("colony ship", k=4, filter={"genre": "sf", "year": {"$gte": 2000}})
    assert [d.id for d in found] == ["c"]
    assert {d.id for d in store.similarity_search("novel", k=4, where={"$or": [{"genre": "crime"}, {"year": 2018}]})} == {"b", "d"}
    with pytest.raises(ValidationError, match="once"):
        store.similarity_search("x", filter={"genre": "sf"}, where={"genre": "sf"})
    with pytest.raises(FilterError):
        store.similarity_search("x", filter={"year": {"$nope": 1}})


def test_scores_and_relevance_scores(store):
    scored = store.similarity_search_with_score("colony ship", k=4)
    assert [s for _, s in scored] == sorted((s for _, s in scored), reverse=True)
    relevance = store.similarity_search_with_relevance_scores("colony ship", k=4)
    assert all(0.0 <= r <= 1.0 for _, r in relevance)


def test_mmr_prefers_diversity_over_near_duplicates():
    store = MemcoreVectorStore(config=HASHING)
    store.add_texts(["colony ship robots", "colony ship robots again", "a baker in Lyon"], ids=["x", "y", "z"])
    assert [d.id for d in store.similarity_search("colony ship robots", k=2)] == ["x", "y"]
    assert [d.id for d in store.max_marginal_relevance_search("colony ship robots", k=2, fetch_k=3, lambda_mult=0.3)] == ["x", "z"]
    retriever = store.as_retriever(search_type="mmr", search_kwargs={"k": 2, "fetch_k": 3, "lambda_mult": 0.3})
    assert [d.id for d in retriever.invoke("colony ship robots")] == ["x", "z"]
    store.close()


def test_a_scope_is_a_tenant_boundary():
    with memcore.open(HASHING) as memory:
        alice = MemcoreVectorStore(memory=memory, scope={"user_id": "alice"})
        bob = MemcoreVectorStore(memory=memory, scope={"user_id": "bob"})
        alice.add_texts(["alice's secret garden"], ids=["a1"])
        bob.add_texts(["bob's boat"], ids=["b1"])
        assert [d.id for d in alice.similarity_search("garden boat", k=5)] == ["a1"]
        assert alice.get_by_ids(["b1"]) == []
        alice.delete(["b1"])  # unknown to alice: ignored, bob's document stays
        assert [d.id for d in bob.get_by_ids(["b1"])] == ["b1"]
        alice.delete()  # everything of alice's, nothing of bob's
        assert memory.count() == 1 and memory.get("b1").scope.user_id == "bob"


def test_from_texts_on_disk_and_reopen(tmp_path):
    embedding = DeterministicFakeEmbedding(size=8)
    store = MemcoreVectorStore.from_texts(["one", "two"], embedding, [{"n": 1}, {"n": 2}], ids=["1", "2"], path=tmp_path / "m")
    store.close()
    reopened = MemcoreVectorStore(embedding=embedding, path=tmp_path / "m")
    assert reopened.get_by_ids(["2", "1"]) == [Document(id="2", page_content="two", metadata={"n": 2}), Document(id="1", page_content="one", metadata={"n": 1})]
    reopened.close()


def test_bad_input_is_a_typed_error_and_changes_nothing(store):
    with pytest.raises(ValidationError):
        store.similarity_search("colony", k=0)
    with pytest.raises(ValidationError, match="unknown search option"):
        store.similarity_search("colony", fetch_k=3)
    with pytest.raises(ValidationError, match="metadatas"):
        store.add_texts(["x", "y"], [{"a": 1}])
    with pytest.raises(ValidationError):
        store.similarity_search_by_vector([float("nan")] * store.memory.collection.spaces["default"].dim)
    with pytest.raises(ValidationError, match="not both"):
        MemcoreVectorStore(memory=store.memory, config=HASHING)
    assert store.memory.count() == 4


def test_the_retriever_runs_the_pipeline_with_provenance(store):
    retriever = MemcoreRetriever(memory=store.memory, k=2, where={"genre": "sf"})
    documents = retriever.invoke("colony ship")
    assert {d.id for d in documents} == {"a", "c"}
    provenance = documents[0].metadata["memcore"]
    assert provenance["score"] >= documents[1].metadata["memcore"]["score"]
    assert provenance["contributions"] and provenance["contributions"][0]["rank"] == 1
    assert documents[0].metadata["genre"] == "sf"


def test_the_retriever_can_ask_the_service(store):
    documents = MemcoreRetriever(memory=store.memory, via="service", k=1).invoke("a baker in Lyon")
    assert [d.id for d in documents] == ["d"] and documents[0].metadata["memcore"]["source"] == "service"


def test_the_retriever_confines_a_scope():
    with memcore.open(HASHING) as memory:
        memory.insert("alice likes tea", scope={"user_id": "alice"})
        memory.insert("bob likes tea", scope={"user_id": "bob"})
        found = MemcoreRetriever(memory=memory, scope={"user_id": "bob"}, k=5).invoke("tea")
        assert [d.page_content for d in found] == ["bob likes tea"]


def test_vectors_from_langchain_embeddings_are_what_the_memory_stores(tmp_path):
    embedding = DeterministicFakeEmbedding(size=6)
    store = MemcoreVectorStore(embedding=embedding, path=tmp_path / "m")
    store.add_texts(["hello"], ids=["h"])
    stored = store.memory.get("h").vectors["default"]
    np.testing.assert_allclose(stored, np.asarray(embedding.embed_documents(["hello"])[0], dtype=np.float32), rtol=1e-6)
    store.close()
