"""Helpers for stages that re-score the working list: de-duplicate it, emit re-scored hits.

Public (``from memcore.stages import unique_hits, rescored``): the builtin ``rerank`` and
``intent`` stages use them, and so do plugin stages (``mmr``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..records import Hit

__all__ = ["unique_hits", "rescored"]


def unique_hits(hits: Sequence[Hit]) -> list[Hit]:
    """The hits with repeated ids dropped (the first occurrence is kept), in their order.

    A stage's working list (``ctx.current``) can hold an id more than once (after a
    ``concat`` fusion, for example); a stage that scores each record once starts here.
    """
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
    order = sorted(range(len(hits)), key=lambda i: (-float(scores[i]), hits[i].id))
    if top_n is not None:
        order = order[:top_n]
    return [
        Hit(hits[i].id, float(scores[i]), raw=float(hits[i].score), source=source, provenance=hits[i].provenance, record=hits[i].record)
        for i in order
    ]
