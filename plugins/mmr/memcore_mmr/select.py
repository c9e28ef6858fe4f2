"""Greedy maximal marginal relevance selection (Carbonell and Goldstein, 1998), vectorised.

At each step the candidate ``d`` maximising

    lambda * rel(d) - (1 - lambda) * redundancy(d),
    redundancy(d) = max(0, max over selected s of sim(d, s))

is selected; the first pick is the most relevant candidate for any lambda (nothing is
selected yet, so there is no penalty -- as in Haystack and LlamaIndex). The floor at 0
(``floor=True``, the default) means a candidate with a *negative* cosine to every selected
hit is not redundant, but not rewarded either; with it the selected values never increase
from one pick to the next. ``floor=False`` is Haystack's formula exactly (redundancy = max
similarity, possibly negative). For similarities >= 0 (Jaccard, most text embeddings) the
two are the same.

A running redundancy vector is updated with one similarity column per selected hit:
O(n * top_n) work with numpy, no loop over pairs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["mmr_select"]


def mmr_select(
    relevance: np.ndarray,
    similarity_column: Callable[[int], np.ndarray],
    top_n: int,
    lambda_: float,
    *,
    floor: bool = True,
) -> tuple[list[int], list[float]]:
    """Indices of the selected candidates in selection order and their MMR value at selection.

    ``similarity_column(j)`` returns the similarity of candidate ``j`` to every candidate.
    Ties are broken by higher relevance, then by position (the input order).
    """
    rel = np.asarray(relevance, dtype=np.float64)
    n = rel.shape[0]
    gain = lambda_ * rel
    redundancy = np.full(n, 0.0 if floor else -np.inf)
    available = np.ones(n, dtype=bool)
    picks: list[int] = []
    values: list[float] = []
    for _ in range(min(int(top_n), n)):
        mmr = np.where(available, gain - (1.0 - lambda_) * redundancy if picks else gain, -np.inf)
        best = mmr.max()
        tied = np.flatnonzero(mmr == best)
        pick = int(tied[np.argmax(rel[tied])]) if tied.size > 1 else int(tied[0])
        available[pick] = False
        picks.append(pick)
        values.append(float(best))
        np.maximum(redundancy, np.asarray(similarity_column(pick), dtype=np.float64), out=redundancy)
    return picks, values
