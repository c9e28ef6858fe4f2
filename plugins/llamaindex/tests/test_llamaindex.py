"""memcore-llamaindex against llama-index-core itself (offline): the vector store under
VectorStoreIndex (checked against LlamaIndex's SimpleVectorStore), filters, MMR, deletes,
the retriever, and the memory block inside an agent's Memory."""

from __future__ import annotations

import asyncio
import hashlib
import re

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory as AgentMemory
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

import memcore
from memcore import FilterError, ValidationError
from memcore_llamaindex import MemcoreMemoryBlock, MemcoreRetriever, MemcoreVectorStore

DIM = 256
HASHING = {"store": {"kind": "memory"}, "spaces": {"default": {"embedder": "hashing"}}}


class WordHashEmbedding(BaseEmbedding):
    """A deterministic bag-of-words embedding (offline): texts sharing words are close."""

    def _vector(self, text: str) -> list[float]:
        v = np.zeros(DIM)
        for word in re.findall(r"\w+", text.lower()):
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
        norm = np.linalg.norm(v)
        return (v / norm if norm else v).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)


DOCS = [
    Document(text="The lost colony ship drifts past Jupiter", metadata={"genre": "sf", "year": 1999}, doc_id="d1"),
    Document(text="A detective walks through foggy London", metadata={"genre": "crime", "year": 2004}, doc_id="d2"),
    Document(text="Robots rebel on the colony ship near Mars", metadata={"genre": "sf", "year": 2012}, doc_id="d3"),
    Document(text="A baker in Lyon bakes bread at dawn", metadata={"genre": "literary", "year": 2018}, doc_id="d4"),
]


@pytest.fixture
def store():
    vector_store = MemcoreVectorStore(embed_dim=DIM, config={"store": {"kind": "memory"}})
    yield vector_store
    vector_store.close()


def index_over(vector_store):
    context = StorageContext.from_defaults(vector_store=vector_store)
    return VectorStoreIndex.from_documents(DOCS, storage_context=context, embed_model=WordHashEmbedding())


def test_retrieval_under_vectorstoreindex_matches_llamaindexs_own_store(store):
    ours = index_over(store).as_retriever(similarity_top_k=3)
    reference = index_over(SimpleVectorStore()).as_retriever(similarity_top_k=3)
    for question in ["colony ship", "foggy London detective", "bread in Lyon"]:
        got, want = ours.retrieve(question), reference.retrieve(question)
        # the same nodes with the same scores (the order of exact ties, and which of the
        # unrelated nodes at score 0 fill the list, are unspecified)
        assert [round(n.score, 5) for n in got] == [round(n.score, 5) for n in want]
        assert sorted((round(n.score, 5), n.node.get_content()) for n in got if n.score > 0) == sorted(
            (round(n.score, 5), n.node.get_content()) for n in want if n.score > 0
        )
        assert [n.score for n in got] == sorted((n.score for n in got), reverse=True)
        assert got[0].node.metadata == want[0].node.metadata and got[0].node.ref_doc_id == want[0].node.ref_doc_id


def test_a_new_store_object_over_the_same_directory_serves_the_index(tmp_path):
    first = MemcoreVectorStore(embed_dim=DIM, path=tmp_path / "m")
    index_over(first)
    first.close()
    again = MemcoreVectorStore(embed_dim=DIM, path=tmp_path / "m")
    index = VectorStoreIndex.from_vector_store(again, embed_model=WordHashEmbedding())
    assert index.as_retriever(similarity_top_k=1).retrieve("Robots on Mars")[0].node.get_content().startswith("Robots rebel")
    again.close()


def test_metadata_filters_run_inside_the_search(store):
    index = index_over(store)
    sf_after_2000 = MetadataFilters(filters=[MetadataFilter(key="genre", value="sf"), MetadataFilter(key="year", value=2000, operator=FilterOperator.GT)])
    found = index.as_retriever(similarity_top_k=4, filters=sf_after_2000).retrieve("colony ship")
    assert [n.node.metadata["year"] for n in found] == [2012]
    either = MetadataFilters(
        filters=[MetadataFilter(key="genre", value=["crime", "literary"], operator=FilterOperator.IN), MetadataFilter(key="year", value=1999)],
        condition=FilterCondition.OR,
    )
    assert len(index.as_retriever(similarity_top_k=4, filters=either).retrieve("anything")) == 3
    with pytest.raises(FilterError, match="text_match"):
        store.query(
            VectorStoreQuery(
                query_embedding=[0.1] * DIM, filters=MetadataFilters(filters=[MetadataFilter(key="genre", value="s", operator=FilterOperator.TEXT_MATCH)])
            )
        )


def test_mmr_mode_prefers_diversity(store):
    embed = WordHashEmbedding()
    index = VectorStoreIndex.from_documents(
        [Document(text="colony ship robots", doc_id="a"), Document(text="colony ship robots again", doc_id="b"), Document(text="a baker in Lyon", doc_id="c")],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed,
    )
    plain = index.as_retriever(similarity_top_k=2).retrieve("colony ship robots")
    diverse = index.as_retriever(similarity_top_k=2, vector_store_query_mode="mmr", vector_store_kwargs={"mmr_threshold": 0.3}).retrieve("colony ship robots")
    assert [n.node.ref_doc_id for n in plain] == ["a", "b"]
    assert [n.node.ref_doc_id for n in diverse] == ["a", "c"]


def test_delete_by_document_nodes_and_clear(store):
    index = index_over(store)
    index.delete_ref_doc("d2")
    assert {n.ref_doc_id for n in store.get_nodes()} == {"d1", "d3", "d4"}
    d1_nodes = store.get_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="year", value=1999)]))
    store.delete_nodes([d1_nodes[0].node_id, "no-such-node"])
    assert {n.ref_doc_id for n in store.get_nodes()} == {"d3", "d4"}
    store.clear()
    assert store.get_nodes() == [] and store.client.count() == 0


def test_bad_input_is_a_typed_error(store):
    with pytest.raises(ValidationError, match="embed_dim"):
        MemcoreVectorStore(embed_dim=0)
    with pytest.raises(ValidationError, match="query_embedding"):
        store.query(VectorStoreQuery(query_str="x"))
    with pytest.raises(ValidationError, match="not supported"):
        store.query(VectorStoreQuery(query_embedding=[0.1] * DIM, mode=VectorStoreQueryMode.SVM))
    with pytest.raises(ValidationError, match="dimension|dim"):
        store.query(VectorStoreQuery(query_embedding=[0.1] * (DIM + 1)))


def test_hybrid_mode_runs_the_memorys_pipeline(tmp_path):
    store = MemcoreVectorStore(embed_dim=DIM, path=tmp_path / "m", config={"pipeline": "basic"})
    index_over(store)
    vector = WordHashEmbedding()._vector("colony ship")
    result = store.query(VectorStoreQuery(query_str="colony ship", mode=VectorStoreQueryMode.HYBRID, similarity_top_k=2, query_embedding=vector))
    assert len(result.ids) == len(result.nodes) == len(result.similarities) == 2
    default = store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=2))
    assert result.ids == default.ids  # the basic pipeline is the dense search
    with pytest.raises(ValidationError, match="no embedder"):  # a memory without its own embedder needs LlamaIndex's vector
        store.query(VectorStoreQuery(query_str="colony ship", mode=VectorStoreQueryMode.HYBRID, similarity_top_k=2))
    store.close()


def test_the_retriever_runs_a_pipeline_or_a_service_with_provenance():
    with memcore.open(HASHING) as memory:
        memory.insert(["Alice works at the bakery", "Bob adopted a cat", "Alice bakes bread daily"])
        nodes = MemcoreRetriever(memory, k=2).retrieve("Alice bakery")
        assert nodes[0].node.get_content() == "Alice works at the bakery" and nodes[0].score >= nodes[1].score
        assert nodes[0].node.metadata["memcore"]["contributions"][0]["rank"] == 1
        assert MemcoreRetriever(memory, k=1, via="service").retrieve("a cat")[0].node.get_content() == "Bob adopted a cat"
        with pytest.raises(ValidationError):
            MemcoreRetriever(memory, k=0)


def test_the_memory_block_remembers_flushed_messages_and_recalls_them():
    with memcore.open(HASHING) as memory:
        block = MemcoreMemoryBlock(memory=memory, scope={"user_id": "alice"}, k=2)
        agent_memory = AgentMemory.from_defaults(
            session_id="s1", token_limit=40, token_flush_size=10, chat_history_token_ratio=0.5, memory_blocks=[block], tokenizer_fn=str.split
        )
        agent_memory.put_messages(
            [
                ChatMessage(role="user", content="My sister Carol lives in Lisbon and teaches piano to children there"),
                ChatMessage(role="assistant", content="Noted: Carol, Lisbon, piano teacher for children."),
                ChatMessage(role="user", content="I am allergic to peanuts and shellfish, remember that for recipes"),
                ChatMessage(role="assistant", content="Understood, no peanuts or shellfish in any recipe I suggest."),
                ChatMessage(role="user", content="Where does Carol live?"),
            ]
        )
        assert memory.count(scope={"user_id": "alice"}) >= 1  # flushed messages went to memcore, in alice's scope
        assert memory.count(scope={"user_id": "bob"}) == 0
        context = agent_memory.get()
        system = "\n".join(m.content or "" for m in context if m.role.value == "system")
        assert "MemcoreFacts" in system and "Carol lives in Lisbon" in system
        assert asyncio.run(block._aget([])) == ""


def test_records_written_by_memcore_itself_come_back_as_text_nodes():
    with memcore.open({"store": {"kind": "memory"}, "spaces": {"default": {"dim": 4}}}) as memory:
        memory.insert({"text": "written without LlamaIndex", "id": "r1", "metadata": {"k": 1}, "vectors": {"default": [1.0, 0.0, 0.0, 0.0]}})
        store = MemcoreVectorStore(memory=memory)
        result = store.query(VectorStoreQuery(query_embedding=[1.0, 0.0, 0.0, 0.0], similarity_top_k=1))
        assert result.ids == ["r1"] and result.nodes[0].get_content() == "written without LlamaIndex" and result.nodes[0].metadata == {"k": 1}
        assert [n.node_id for n in store.get_nodes()] == ["r1"]
