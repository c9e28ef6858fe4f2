"""Reciprocal rank fusion, ``rrf``: each id scores ``sum over lists of weight / (k + rank)``."""

from __future__ import annotations

from typing import Mapping, Sequence

from memcore.plugin import ComponentConfig, Fusion, Hit, merge_provenance
from pydantic import Field

__all__ = ["RRFConfig", "ReciprocalRankFusion"]


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
