"""Allowed-id sets: what a query's ``where`` filter and scope resolve to, resolved once.

Resolving a filter is a store query (an SQL statement over every matching record); the
index search after it is often a fraction of a millisecond. So the collection keeps the
resolved sets in an :class:`AllowedCache` keyed by (filter, scope) and valid for one
store sequence number: any write (from this process or, for readers, another one) bumps
the sequence and empties the cache, so a cached set is never stale.

An :class:`AllowedIds` is a ``frozenset`` of record ids (every index takes it as the
``allowed`` set it always took) that also carries per-index memos: an index translates the
ids to its own labels or rows once per (set, index version) with :meth:`AllowedIds.memo`
instead of on every query.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Hashable, Iterable, TypeVar

__all__ = ["AllowedIds", "AllowedCache"]

T = TypeVar("T")


class AllowedIds(frozenset[str]):
    """An immutable set of record ids plus memos of what indexes derived from it.

    Build with ``AllowedIds(ids)``; use it as a ``frozenset``. Indexes that want to skip
    re-translating the same set call :meth:`memo`.
    """

    __slots__ = ("_memo",)
    _memo: dict[tuple[int, Hashable], tuple[weakref.ref[Any], Hashable, Any]]

    def __new__(cls, ids: Iterable[str] = ()) -> "AllowedIds":
        self = super().__new__(cls, ids)
        self._memo = {}
        return self

    def memo(self, owner: Any, tag: Hashable, version: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, remembered for ``owner`` (held weakly) under ``tag`` while
        ``version`` (the owner's content version) stays the same."""
        key = (id(owner), tag)
        entry = self._memo.get(key)
        if entry is not None and entry[0]() is owner and entry[1] == version:
            cached: T = entry[2]
            return cached
        value = compute()
        self._memo[key] = (weakref.ref(owner), version, value)
        return value


class AllowedCache:
    """Resolved allowed sets of one collection, valid for one store sequence number."""

    def __init__(self, size: int = 64):
        self.size = size
        self.seq: int | None = None
        self._entries: dict[Hashable, AllowedIds] = {}
        self.hits = 0
        self.misses = 0

    def get(self, seq: int, key: Hashable, resolve: Callable[[], Iterable[str]]) -> AllowedIds:
        """The set for ``key`` at store sequence ``seq`` (``resolve()`` on a miss)."""
        if seq != self.seq:
            self._entries.clear()
            self.seq = seq
        found = self._entries.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        allowed = AllowedIds(resolve())
        if len(self._entries) >= self.size:
            self._entries.pop(next(iter(self._entries)))
        self._entries[key] = allowed
        return allowed

    def clear(self) -> None:
        """Forget every set (the next lookups resolve again)."""
        self._entries.clear()
        self.seq = None
