"""The score-fusion engine behind ``weighted``, ``dbsf`` and ``union``.

Each input list is normalised on its own (:mod:`memcore_rrf.normalize`), multiplied by its
weight, and the per-list values of an id are combined by an aggregation (:data:`AGGREGATORS`:
``sum`` or ``max``). An id absent from a list gets nothing from that list. Ties are broken
by id; every fused hit keeps its rank and score in each input list in ``provenance``.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np
from memcore.plugin import Fusion, Hit, merge_provenance, validate_k, ValidationError

from .config import ScoreFusionConfig
from .normalize import NORMALIZERS, NormalizeOptions

__all__ = ["ScoreFusion", "AGGREGATORS", "Aggregator", "list_weights", "top_k"]

Aggregator = Callable[[np.ndarray, np.ndarray, int], np.ndarray]
"""``aggregator(positions, values, n_ids) -> fused score per id`` (every id occurs at least once)."""


def _sum(positions: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(positions, weights=values, minlength=n)


def _max(positions: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.full(n, -np.inf)
    np.maximum.at(out, positions, values)
    return out


AGGREGATORS: dict[str, Aggregator] = {"sum": _sum, "max": _max}
"""How the per-list values of one id combine, by name."""


def list_weights(config: ScoreFusionConfig, names: Sequence[str]) -> dict[str, float]:
    """The weight of each list (default 1), divided by their sum when ``normalize_weights``."""
    weights = {name: float(config.weights.get(name, 1.0)) for name in names}
    total = math.fsum(weights.values())
    if config.normalize_weights and total > 0:
        weights = {name: w / total for name, w in weights.items()}
    return weights


def _list_scores(name: str, hits: Sequence[Hit]) -> tuple[list[str], np.ndarray]:
    """Ids (first occurrence only) and their scores as float64; non-finite scores are refused."""
    ids = [hit.id for hit in hits]
    scores = np.array([hit.score for hit in hits], dtype=np.float64)
    if len(set(ids)) != len(ids):  # an id repeated in one list: its first (best) occurrence counts
        first: dict[str, int] = {}
        for i, rid in enumerate(ids):
            first.setdefault(rid, i)
        keep = sorted(first.values())
        ids, scores = [ids[i] for i in keep], scores[keep]
    if not np.isfinite(scores).all():
        bad = ids[int(np.flatnonzero(~np.isfinite(scores))[0])]
        raise ValidationError(f"list {name!r}: hit {bad!r} has a non-finite score; fusions need finite scores")
    return ids, scores


def top_k(scores: np.ndarray, ids: Sequence[str], k: int) -> list[int]:
    """Positions of the ``k`` best scores, best first, equal scores ordered by id."""
    n = scores.shape[0]
    if k < n:
        part = np.argpartition(-scores, k - 1)[:k]
        candidates = np.flatnonzero(scores >= scores[part].min())  # every tie of the k-th score
    else:
        candidates = np.arange(n)
    values = scores.tolist()
    return sorted(candidates.tolist(), key=lambda i: (-values[i], ids[i]))[:k]


class ScoreFusion(Fusion):
    """Normalise each list, weight it, aggregate per id, keep the best ``k`` (ties by id).

    Subclasses set the aggregation and the default normalisation as class attributes
    :attr:`aggregation` and :attr:`normalization` (names in :data:`AGGREGATORS` and
    :data:`~memcore_rrf.normalize.NORMALIZERS`); a config with a ``normalization`` field
    overrides the latter.
    """

    normalization: str = "minmax"
    aggregation: str = "sum"

    def __init__(self, config: ScoreFusionConfig):
        self.config = config
        self.source = config.kind
        self.normalization = getattr(config, "normalization", type(self).normalization)
        self._normalize = NORMALIZERS[self.normalization]
        self._aggregate = AGGREGATORS[self.aggregation]
        self._options = NormalizeOptions(ddof=1 if config.std == "sample" else 0, clip=bool(getattr(config, "clip", False)))

    def fuse(self, lists: Mapping[str, Sequence[Hit]], k: int) -> list[Hit]:
        """Fuse ``lists`` into the best ``k`` hits; ``score`` and ``raw`` are the fused value."""
        k = validate_k(k)
        weights = list_weights(self.config, list(lists))
        slot: dict[str, int] = {}
        positions: list[int] = []
        values: list[np.ndarray] = []
        for name, hits in lists.items():
            if not hits:
                continue
            ids, scores = _list_scores(name, hits)
            values.append(self._normalize(scores, self._options) * weights[name])
            positions.extend([slot.setdefault(rid, len(slot)) for rid in ids])
        if not slot:
            return []
        fused = self._aggregate(np.asarray(positions, dtype=np.intp), np.concatenate(values), len(slot))
        ids = list(slot)
        best = top_k(fused, ids, k)
        provenance = merge_provenance(lists, {ids[i] for i in best})
        return [Hit(ids[i], float(fused[i]), raw=float(fused[i]), source=self.source, provenance=tuple(provenance[ids[i]])) for i in best]
