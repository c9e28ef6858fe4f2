"""Records and hits as LangChain ``Document``s."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from memcore import Hit, Record

PROVENANCE_KEY = "memcore"
"""The metadata key under which :class:`MemcoreRetriever` puts score and provenance."""


def record_document(record: Record) -> Document:
    """A stored record as a Document: its text, its metadata (a copy) and its id."""
    return Document(page_content=record.text, metadata=dict(record.metadata), id=record.id)


def hit_document(hit: Hit) -> Document:
    """A retrieved hit as a Document, with ``metadata["memcore"]`` = score and provenance."""
    record = hit.record
    if record is None:  # pipelines attach records; a hit without one has no text to give
        raise ValueError(f"hit {hit.id!r} carries no record")
    document = record_document(record)
    document.metadata[PROVENANCE_KEY] = provenance(hit)
    return document


def provenance(hit: Hit) -> dict[str, Any]:
    """What found a hit: its final score, the list it came from and each contribution."""
    return {
        "score": float(hit.score),
        "source": hit.source,
        "contributions": [{"source": c.source, "rank": c.rank, "score": float(c.score)} for c in hit.provenance],
    }


def service_document(item: dict[str, Any]) -> Document:
    """An item of ``Memory.retrieve`` (a service's answer) as a Document."""
    metadata = dict(item.get("metadata") or {})
    metadata[PROVENANCE_KEY] = {"score": float(item.get("score", 0.0)), "source": "service"}
    return Document(page_content=str(item["text"]), metadata=metadata, id=item.get("id"))
