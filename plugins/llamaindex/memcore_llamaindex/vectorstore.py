"""``MemcoreVectorStore``: LlamaIndex's vector store on a memcore memory.

Each node is one memcore record: its id, its content as the record's text, its embedding in
the memory's ``default`` space (of ``embed_dim`` dimensions, filled by LlamaIndex's embed
model), its metadata as the record's metadata (plus LlamaIndex's own keys: the serialised
node, ``doc_id``/``ref_doc_id``). Queries search one vector index of the memory:

- ``DEFAULT``: the ``similarity_top_k`` nearest nodes to ``query_embedding``;
- ``MMR``: memcore's ``mmr`` stage over the nearest candidates (``mmr_threshold`` is its lambda);
- ``HYBRID`` / ``TEXT_SEARCH``: the memory's declared pipeline on ``query_str`` (a memory
  declared with the ``hybrid`` preset gives dense + BM25 fusion).

``MetadataFilters`` become memcore ``where`` filters (and/or, ==, !=, >, >=, <, <=, in, nin)
applied inside the search, before ``similarity_top_k``; ``doc_ids`` and ``node_ids`` too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
from pydantic import PrivateAttr

import memcore
from memcore import Hit, Memory, Pipeline, Record, ValidationError

from .filters import to_where

__all__ = ["MemcoreVectorStore"]

SPACE = "default"
NODE_ID = "_node_id"
"""The metadata key holding the node id (so ``node_ids`` restrictions run as filters)."""

NODE_CONTENT = "_node_content"
"""LlamaIndex's metadata key holding the serialised node."""

_TEXT_MODES = {VectorStoreQueryMode.HYBRID, VectorStoreQueryMode.TEXT_SEARCH}


def _and(*parts: dict[str, Any] | None) -> dict[str, Any] | None:
    present = [p for p in parts if p]
    if not present:
        return None
    return present[0] if len(present) == 1 else {"$and": present}


class MemcoreVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store whose nodes live in a memcore memory.

    ``MemcoreVectorStore(embed_dim=384, path=..., config=...)`` opens (or creates) a memory
    whose default space holds LlamaIndex's embeddings; ``MemcoreVectorStore(memory=memory)``
    wraps an open one (its default space must have the embed model's dimension).
    ``scope=`` confines every call to one memcore scope.
    """

    stores_text: bool = True
    flat_metadata: bool = False

    _memory: Memory = PrivateAttr()
    _owns_memory: bool = PrivateAttr(default=False)
    _index: str = PrivateAttr()
    _scope: dict[str, str] | None = PrivateAttr(default=None)

    def __init__(
        self,
        *,
        embed_dim: int | None = None,
        path: str | os.PathLike[str] | None = None,
        config: Mapping[str, Any] | None = None,
        memory: Memory | None = None,
        index: str = "vector",
        scope: Mapping[str, str] | None = None,
    ):
        super().__init__(stores_text=True)
        if memory is not None:
            if embed_dim is not None or path is not None or config is not None:
                raise ValidationError("give either an open memory or embed_dim/path/config to open one, not both")
            self._memory = memory
        else:
            if not isinstance(embed_dim, int) or isinstance(embed_dim, bool) or embed_dim < 1:
                raise ValidationError(f"embed_dim must be the embed model's dimension (a positive int), not {embed_dim!r}")
            settings = dict(config or {})
            settings["spaces"] = {**dict(settings.get("spaces") or {}), SPACE: {"dim": embed_dim}}
            self._memory = memcore.open(settings, path=path)
            self._owns_memory = True
        self._index = index
        self._scope = dict(scope) if scope is not None else None
        if not self._memory.collection.has_index(index):
            raise ValidationError(f"the memory has no index {index!r}")

    @classmethod
    def class_name(cls) -> str:
        """LlamaIndex's name for this store."""
        return "MemcoreVectorStore"

    @property
    def client(self) -> Memory:
        """The memcore memory (LlamaIndex's "client" of a store)."""
        return self._memory

    # -- writes --------------------------------------------------------------------------

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Add (or replace, same id) nodes with their embeddings; one atomic write."""
        items = []
        for node in nodes:
            embedding = node.get_embedding()
            metadata = node_to_metadata_dict(node, remove_text=True, flat_metadata=self.flat_metadata)
            metadata[NODE_ID] = node.node_id
            items.append(
                {
                    "id": node.node_id,
                    "text": node.get_content(),
                    "metadata": metadata,
                    "vectors": {SPACE: np.asarray(embedding, dtype=np.float32)},
                }
            )
        if not items:
            return []
        with self._memory.collection.scoped(self._scope):
            return list(self._memory.upsert(items))

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of the source document ``ref_doc_id``."""
        self._delete_where({"ref_doc_id": ref_doc_id})

    def delete_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any) -> None:
        """Delete nodes by id and/or filters (unknown ids are ignored)."""
        self._delete_where(self._restriction(node_ids, None, filters))

    def clear(self) -> None:
        """Delete every node (in the store's scope)."""
        self._delete_where(None)

    def _delete_where(self, where: dict[str, Any] | None) -> None:
        with self._memory.collection.scoped(self._scope):
            ids = self._memory.collection.ids(where=where)
            if ids:
                self._memory.delete(ids)

    # -- reads ---------------------------------------------------------------------------

    @staticmethod
    def _restriction(node_ids: Sequence[str] | None, doc_ids: Sequence[str] | None, filters: MetadataFilters | None) -> dict[str, Any] | None:
        # an empty list restricts nothing (VectorStoreIndex's retriever passes node_ids=[])
        return _and(
            {NODE_ID: {"$in": list(node_ids)}} if node_ids else None,
            {"ref_doc_id": {"$in": list(doc_ids)}} if doc_ids else None,
            to_where(filters),
        )

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        """Nodes by id and/or filters (unknown ids are skipped), in insertion order."""
        with self._memory.collection.scoped(self._scope):
            ids = self._memory.collection.ids(where=self._restriction(node_ids, None, filters))
            return [self._node(r) for r in self._memory.collection.get_many(ids) if r is not None]

    def _node(self, record: Record) -> BaseNode:
        if NODE_CONTENT not in record.metadata:  # a record written by memcore itself, not through LlamaIndex
            return TextNode(id_=record.id, text=record.text, metadata=dict(record.metadata))
        node = metadata_dict_to_node(dict(record.metadata), text=record.text)
        node.metadata.pop(NODE_ID, None)
        return node

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The nodes for a LlamaIndex query (see the module for the modes)."""
        where = self._restriction(query.node_ids, query.doc_ids, query.filters)
        k = query.similarity_top_k
        with self._memory.collection.scoped(self._scope):
            hits = self._search(query, where, k, kwargs)
        kept = [h for h in hits if h.record is not None]
        return VectorStoreQueryResult(
            nodes=[self._node(h.record) for h in kept if h.record is not None],
            similarities=[float(h.score) for h in kept],
            ids=[h.id for h in kept],
        )

    def _search(self, query: VectorStoreQuery, where: dict[str, Any] | None, k: int, kwargs: dict[str, Any]) -> list[Hit]:
        collection = self._memory.collection
        if query.mode in _TEXT_MODES:
            if not query.query_str:
                raise ValidationError(f"{query.mode.value} mode needs query_str")
            if query.query_embedding is None:
                return self._memory.query(query.query_str, k=k, where=where)
            # LlamaIndex's query vector stands for the memory's embedder in the pipeline's dense stages
            request = {"text": query.query_str, "vectors": {SPACE: np.asarray(query.query_embedding, dtype=np.float32)}, "where": where}
            return self._memory.pipeline.run(collection, request, k=k)
        if query.query_embedding is None:
            raise ValidationError(f"{query.mode.value} mode needs query_embedding")
        request = {"vectors": {SPACE: np.asarray(query.query_embedding, dtype=np.float32)}, "where": where}
        if query.mode == VectorStoreQueryMode.MMR:
            threshold = kwargs.get("mmr_threshold", query.mmr_threshold)
            stages = [
                {"kind": "recall", "index": self._index, "k": max(int(kwargs.get("mmr_prefetch_k", 4 * k)), k)},
                {"kind": "mmr", "lambda": 0.5 if threshold is None else float(threshold), "space": SPACE, "top_n": k},
            ]
            return Pipeline.from_config(stages, collection.registry).run(collection, request, k=k)
        if query.mode != VectorStoreQueryMode.DEFAULT:
            raise ValidationError(f"query mode {query.mode.value!r} is not supported; use default, mmr, hybrid or text_search")
        return collection.retrieve(request, index=self._index, k=k)

    def close(self) -> None:
        """Close the memory if this store opened it."""
        if self._owns_memory:
            self._memory.close()
