"""``MemcoreVectorStore``: LangChain's ``VectorStore`` on a memcore memory.

Two ways to build one:

- ``MemcoreVectorStore(embedding=<LangChain Embeddings>, path=..., config=...)``: the
  LangChain embeddings embed texts and queries; the memory's ``default`` space holds their
  vectors (its dimension is read from the model once). Without ``embedding``, the memory's
  own embedder (settings) is used and :attr:`embeddings` wraps it for LangChain.
- ``MemcoreVectorStore(memory=<an open memcore.Memory>)``: around a memory the application
  opened (the store does not close it).

Searches go to one vector index of the memory (``index=``; default: the index named
``vector``, else the only index). Filters are memcore ``where`` filters (``filter=`` or
``where=``: ``{"genre": "sf"}``, ``{"year": {"$gte": 2000}}``, ``$and``/``$or``...). With
``scope=``, every call is confined to that scope (a tenant's store).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Callable

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

import memcore
from memcore import Memory, Pipeline, ValidationError

from ._documents import record_document
from .embeddings import MemcoreEmbeddings

__all__ = ["MemcoreVectorStore"]

SPACE = "default"
"""The embedding space the store's vectors live in."""


def _settings_with_space(config: Any, dim: int) -> dict[str, Any]:
    """``config`` (a path, a mapping or None) with the default space set to ``dim`` external vectors."""
    if config is None:
        settings: dict[str, Any] = {}
    elif isinstance(config, Mapping):
        settings = dict(config)
    else:
        settings = memcore.load_settings(config).model_dump()
    spaces = dict(settings.get("spaces") or {})
    spaces[SPACE] = {"dim": dim}  # vectors come from the LangChain embeddings, not from a memcore embedder
    settings["spaces"] = spaces
    return settings


class MemcoreVectorStore(VectorStore):
    """A LangChain vector store whose documents live in a memcore memory."""

    def __init__(
        self,
        embedding: Embeddings | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        memory: Memory | None = None,
        index: str | None = None,
        scope: Mapping[str, str] | None = None,
    ):
        if memory is not None and (path is not None or config is not None):
            raise ValidationError("give either an open memory or path/config to open one, not both")
        self._embedding = embedding
        if memory is None:
            settings = _settings_with_space(config, len(embedding.embed_query("dimension probe"))) if embedding is not None else config
            memory = memcore.open(settings, path=path)
            self._owns_memory = True
        else:
            self._owns_memory = False
        self.memory = memory
        """The memcore memory the documents live in."""
        self.scope = dict(scope) if scope is not None else None
        self.index = index if index is not None else self._default_index()
        self._score_range = self._index_score_range()

    # -- plumbing ------------------------------------------------------------------------

    def _default_index(self) -> str:
        names = [entry["name"] for entry in self.memory.collection.list_indexes()]
        if "vector" in names:
            return "vector"
        if len(names) == 1:
            return str(names[0])
        raise ValidationError(f"the memory has several indexes {names} and none named 'vector': pass index=...")

    def _index_score_range(self) -> tuple[float | None, float | None]:
        found = getattr(self.memory.collection.index(self.index), "score_range", (None, None))
        return (found[0], found[1])

    @contextmanager
    def _bound(self) -> Iterator[None]:
        with self.memory.collection.scoped(self.scope):
            yield

    @property
    def embeddings(self) -> Embeddings | None:
        """The LangChain embeddings given, else the memory's own embedder seen as Embeddings."""
        if self._embedding is not None:
            return self._embedding
        space = self.memory.collection.spaces.get(SPACE)
        return MemcoreEmbeddings(space.embedder) if space is not None and space.embedder is not None else None

    def _query(self, query: str | None, vector: Sequence[float] | None, where: Any) -> dict[str, Any]:
        if vector is None and query is not None and self._embedding is not None:
            vector = self._embedding.embed_query(query)
        if vector is not None:
            return {"vectors": {SPACE: np.asarray(vector, dtype=np.float32)}, "where": where}
        return {"text": query, "where": where}

    @staticmethod
    def _where(kwargs: dict[str, Any]) -> Any:
        where = kwargs.pop("filter", None)
        other = kwargs.pop("where", None)
        if where is not None and other is not None:
            raise ValidationError("give the filter once: filter= or where=")
        return where if where is not None else other

    # -- writes --------------------------------------------------------------------------

    def add_texts(self, texts: Iterable[str], metadatas: list[dict[str, Any]] | None = None, *, ids: list[str] | None = None, **kwargs: Any) -> list[str]:
        """Add texts (with metadata); with ``ids``, a text whose id exists replaces it (idempotent)."""
        texts = list(texts)
        if metadatas is not None and len(metadatas) != len(texts):
            raise ValidationError(f"{len(metadatas)} metadatas for {len(texts)} texts")
        if ids is not None and len(ids) != len(texts):
            raise ValidationError(f"{len(ids)} ids for {len(texts)} texts")
        if not texts:
            return []
        items: list[dict[str, Any]] = []
        vectors = self._embedding.embed_documents(texts) if self._embedding is not None else None
        for i, text in enumerate(texts):
            item: dict[str, Any] = {"text": text, "metadata": dict(metadatas[i]) if metadatas else {}}
            if vectors is not None:
                item["vectors"] = {SPACE: np.asarray(vectors[i], dtype=np.float32)}
            if ids is not None and ids[i] is not None:
                item["id"] = ids[i]
            items.append(item)
        with self._bound():
            if ids is not None:
                return list(self.memory.upsert(items))
            return list(self.memory.insert(items))

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete documents by id (unknown ids are ignored), or by a ``where``/``filter``;
        with neither, every document (in the store's scope)."""
        where = self._where(kwargs)
        with self._bound():
            if ids is None:
                self.memory.collection.ids(where=where)  # a bad filter fails here, before anything goes
                self.memory.delete(where=where if where is not None else {})
                return True
            present = [r.id for r in self.memory.collection.get_many(list(ids)) if r is not None]
            if present:
                self.memory.delete(present, where=where)
        return True

    # -- reads ---------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents with these ids (unknown ids are skipped), in the order given."""
        with self._bound():
            return [record_document(r) for r in self.memory.collection.get_many(list(ids)) if r is not None]

    def _search(self, query: str | None, vector: Sequence[float] | None, k: int, kwargs: dict[str, Any]) -> list[tuple[Document, float]]:
        where = self._where(kwargs)
        if kwargs:
            raise ValidationError(f"unknown search option(s) {sorted(kwargs)}")
        with self._bound():
            hits = self.memory.collection.retrieve(self._query(query, vector, where), index=self.index, k=k)
        return [(record_document(h.record), float(h.score)) for h in hits if h.record is not None]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        """The ``k`` documents most similar to ``query`` (optionally filtered)."""
        return [doc for doc, _ in self._search(query, None, k, kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """As :meth:`similarity_search`, with the index's score (higher is more similar: a
        cosine similarity for the default ``exact`` index)."""
        return self._search(query, None, k, kwargs)

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        """The ``k`` documents most similar to a query vector."""
        return [doc for doc, _ in self._search(None, embedding, k, kwargs)]

    def similarity_search_with_score_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """As :meth:`similarity_search_by_vector`, with scores."""
        return self._search(None, embedding, k, kwargs)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Scores to [0, 1] by the index's score range: linear for a bounded range (cosine),
        ``1 / (1 + distance)`` for a negative distance, logistic for an unbounded one."""
        low, high = self._score_range
        if low is not None and high is not None:
            return lambda s: min(1.0, max(0.0, (s - low) / (high - low)))
        if high is not None:
            return lambda s: 1.0 / (1.0 + max(0.0, high - s))
        return lambda s: 1.0 / (1.0 + math.exp(-s))

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any) -> list[Document]:
        """memcore's MMR (the ``mmr`` stage) over the ``fetch_k`` most similar documents."""
        return self._mmr(query, None, k, fetch_k, lambda_mult, kwargs)

    def max_marginal_relevance_search_by_vector(
        self, embedding: list[float], k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[Document]:
        """As :meth:`max_marginal_relevance_search`, from a query vector."""
        return self._mmr(None, embedding, k, fetch_k, lambda_mult, kwargs)

    def _mmr(self, query: str | None, vector: Sequence[float] | None, k: int, fetch_k: int, lambda_mult: float, kwargs: dict[str, Any]) -> list[Document]:
        where = self._where(kwargs)
        if kwargs:
            raise ValidationError(f"unknown search option(s) {sorted(kwargs)}")
        stages = [
            {"kind": "recall", "index": self.index, "k": max(fetch_k, k)},
            {"kind": "mmr", "lambda": lambda_mult, "space": SPACE, "top_n": k},
        ]
        pipeline = Pipeline.from_config(stages, self.memory.collection.registry)
        with self._bound():
            hits = pipeline.run(self.memory.collection, self._query(query, vector, where), k=k)
        return [record_document(h.record) for h in hits if h.record is not None]

    # -- building and closing ------------------------------------------------------------

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> MemcoreVectorStore:
        """A new store (``kwargs``: ``path``, ``config``, ``index``, ``scope``) holding ``texts``."""
        store = cls(embedding=embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    def close(self) -> None:
        """Close the memory if this store opened it (an application's memory stays open)."""
        if self._owns_memory:
            self.memory.close()
