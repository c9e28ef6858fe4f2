"""``MemcoreRetriever``: LlamaIndex's ``BaseRetriever`` over a memcore memory's declared
retrieval — its pipeline (``hybrid``, ``basic``, ...) or its service (``memoryos``, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from memcore import Hit, Memory, ValidationError

__all__ = ["MemcoreRetriever"]

PROVENANCE_KEY = "memcore"
"""The node metadata key holding what found it: ``{"source", "contributions"}``."""


def _hit_node(hit: Hit) -> NodeWithScore:
    record = hit.record
    assert record is not None  # the pipeline attaches records
    contributions = [{"source": c.source, "rank": c.rank, "score": float(c.score)} for c in hit.provenance]
    metadata = {**record.metadata, PROVENANCE_KEY: {"source": hit.source, "contributions": contributions}}
    return NodeWithScore(node=TextNode(id_=record.id, text=record.text, metadata=metadata), score=float(hit.score))


def _service_node(item: Mapping[str, Any]) -> NodeWithScore:
    metadata = {**dict(item.get("metadata") or {}), PROVENANCE_KEY: {"source": "service"}}
    return NodeWithScore(node=TextNode(id_=str(item["id"]), text=str(item["text"]), metadata=metadata), score=float(item.get("score", 0.0)))


class MemcoreRetriever(BaseRetriever):
    """``NodeWithScore``s for a query from a memcore memory, best first.

    ``via="pipeline"`` (default) runs the memory's declared pipeline; ``via="service"`` asks
    its service (``Memory.retrieve``). ``k``, ``where`` (a memcore filter) and ``scope``
    apply to every call. Each node's metadata carries ``memcore`` = its provenance.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        k: int = 4,
        where: Mapping[str, Any] | None = None,
        scope: Mapping[str, str] | None = None,
        via: Literal["pipeline", "service"] = "pipeline",
        **kwargs: Any,
    ):
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValidationError(f"k must be a positive int, not {k!r}")
        if via not in ("pipeline", "service"):
            raise ValidationError(f"via must be 'pipeline' or 'service', not {via!r}")
        self.memory = memory
        self.k = k
        self.where = dict(where) if where is not None else None
        self.scope = dict(scope) if scope is not None else None
        self.via = via
        super().__init__(**kwargs)

    def _scope_options(self) -> dict[str, Any]:
        return {"scope": self.scope} if self.scope else {}

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.via == "service":
            items = self.memory.retrieve(query_bundle.query_str, where=self.where, k=self.k, **self._scope_options())
            return [_service_node(item) for item in items]
        hits = self.memory.query(query_bundle.query_str, k=self.k, where=self.where, scope=self.scope)
        return [_hit_node(h) for h in hits if h.record is not None]
