"""The three fusion kinds of this plugin: ``weighted``, ``dbsf`` and ``union``."""

from __future__ import annotations

from typing import Mapping, Sequence

from memcore.plugin import distinct_ids, Hit

from .config import DBSFConfig, UnionConfig, WeightedConfig
from .score_fusion import ScoreFusion

__all__ = ["WeightedFusion", "DistributionBasedFusion", "UnionFusion"]


class WeightedFusion(ScoreFusion):
    """Weighted score fusion: ``sum over lists of weight * normalised score``.

    Each list is normalised on its own (``normalization``: minmax, zscore, dbsf or none);
    an id absent from a list gets nothing from it; weights sum to 1 by default (Haystack's
    ``merge`` and LlamaIndex's ``relative_score`` / ``dist_based_score`` modes).
    """

    aggregation = "sum"

    def __init__(self, config: WeightedConfig | None = None):
        super().__init__(config or WeightedConfig())


class DistributionBasedFusion(ScoreFusion):
    """Distribution-based score fusion (Mazzeschi 2023; Qdrant's ``dbsf``).

    Each list is mapped with ``(s - (mean - 3 sigma)) / (6 sigma)`` and the values of an
    id are summed, multiplied by the list weights (raw multipliers unless
    ``normalize_weights``).
    """

    normalization = "dbsf"
    aggregation = "sum"

    def __init__(self, config: DBSFConfig | None = None):
        super().__init__(config or DBSFConfig())


class UnionFusion(ScoreFusion):
    """The union of the lists; an id's score is its best ``weight * normalised score``.

    With ``normalization = "dbsf"`` this is Haystack's ``distribution_based_rank_fusion``
    (normalise, concatenate, duplicates keep their maximum).
    """

    aggregation = "max"

    def __init__(self, config: UnionConfig | None = None):
        super().__init__(config or UnionConfig())

    def default_depth(self, lists: Mapping[str, Sequence[Hit]]) -> int:
        """Every distinct id (a union keeps them all)."""
        return distinct_ids(lists)
