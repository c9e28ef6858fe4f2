"""LangChain's own standard integration suites (langchain-tests), unmodified: the vector
store suite (sync and async) and the retriever suite."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests

import memcore
from memcore_langchain import MemcoreRetriever, MemcoreVectorStore


class TestMemcoreVectorStoreInMemory(VectorStoreIntegrationTests):
    """The suite on a memory in RAM (the ``memory`` store)."""

    @pytest.fixture()
    def vectorstore(self) -> Generator[VectorStore, None, None]:  # type: ignore[override]
        store = MemcoreVectorStore(embedding=self.get_embeddings(), config={"store": {"kind": "memory"}})
        try:
            yield store
        finally:
            store.close()


class TestMemcoreVectorStoreOnDisk(VectorStoreIntegrationTests):
    """The suite on a SQLite memory in a directory (the default store)."""

    @pytest.fixture()
    def vectorstore(self, tmp_path) -> Generator[VectorStore, None, None]:  # type: ignore[override]
        store = MemcoreVectorStore(embedding=self.get_embeddings(), path=tmp_path / "memory")
        try:
            yield store
        finally:
            store.close()


FACTS = [
    "Alice started a new job at the bakery on Main Street",
    "Bob adopted a grey cat called Pixel",
    "Carol is training for the Berlin marathon",
    "Alice bakes sourdough bread every morning",
    "Dan moved to Lisbon for a startup job",
]


@pytest.fixture(scope="module")
def filled_memory(tmp_path_factory) -> Generator[memcore.Memory, None, None]:
    path = tmp_path_factory.mktemp("retriever") / "memory"
    with memcore.open({"spaces": {"default": {"embedder": "hashing"}}}, path=path) as memory:
        memory.insert(FACTS)
        yield memory


class TestMemcoreRetriever(RetrieversIntegrationTests):
    """The retriever suite over a memory's declared pipeline."""

    @pytest.fixture(autouse=True)
    def _memory(self, filled_memory: memcore.Memory) -> None:
        self._memory_under_test = filled_memory

    @property
    def retriever_constructor(self) -> type[MemcoreRetriever]:
        return MemcoreRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": self._memory_under_test}

    @property
    def retriever_query_example(self) -> str:
        return "Where does Alice work?"
