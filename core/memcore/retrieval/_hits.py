"""Helpers for stages that re-score the working list: de-duplicate it, emit re-scored hits.

Public (``from memcore.stages import unique_hits, rescored``): the builtin ``rerank`` and
``intent`` stages use them, and so do plugin stages (``mmr``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..model._hit import Hit

__all__ = ["unique_hits", "rescored"]


def unique_hits(hits: Sequence[Hit]) -> list[Hit]:
    """The hits with repeated ids dropped (the first occurrence is kept), in their order.

    A stage's working list (``ctx.current``) can hold an id more than once (after a
    ``concat`` fusion, for example); a stage that scores each record once starts here.
    """
    if len({hit.id for hit in hits}) == len(hits):  # the usual case: nothing to drop
        return list(hits)
    seen: set[str] = set()
    out = []
    for hit in hits:
        if hit.id not in seen:
            seen.add(hit.id)
            out.append(hit)
    return out


def rescored(hits: Sequence[Hit], scores: np.ndarray, source: str, top_n: int | None = None) -> list[Hit]:
    """New hits sorted by ``scores`` (higher first, ties by id), cut to ``top_n``.

    Each keeps its id, provenance and record; ``raw`` is its incoming score and ``source``
    the stage that re-scored it.
    """
    values = np.asarray(scores, dtype=np.float64).tolist()
    ids = [h.id for h in hits]
    # two C-level sorts instead of a key tuple per hit: by id, then (stable) by score
    order = sorted(sorted(range(len(hits)), key=ids.__getitem__), key=values.__getitem__, reverse=True)
    if top_n is not None:
        order = order[:top_n]
    out = []
    for i in order:
        hit = hits[i]
        out.append(Hit(hit.id, values[i], float(hit.score), source, hit.provenance, hit.record))
    return out
