"""Allowed-id sets: what a query's ``where`` filter and scope resolve to, resolved once.

Resolving a filter is a store query (an SQL statement over every matching record); the
index search after it is often a fraction of a millisecond. So the collection keeps the
resolved sets in an :class:`AllowedCache` keyed by (filter, scope) and valid for one
store sequence number. The writer's own writes carry the sets forward
(:meth:`AllowedCache.advance`): the records the write changed are matched against each
cached filter in Python (the same semantics as the SQL, see :mod:`memcore.filters`), a set
no changed record enters or leaves stays the very same object (its index memos stay
valid), and a write that changes no record (component state) keeps every set. Any other
sequence change (another process's write, seen by a reader; a store write that bypassed
the collection) empties the cache, so a cached set is never stale.

An :class:`AllowedIds` is a ``frozenset`` of record ids (every index takes it as the
``allowed`` set it always took) that also carries per-index memos: an index translates the
ids to its own labels or rows once per (set, index version) with :meth:`AllowedIds.memo`
instead of on every query.
"""

from __future__ import annotations

import weakref
from itertools import chain
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterable, Mapping, TypeVar

from .filters import Filter, matches

if TYPE_CHECKING:
    from .records import Record, Scope

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


ADVANCE_BUDGET = 20_000
"""Most (cached set x changed record) filter evaluations :meth:`AllowedCache.advance` does
for one write (about 1 µs each: ~20 ms at most); a larger write (a bulk import) empties the
cache instead, and the next query of each filter resolves it in the store again."""


class AllowedCache:
    """Resolved allowed sets of one collection, valid for one store sequence number.

    Each entry keeps the parsed filter and scope it was resolved from, so that
    :meth:`advance` can carry it across the writer's own writes.
    """

    def __init__(self, size: int = 64):
        self.size = size
        self.seq: int | None = None
        self._entries: dict[Hashable, tuple[AllowedIds, Filter | None, "Scope | None"]] = {}
        self.hits = 0
        self.misses = 0
        self.carried = 0

    def get(self, seq: int, key: Hashable, resolve: Callable[[], Iterable[str]], where: Filter | None = None, scope: "Scope | None" = None) -> AllowedIds:
        """The set for ``key`` at store sequence ``seq`` (``resolve()`` on a miss).

        ``where`` and ``scope`` are what ``resolve`` evaluates; :meth:`advance` re-checks
        changed records against them."""
        if seq != self.seq:
            self._entries.clear()
            self.seq = seq
        found = self._entries.get(key)
        if found is not None:
            self.hits += 1
            return found[0]
        self.misses += 1
        allowed = AllowedIds(resolve())
        if len(self._entries) >= self.size:
            self._entries.pop(next(iter(self._entries)))
        self._entries[key] = (allowed, where, scope)
        return allowed

    def advance(self, before: int, after: int, changed: Mapping[str, "Record | None"]) -> None:
        """Carry the sets from store sequence ``before`` to ``after`` across one write of
        this process that changed exactly the records ``changed`` (id -> the record as
        written, or None when deleted).

        Only when the cache is valid for ``before`` (no other write came between); else,
        or when the write is too large to re-check (:data:`ADVANCE_BUDGET`), it is emptied."""
        if self.seq != before or len(changed) * len(self._entries) > ADVANCE_BUDGET:
            self.clear()
            return
        self.seq = after
        if not changed:
            self.carried += len(self._entries)
            return
        for key, (allowed, where, scope) in list(self._entries.items()):
            enter: list[str] = []
            leave: list[str] = []
            for rid, record in changed.items():
                keep = record is not None and (scope is None or scope.covers(record.scope)) and matches(where, record.metadata)
                if keep and rid not in allowed:
                    enter.append(rid)
                elif not keep and rid in allowed:
                    leave.append(rid)
            if leave:
                self._entries[key] = (AllowedIds(chain(allowed.difference(leave), enter)), where, scope)
            elif enter:  # an insert: one copy of the set
                self._entries[key] = (AllowedIds(chain(allowed, enter)), where, scope)
            else:
                self.carried += 1

    def clear(self) -> None:
        """Forget every set (the next lookups resolve again)."""
        self._entries.clear()
        self.seq = None
