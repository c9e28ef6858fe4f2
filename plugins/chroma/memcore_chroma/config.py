"""Settings of the ``chroma`` index (a plain pydantic model: importing it imports no chromadb)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from memcore.plugin import ComponentConfig

from memcore_chroma_support import ChromaConnection

__all__ = ["ChromaIndexConfig"]


class ChromaIndexConfig(ComponentConfig):
    """``[indexes.<name>] kind = "chroma"``: vectors of one space in a Chroma collection."""

    kind: str = "chroma"
    space: str = Field("default", description="Embedding space whose vectors are indexed.")
    metric: Literal["cosine", "ip", "l2"] = Field(
        "cosine", description="Chroma space: cosine (score = cosine similarity), ip (score = inner product), l2 (score = -squared distance)."
    )
    connection: ChromaConnection = Field(default_factory=ChromaConnection, description="Embedded (inside the index folder) or a Chroma server.")
    collection_prefix: str = Field("memcore", description="Collections are named <prefix>-<index name>-<12 hex> (one per index generation).")
    ef_search: int | None = Field(None, ge=1, le=4096, description="Chroma HNSW ef_search (Chroma default 100).")
    ef_construction: int | None = Field(None, ge=1, le=4096, description="Chroma HNSW ef_construction (Chroma default 100).")
    max_neighbors: int | None = Field(None, ge=2, le=256, description="Chroma HNSW max_neighbors, i.e. M (Chroma default 16).")

    @field_validator("collection_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not value or len(value) > 200 or not value[0].isalnum() or not all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in value):
            raise ValueError("collection_prefix: 1-200 characters of [a-zA-Z0-9._-], starting alphanumeric")
        return value

    def configuration(self) -> dict[str, Any]:
        """The Chroma collection configuration."""
        hnsw: dict[str, Any] = {"space": self.metric}
        for key in ("ef_search", "ef_construction", "max_neighbors"):
            value = getattr(self, key)
            if value is not None:
                hnsw[key] = value
        return {"hnsw": hnsw}
