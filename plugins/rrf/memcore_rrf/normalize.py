"""Per-list score normalisations, chosen by name from :data:`NORMALIZERS`.

Each normaliser maps the scores of ONE ranked list (a float64 array, best first) to new
scores. A list whose scores are all equal carries no score information; each normaliser
says what it gives then (never NaN, never a division by zero).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

__all__ = ["NormalizeOptions", "Normalizer", "NORMALIZERS", "NormalizationName", "minmax", "zscore", "dbsf", "identity", "spread"]

NormalizationName = Literal["minmax", "zscore", "dbsf", "none"]
"""The names of :data:`NORMALIZERS`, as settings spell them."""


@dataclass(frozen=True, slots=True)
class NormalizeOptions:
    """Options shared by the normalisers.

    ``ddof`` is the delta degrees of freedom of the standard deviation (0: population
    sigma, as Haystack and LlamaIndex; 1: sample sigma, as Qdrant); ``clip`` clips the
    ``dbsf`` output to [0, 1].
    """

    ddof: int = 0
    clip: bool = False


Normalizer = Callable[[np.ndarray, NormalizeOptions], np.ndarray]
"""``normalizer(scores, options) -> normalised scores`` (same shape, finite)."""


def spread(scores: np.ndarray, ddof: int) -> tuple[float, float]:
    """Mean and standard deviation of ``scores`` (sigma 0.0 when it is undefined)."""
    mu = float(np.mean(scores))
    if scores.size - ddof <= 0:
        return mu, 0.0
    sigma = float(np.sqrt(np.sum((scores - mu) ** 2) / (scores.size - ddof)))
    return mu, sigma


def minmax(scores: np.ndarray, options: NormalizeOptions) -> np.ndarray:
    """``(s - min) / (max - min)``: the list's best hit gets 1, its worst 0.

    All-equal scores (one hit, or ties only) give 1.0 to every hit: each is the best of
    its list. (LlamaIndex gives 1 when the score is positive, else 0; memcore scores of
    L2 or hyperbolic indexes are negative by convention, so the sign says nothing.)
    """
    lo, hi = float(scores.min()), float(scores.max())
    if not hi > lo:
        return np.ones_like(scores)
    return (scores - lo) / (hi - lo)


def zscore(scores: np.ndarray, options: NormalizeOptions) -> np.ndarray:
    """``(s - mean) / sigma``; all-equal scores (sigma 0) give 0.0, the mean's value."""
    mu, sigma = spread(scores, options.ddof)
    if not sigma > 0:
        return np.zeros_like(scores)
    return (scores - mu) / sigma


def dbsf(scores: np.ndarray, options: NormalizeOptions) -> np.ndarray:
    """Distribution-based: ``(s - (mean - 3 sigma)) / (6 sigma)``, not clipped unless asked.

    All-equal scores (sigma 0) give 0.5: the value of the formula at ``s = mean`` for any
    sigma > 0, and what Qdrant gives. (Haystack gives 0 there.)
    """
    mu, sigma = spread(scores, options.ddof)
    if not sigma > 0:
        return np.full_like(scores, 0.5)
    out = (scores - (mu - 3.0 * sigma)) / (6.0 * sigma)
    return np.clip(out, 0.0, 1.0) if options.clip else out


def identity(scores: np.ndarray, options: NormalizeOptions) -> np.ndarray:
    """The scores as they are (``normalization = "none"``): only for lists on one scale."""
    return scores.copy()


NORMALIZERS: dict[str, Normalizer] = {"minmax": minmax, "zscore": zscore, "dbsf": dbsf, "none": identity}
"""Normaliser by settings name."""
