"""``MemcoreRetriever``: LangChain's ``BaseRetriever`` over a memcore memory's declared
retrieval — its pipeline (``hybrid``, ``basic``, ...) or its service (``memoryos``, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

import memcore
from memcore import Memory, ValidationError

from ._documents import hit_document, service_document

__all__ = ["MemcoreRetriever"]


class MemcoreRetriever(BaseRetriever):
    """Documents for a query from a memcore memory, best first, each with
    ``metadata["memcore"]`` = ``{"score", "source", "contributions"}`` (its provenance).

    Build it around an open memory (``MemcoreRetriever(memory=memory)``) or let it open one
    (``MemcoreRetriever(path=..., config=...)``; :meth:`close` closes it). ``via="pipeline"``
    (the default) runs the memory's declared pipeline; ``via="service"`` asks its service
    (what ``Memory.retrieve`` does: the only way for services with their own recall, such
    as ``memoryos``). ``k``, ``where`` and ``scope`` apply to every call; ``invoke(query,
    k=3)`` overrides ``k`` for one call.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Memory | None = Field(default=None, description="An open memcore memory (else path/config open one).")
    path: str | None = Field(default=None, description="The memory directory to open (with config).")
    config: Any = Field(default=None, description="Settings to open the memory with: a TOML/YAML path or a mapping.")
    k: int = Field(default=4, gt=0, description="How many documents to return.")
    where: dict[str, Any] | None = Field(default=None, description="A memcore where filter applied to every call.")
    scope: dict[str, str] | None = Field(default=None, description="Confine every call to this scope (a tenant).")
    via: Literal["pipeline", "service"] = Field(default="pipeline", description="Run the declared pipeline or ask the service.")
    _owns_memory: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _open(self) -> MemcoreRetriever:
        if self.memory is not None and (self.path is not None or self.config is not None):
            raise ValidationError("give either an open memory or path/config to open one, not both")
        if self.memory is None:
            self.memory = memcore.open(self.config, path=self.path)
            self._owns_memory = True
        return self

    def _scope_options(self) -> dict[str, Any]:
        return {"scope": self.scope} if self.scope else {}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None, where: Mapping[str, Any] | None = None
    ) -> list[Document]:
        memory = self.memory
        assert memory is not None  # set by the validator
        depth = self.k if k is None else k
        condition = dict(where) if where is not None else self.where
        if self.via == "service":
            items = memory.retrieve(query, where=condition, k=depth, **self._scope_options())
            return [service_document(item) for item in items]
        return [hit_document(hit) for hit in memory.query(query, k=depth, where=condition, scope=self.scope)]

    def close(self) -> None:
        """Close the memory if this retriever opened it."""
        if self._owns_memory and self.memory is not None:
            self.memory.close()
