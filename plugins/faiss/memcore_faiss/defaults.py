"""HNSW defaults: ``ef_construction`` and an ``ef_search`` that grows with k and the index size.

faiss' own defaults (efConstruction 40, efSearch 16) find only ~60% of the true top 10 at
200k vectors. When the config leaves them unset, the index uses:

- ``ef_construction`` :data:`DEFAULT_EF_CONSTRUCTION` (80): 64 keeps recall@10 at 1.0 on
  clustered 100k x 384 data for 0.70x the build CPU, but lowers it on real embeddings
  (SciFact MiniLM, HNSW32: 0.989 vs 0.992 at ef_search 64), so 80 stays;
- ``ef_search`` :func:`auto_ef_search` per query: at least ``2 k`` (HNSW never returns
  more than ``ef_search`` candidates) and a floor that grows with log2 of the number of
  live vectors, the way the graph's depth does. The figures behind the constants are in
  ``docs/plugins/faiss.md`` (``bench/bench_hnsw_defaults.py``).

Setting ``ef_search`` / ``ef_construction`` (or ``params = {efSearch = ...}``) in the
config, or ``ef_search`` in a query's mode, always wins.
"""

from __future__ import annotations

import math

__all__ = ["DEFAULT_EF_CONSTRUCTION", "auto_ef_search", "EF_BASE", "EF_PER_DOUBLING", "EF_MAX"]

DEFAULT_EF_CONSTRUCTION = 80
"""efConstruction used when the config sets none (faiss' own is 40)."""

EF_BASE = 40
"""ef_search floor at (and below) 1,000 vectors."""

EF_PER_DOUBLING = 8
"""ef_search added per doubling of the live vectors above 1,000."""

EF_MAX = 512
"""The automatic ef_search never exceeds this (a query's own ef_search may)."""


def auto_ef_search(k: int, live: int) -> int:
    """The default ef_search for a top-``k`` query over ``live`` vectors."""
    doublings = math.log2(live / 1000) if live > 1000 else 0.0
    floor = EF_BASE + EF_PER_DOUBLING * doublings
    return int(min(max(2 * k, math.ceil(floor)), max(EF_MAX, k)))
