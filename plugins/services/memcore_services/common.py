"""Helpers shared by the services: result dicts, lexical relevance, heat, vectors."""

from __future__ import annotations

import math
import time
from typing import Any, Iterable, Mapping

import numpy as np
from memcore.plugin import ASCII_WORD, Collection, Hit, Record, words
from pydantic import Field

from memcore.plugin import ComponentConfig

__all__ = ["record_result", "hit_result", "lexical", "HeatWeights", "heat", "now", "unit", "where_ids"]


def now() -> float:
    """Wall-clock seconds (heat recency is measured in it)."""
    return time.time()


def record_result(record: Record, score: float) -> dict[str, Any]:
    """The unified result shape from a stored record."""
    return {"id": record.id, "text": record.text, "score": float(score), "metadata": dict(record.metadata)}


def hit_result(hit: Hit) -> dict[str, Any]:
    """The unified result shape from a hit with its record attached."""
    return {
        "id": hit.id,
        "text": hit.record.text if hit.record else None,
        "score": float(hit.score),
        "metadata": dict(hit.record.metadata) if hit.record else {},
    }


def _words(text: str) -> set[str]:
    return set(words(text, ASCII_WORD))


def lexical(query: str | None, text: str) -> float:
    """Share of the query's words found in ``text`` (0 without a query), plus 1 for an exact match."""
    if not query:
        return 0.0
    q = _words(query)
    if not q:
        return 0.0
    return len(q & _words(text)) / len(q) + (1.0 if query.strip() == text.strip() else 0.0)


class HeatWeights(ComponentConfig):
    """``heat = a * visits + b * interaction_length + c * exp(-(now - last_visit) / tau_s)``."""

    kind: str = "heat"
    a: float = Field(1.0, ge=0, description="Weight of the visit count.")
    b: float = Field(1.0, ge=0, description="Weight of the interaction length (pages in a segment, or words / 100 of a record).")
    c: float = Field(1.0, ge=0, description="Weight of the recency term.")
    tau_s: float = Field(86400.0, gt=0, description="Recency decay constant, in seconds (MemoryOS pypi: 24 h).")


def heat(weights: HeatWeights, visits: float, length: float, last_visit: float, at: float | None = None) -> float:
    """The heat of a segment or record."""
    at = now() if at is None else at
    return weights.a * visits + weights.b * length + weights.c * math.exp(-max(0.0, at - last_visit) / weights.tau_s)


def unit(vector: Any) -> np.ndarray:
    """A float32 unit vector (zeros stay zeros)."""
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def where_ids(collection: Collection, index: str, where: Mapping[str, Any] | None) -> list[str]:
    """Ids of ``index`` (insertion order) matching a where filter."""
    return collection.ids(index=index, where=dict(where) if where else None)


def top(results: Iterable[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """The best ``k`` results, one per id (the best score wins), ties by id."""
    best: dict[str, dict[str, Any]] = {}
    for r in results:
        if r["id"] not in best or r["score"] > best[r["id"]]["score"]:
            best[r["id"]] = r
    return sorted(best.values(), key=lambda r: (-r["score"], r["id"]))[:k]
