"""The memory budget of gathered copies of large allowed sets.

Scoring an allowed set exactly from a gathered copy of its vectors (:class:`memcore.plugin.GatheredRows`,
one contiguous matrix-vector product per query) is ~10x faster than faiss' selector scan of
the whole storage (measured at 10% of 100k x 384: 1.0 ms against 11.8 ms), but the copy
costs ``rows x dim x 4`` bytes for as long as the collection caches the set. Sets up to
``GATHER_MAX`` rows always keep one; larger ones only while the copies of one index stay within
``gather_budget_mb``. The budget counts each tracked set once, by its largest copy, and gives
the bytes back when the set is released (evicted from the collection's cache, or replaced by
the set derived from it after a write, which then holds a copy of its own).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

__all__ = ["GatherBudget"]


class GatherBudget:
    """Bytes of gathered copies held for large allowed sets of one index."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._held: dict[int, int] = {}  # id(allowed set) -> bytes counted for it

    def fits(self, allowed: Any, nbytes: int) -> bool:
        """Whether ``allowed`` may keep a copy of ``nbytes``: it already holds one, or the
        bytes fit in what is left (with room for the copy to grow by an eighth)."""
        if id(allowed) in self._held:
            return True
        return self.used + nbytes + nbytes // 8 <= self.limit

    def track(self, allowed: Any, matrix: np.ndarray) -> None:
        """Count the buffer behind ``matrix`` for ``allowed`` until the set is released."""
        base = matrix.base if isinstance(matrix.base, np.ndarray) else matrix
        nbytes = int(base.nbytes)
        key = id(allowed)
        before = self._held.get(key)
        if before is None:
            weakref.finalize(allowed, self._release, key)
        elif before >= nbytes:
            return
        self._held[key] = nbytes
        self.used += nbytes - (before or 0)

    def _release(self, key: int) -> None:
        self.used -= self._held.pop(key, 0)
