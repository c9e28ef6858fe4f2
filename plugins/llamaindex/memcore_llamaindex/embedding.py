"""A memcore embedder as a LlamaIndex embed model (e.g. the offline MiniLM of memcore-embed)."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from memcore.plugin import Embedder, build_embedder

__all__ = ["MemcoreEmbedding"]


class MemcoreEmbedding(BaseEmbedding):
    """LlamaIndex ``BaseEmbedding`` backed by a memcore embedder: ``MemcoreEmbedding("minilm")``
    builds one by kind (or a settings table) through memcore's plugins;
    ``MemcoreEmbedding(embedder)`` wraps a built one."""

    _embedder: Embedder = PrivateAttr()

    def __init__(self, embedder: Embedder | str | dict[str, Any] = "minilm", **kwargs: Any):
        built = embedder if isinstance(embedder, Embedder) else build_embedder(embedder)
        super().__init__(model_name=built.model_id or type(built).__name__, **kwargs)
        self._embedder = built

    @property
    def dim(self) -> int:
        """The vectors' dimension (``embed_dim`` of a MemcoreVectorStore)."""
        return int(self._embedder.dim)

    def _get_text_embedding(self, text: str) -> list[float]:
        return [float(x) for x in self._embedder.embed_documents([text])[0]]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [row.tolist() for row in self._embedder.embed_documents(list(texts))]

    def _get_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in self._embedder.embed_queries([query])[0]]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)
