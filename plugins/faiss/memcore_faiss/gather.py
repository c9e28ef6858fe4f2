"""The memory budget of gathered copies of large allowed sets.

Scoring an allowed set exactly from a gathered copy of its vectors (:class:`memcore.plugin.GatheredRows`,
one contiguous matrix-vector product per query) is ~10x faster than faiss' selector scan of
the whole storage (measured at 10% of 100k x 384: 1.0 ms against 11.8 ms), but the copy
costs ``rows x dim x 4`` bytes for as long as the collection caches the set. Sets up to
``GATHER_MAX`` rows always keep one; larger ones only while the copies of one index stay within
``gather_budget_mb``. The budget counts each tracked set once, by its largest copy, and gives
the bytes back when the set is released (evicted from the collection's cache, or replaced by
the set derived from it after a write, which then holds a copy of its own).

Every set is gathered at its second query, not its first (:meth:`GatherBudget.second_use`):
writing a fresh copy of 10,000 rows of 384 floats costs its page faults (~15-25 ms at 100k
on the shared test machine, more than the filtered query itself; ~1 ms for 1,000 rows, 6x
the query), which a filter queried once never earns back. Its first query scores the rows block by block in a small buffer
instead (:func:`blocked_scores`: the same rows read once, no set-sized copy).
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np

__all__ = ["GatherBudget", "blocked_scores", "BLOCK"]

BLOCK = 128
"""Rows scored at a time by :func:`blocked_scores` (192 KiB at 384 float32: in the CPU cache,
and below the allocator's fresh-mapping threshold: a 1024-row buffer cost ~380 page faults,
~0.9 ms, the first time a process scored a set)."""


def blocked_scores(stored: np.ndarray, labels: np.ndarray, x: np.ndarray, exact: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """``exact(x, stored[labels] as float32)`` without the set-sized copy: :data:`BLOCK` rows
    at a time gathered (as bytes: ``stored`` holds each row's bytes) into one small buffer."""
    out = np.empty((x.shape[0], len(labels)), dtype=np.float32)
    buffer = np.empty((min(BLOCK, len(labels)), stored.shape[1]), dtype=stored.dtype)
    for start in range(0, len(labels), BLOCK):
        part = labels[start : start + BLOCK]
        block = buffer[: len(part)]
        np.take(stored, part, axis=0, out=block, mode="clip")  # "clip": written in place; the labels are the index's own
        out[:, start : start + len(part)] = exact(x, block.view(np.float32))
    return out


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

    def second_use(self, allowed: Any, owner: Any) -> bool:
        """Whether ``allowed`` (a cached set, with memos) was scored by ``owner`` before, or
        holds a copy already: only then is it gathered (see the module's notes). A set derived
        from one after a write (:meth:`memcore.plugin.AllowedIds.derive`) continues its count."""
        if id(allowed) in self._held:
            return True
        # one count per set object and its derived sets, whatever the index's version
        uses: list[int] = allowed.memo(owner, "uses", 0, lambda: [0], lambda old, _version, _changed: old)
        uses[0] += 1
        return uses[0] > 1

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
