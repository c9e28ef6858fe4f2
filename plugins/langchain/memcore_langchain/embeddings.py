"""A memcore embedder as LangChain ``Embeddings`` (what ``MemcoreVectorStore.embeddings``
returns when the memory embeds with its own model)."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from memcore.plugin import Embedder

__all__ = ["MemcoreEmbeddings"]


class MemcoreEmbeddings(Embeddings):
    """LangChain ``Embeddings`` backed by a memcore :class:`~memcore.plugin.Embedder`."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Document vectors, one list of floats per text."""
        return [row.tolist() for row in self.embedder.embed_documents(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        """The query vector (the model's query encoding when it differs from documents)."""
        return [float(x) for x in self.embedder.embed_queries([text])[0]]
