"""``OrderedIds``: ids kept sorted by a key, the structure under the ``fifo`` and ``sorted`` indexes.

Entries are ``(key, id)`` tuples in one Python list kept in ascending order (ties between
equal keys are broken by id, because tuples compare element by element), plus a dict
``id -> key``. Finding an entry or a key bound is a ``bisect`` (O(log n)); inserting or
deleting one entry is a ``bisect`` plus a ``list.insert``/``del`` (a memmove of pointers:
a few microseconds at 10^5 entries, some 100 microseconds at 10^6). Large batches are merged with one sort or one
filtering pass instead, and keys that arrive in increasing order (a queue's sequence
numbers) are appended without any search.

Keys must be mutually comparable: the indexes built on this check their keys before they
get here (all numbers, all strings, or all ``(float, int)`` tuples).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from operator import itemgetter
from typing import Any, Collection as AbstractSet, Iterable, Iterator, Sequence

__all__ = ["OrderedIds", "Entry"]

Entry = tuple[int, Any, str]
"""One selected entry: ``(position in ascending order, key, id)``."""

_first = itemgetter(0)

#: a batch of at least this many entries (or 1/8 of the held ones) is merged by re-sorting
_BULK = 64


class OrderedIds:
    """A set of ids, each with a key, iterable in ``(key, id)`` order."""

    __slots__ = ("_keys", "_entries")

    def __init__(self) -> None:
        self._keys: dict[str, Any] = {}
        self._entries: list[tuple[Any, str]] = []

    # -- size and lookups -----------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, rid: object) -> bool:
        return rid in self._keys

    def key_of(self, rid: str) -> Any:
        """The key of ``rid`` (KeyError when absent)."""
        return self._keys[rid]

    def position(self, rid: str) -> int:
        """0-based position of ``rid`` in ascending order (KeyError when absent)."""
        return bisect_left(self._entries, (self._keys[rid], rid))

    def entries(self) -> list[tuple[Any, str]]:
        """A copy of every ``(key, id)`` entry, ascending."""
        return list(self._entries)

    def __iter__(self) -> Iterator[tuple[Any, str]]:
        return iter(self._entries)

    # -- writes ---------------------------------------------------------------------------

    def put(self, pairs: Iterable[tuple[str, Any]]) -> None:
        """Insert ``(id, key)`` pairs; a held id is moved to its new key; a repeated id: the last pair wins."""
        latest = dict(pairs)
        if not latest:
            return
        self.discard(list(latest))
        new = sorted((key, rid) for rid, key in latest.items())
        self._keys.update(latest)
        entries = self._entries
        if not entries or new[0] > entries[-1]:
            entries.extend(new)  # keys after everything held (a queue): append
        elif len(new) >= _BULK or len(new) * 8 >= len(entries):
            entries.extend(new)
            entries.sort()  # timsort merges the two sorted runs in linear time
        else:
            for entry in new:
                insort(entries, entry)

    def discard(self, ids: Iterable[str]) -> int:
        """Remove ids (unknown ids are ignored); returns how many were removed."""
        keys = self._keys
        gone = {rid: keys.pop(rid) for rid in dict.fromkeys(ids) if rid in keys}
        if not gone:
            return 0
        entries = self._entries
        if len(gone) >= _BULK and len(gone) * 8 >= len(entries) - len(gone):
            self._entries = [e for e in entries if e[1] not in gone]
        else:
            for rid, key in gone.items():
                del entries[bisect_left(entries, (key, rid))]
        return len(gone)

    def clear(self) -> None:
        """Remove everything."""
        self._keys.clear()
        self._entries.clear()

    def load(self, entries: Sequence[tuple[Any, str]]) -> None:
        """Replace the contents with ``entries``, which must be strictly ascending with unique ids.

        Raises ValueError otherwise (the caller turns it into its own error).
        """
        entries = [(key, rid) for key, rid in entries]
        for a, b in zip(entries, entries[1:]):
            if not a < b:
                raise ValueError(f"entries are not in ascending (key, id) order at {b[1]!r}")
        keys = {rid: key for key, rid in entries}
        if len(keys) != len(entries):
            raise ValueError("an id appears twice")
        self._entries = entries
        self._keys = keys

    # -- reads ----------------------------------------------------------------------------

    def bounds(self, *, gte: Any = None, gt: Any = None, lte: Any = None, lt: Any = None) -> tuple[int, int]:
        """The slice ``[lo, hi)`` of positions whose keys satisfy the given bounds (None: unbounded)."""
        entries = self._entries
        lo, hi = 0, len(entries)
        if gte is not None:
            lo = bisect_left(entries, gte, key=_first)
        elif gt is not None:
            lo = bisect_right(entries, gt, key=_first)
        if lte is not None:
            hi = bisect_right(entries, lte, key=_first)
        elif lt is not None:
            hi = bisect_left(entries, lt, key=_first)
        return lo, max(lo, hi)

    def select(
        self,
        n: int,
        *,
        lo: int = 0,
        hi: int | None = None,
        descending: bool = False,
        allowed: AbstractSet[str] | None = None,
    ) -> list[Entry]:
        """Up to ``n`` entries of positions ``[lo, hi)``, ascending (or descending), only ids in ``allowed``.

        With ``allowed``, it either walks the slice skipping other ids or looks up each
        allowed id, whichever is expected to touch fewer entries; both give the same result.
        """
        entries = self._entries
        hi = len(entries) if hi is None else min(hi, len(entries))
        lo = max(0, lo)
        if n <= 0 or lo >= hi:
            return []
        if allowed is None:
            if descending:
                start = max(lo, hi - n)
                return [(i, key, rid) for i, (key, rid) in zip(range(hi - 1, start - 1, -1), reversed(entries[start:hi]))]
            stop = min(hi, lo + n)
            return [(i, key, rid) for i, (key, rid) in zip(range(lo, stop), entries[lo:stop])]
        if not allowed:
            return []
        span = hi - lo
        expected_walk = n * span / len(allowed)  # allowed ids spread evenly: n hits every span/|allowed|
        if expected_walk <= 4 * len(allowed):
            return self._walk(n, lo, hi, descending, allowed)
        return self._lookup(n, lo, hi, descending, allowed)

    def _walk(self, n: int, lo: int, hi: int, descending: bool, allowed: AbstractSet[str]) -> list[Entry]:
        entries = self._entries
        out: list[Entry] = []
        positions = range(hi - 1, lo - 1, -1) if descending else range(lo, hi)
        for i in positions:
            key, rid = entries[i]
            if rid in allowed:
                out.append((i, key, rid))
                if len(out) == n:
                    break
        return out

    def _lookup(self, n: int, lo: int, hi: int, descending: bool, allowed: AbstractSet[str]) -> list[Entry]:
        entries, keys = self._entries, self._keys
        found = []
        for rid in allowed:
            key = keys.get(rid, _MISSING) if isinstance(rid, str) else _MISSING
            if key is _MISSING:
                continue
            i = bisect_left(entries, (key, rid))
            if lo <= i < hi:
                found.append((i, key, rid))
        found.sort(key=_first, reverse=descending)
        return found[:n]


_MISSING = object()
