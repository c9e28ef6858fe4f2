"""Builtin fusion strategies: ``rrf`` (reciprocal rank fusion) and ``concat``."""

from __future__ import annotations

from typing import Mapping, Sequence

from pydantic import Field

from ._fusion import Fusion, distinct_ids, merge_provenance
from ..model._hit import Hit
from .._plugins._registry import ComponentConfig


class RRFConfig(ComponentConfig):
    """Settings of ``rrf``: score = sum over lists of weight / (k + rank)."""

    kind: str = "rrf"
    k: float = Field(60.0, gt=0, description="Rank constant (60 in Cormack et al. 2009).")
    weights: dict[str, float] = Field(default_factory=dict, description="Per-list weight by list name (default 1).")


class ReciprocalRankFusion(Fusion):
    """Reciprocal rank fusion (Cormack, Clarke, Buettcher 2009), optionally weighted."""

    def __init__(self, config: RRFConfig | None = None):
        self.config = config or RRFConfig()

    def fuse(self, lists: Mapping[str, Sequence[Hit]], k: int) -> list[Hit]:
        """Sum ``weight / (k + rank)`` per id; ties broken by id."""
        scores: dict[str, float] = {}
        get = scores.get
        for name, hits in lists.items():
            weight, offset = self.config.weights.get(name, 1.0), self.config.k
            for rank, hit in enumerate(hits, start=1):
                scores[hit.id] = get(hit.id, 0.0) + weight / (offset + rank)
        # two C-level sorts instead of a key tuple per id: by id, then (stable) by score
        best = sorted(sorted(scores), key=scores.__getitem__, reverse=True)[:k]
        provenance = merge_provenance(lists, set(best) if k < len(scores) else None)
        return [Hit(rid, scores[rid], scores[rid], "rrf", tuple(provenance[rid])) for rid in best]


class ConcatConfig(ComponentConfig):
    """Settings of ``concat`` (none besides ``kind``)."""

    kind: str = "concat"


class Concatenate(Fusion):
    """Lists one after another, first occurrence wins; the score is ``-position``."""

    def __init__(self, config: ConcatConfig | None = None):
        self.config = config or ConcatConfig()

    def default_depth(self, lists: Mapping[str, Sequence[Hit]]) -> int:
        """Every distinct id."""
        return distinct_ids(lists)

    def fuse(self, lists: Mapping[str, Sequence[Hit]], k: int) -> list[Hit]:
        """Keep order across lists; duplicates keep their first position."""
        provenance = merge_provenance(lists)
        order: list[str] = []
        seen: set[str] = set()
        for hits in lists.values():
            for hit in hits:
                if hit.id not in seen:
                    seen.add(hit.id)
                    order.append(hit.id)
        return [Hit(rid, -float(pos), raw=None, source="concat", provenance=tuple(provenance[rid])) for pos, rid in enumerate(order[:k])]
