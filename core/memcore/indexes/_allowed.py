"""Allowed-id sets: what a query's ``where`` filter and scope resolve to, resolved once.

Resolving a filter is a store query (an SQL statement over every matching record); the
index search after it is often a fraction of a millisecond. So the collection keeps the
resolved sets in an :class:`AllowedCache` keyed by (filter, scope) and valid for one
store sequence number. The writer's own writes carry the sets forward
(:meth:`AllowedCache.advance`): the records the write changed are matched against each
cached filter in Python (the same semantics as the SQL, see :mod:`memcore.model._filters`), a set
no changed record enters or leaves stays the very same object (its index memos stay
valid), and a write that changes no record (component state) keeps every set. Any other
sequence change (another process's write, seen by a reader; a store write that bypassed
the collection) empties the cache, so a cached set is never stale.

A set the store can resolve as row numbers (:class:`AllowedRows`, what the collection hands an
index that declares :attr:`~memcore.indexes._index.Index.takes_store_rows`) is resolved lazily:
the index asks for the rows of its space in the store's vector file (one SQL statement, the
matches as one array: no string per id) and turns them into its own positions with one
vectorised gather; its ids are read only when something iterates it or tests membership.
An index may also ask which of a few candidates are members (:meth:`AllowedRows.among`: one
lookup of those ids in the store, not the whole set): a graph index searching unfiltered
first keeps the allowed candidates when they are enough (a broad filter) and resolves the
set only when they are not.

An :class:`AllowedIds` is a ``frozenset`` of record ids (every index takes it as the
``allowed`` set it always took) that also carries per-index memos: an index translates the
ids to its own labels or rows once per (set, index version) with :meth:`AllowedIds.memo`
instead of on every query. A set carried across a write that changed it is derived from
the old one (:meth:`AllowedIds.derive`) and inherits its memos with the ids that changed,
so an index that passes ``update`` to :meth:`AllowedIds.memo` translates only those ids
and its own changes (rows or labels appended, removed) instead of the whole set again.
"""

from __future__ import annotations

import weakref
from collections.abc import Set as AbstractSet
from itertools import chain
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterable, Iterator, Mapping, Sequence, TypeVar

import numpy as np

from ..model._document import DocumentFilter, document_matches
from ..model._filters import Filter, matches

if TYPE_CHECKING:
    from ..model._record import Record, Scope

__all__ = ["AllowedIds", "AllowedRows", "AllowedCache", "GatheredRows", "merge_sorted", "GATHER_MAX"]

T = TypeVar("T")


Memo = tuple["weakref.ref[Any]", Hashable, Any]
"""A memo entry: the owner (held weakly), its content version, the value."""

INHERIT_MAX = 4096
"""Most ids whose membership may differ between a set and the earlier set whose memos it
inherits (:meth:`AllowedIds.derive`); beyond, an index translates the set afresh."""


class AllowedIds(frozenset[str]):
    """An immutable set of record ids plus memos of what indexes derived from it.

    Build with ``AllowedIds(ids)``; use it as a ``frozenset``. Indexes that want to skip
    re-translating the same set call :meth:`memo`. A set made from another by a few ids
    (:meth:`derive`: the collection's cached sets after a write) inherits its memos, which
    an index can bring up to date instead of translating every id again (``update``).
    """

    __slots__ = ("_memo", "_inherited")
    _memo: dict[tuple[int, Hashable], Memo]
    _inherited: dict[tuple[int, Hashable], tuple[Memo, frozenset[str]]]

    def __new__(cls, ids: Iterable[str] = ()) -> "AllowedIds":
        self = super().__new__(cls, ids)
        self._memo = {}
        self._inherited = {}
        return self

    def derive(self, enter: Iterable[str], leave: Iterable[str]) -> "AllowedIds":
        """This set with ``enter`` added and ``leave`` removed, inheriting this set's memos
        (and those it inherited) together with the ids whose membership may differ."""
        enter, leave = list(enter), list(leave)
        new = AllowedIds(chain(self.difference(leave), enter) if leave else chain(self, enter))
        changed = frozenset(chain(enter, leave))
        for key, (memo, before) in self._inherited.items():
            if key not in self._memo and len(before) + len(changed) <= INHERIT_MAX:
                new._inherited[key] = (memo, before | changed)
        if len(changed) <= INHERIT_MAX:
            for key, memo in self._memo.items():
                new._inherited[key] = (memo, changed)
        return new

    def memo(
        self,
        owner: Any,
        tag: Hashable,
        version: Hashable,
        compute: Callable[[], T],
        update: Callable[[T, Any, frozenset[str]], T | None] | None = None,
    ) -> T:
        """``compute()``, remembered for ``owner`` (held weakly) under ``tag`` while
        ``version`` (the owner's content version) stays the same.

        ``update(value, version, changed)``, when given, is tried before ``compute`` on an
        earlier memo of the same owner and tag: ``value`` was computed at the owner's
        ``version`` for a set whose members differ from this one at most in the ids
        ``changed`` (empty when it is this very set, the owner having changed since). It
        returns the value for this set and the owner's present content, or None when it
        cannot (then ``compute()`` runs)."""
        return _memo(self._memo, self._inherited, owner, tag, version, compute, update)


def _memo(
    memos: dict[tuple[int, Hashable], Memo],
    inherited_memos: dict[tuple[int, Hashable], tuple[Memo, frozenset[str]]],
    owner: Any,
    tag: Hashable,
    version: Hashable,
    compute: Callable[[], T],
    update: Callable[[T, Any, frozenset[str]], T | None] | None,
) -> T:
    """:meth:`AllowedIds.memo` over the memos of one set (and those it inherited)."""
    key = (id(owner), tag)
    entry = memos.get(key)
    if entry is not None and entry[0]() is owner and entry[1] == version:
        cached: T = entry[2]
        return cached
    value: T | None = None
    if update is not None:
        if entry is not None and entry[0]() is owner:
            value = update(entry[2], entry[1], frozenset())
        else:
            inherited = inherited_memos.get(key)
            if inherited is not None and inherited[0][0]() is owner:
                value = update(inherited[0][2], inherited[0][1], inherited[1])
    if value is None:
        value = compute()
    inherited_memos.pop(key, None)
    memos[key] = (weakref.ref(owner), version, value)
    return value


class AllowedRows(AbstractSet[str]):
    """An allowed set resolved by the store lazily: as the rows of a space's vector file
    (:meth:`file_rows`, what an index over the store's rows turns into positions with one
    gather) or, when something iterates it or tests membership, as ids (an
    :class:`AllowedIds`, read once: :meth:`ids`).

    ``seq`` is the store sequence number the set is valid for: the collection hands it only to
    an index caught up to exactly that state (file rows are reused after deletes, so rows of
    another state could name another record), and the store answers :meth:`file_rows` only
    while it is still at ``seq`` (None otherwise: the index then translates the ids). It
    memoizes like :class:`AllowedIds` (:meth:`memo`)."""

    __slots__ = ("seq", "_resolve_ids", "_resolve_rows", "_resolve_among", "_resolve_saved", "_ids", "_rows", "_saved", "_memo", "_inherited", "__weakref__")

    def __init__(
        self,
        seq: int,
        resolve_ids: Callable[[], Iterable[str]],
        resolve_rows: Callable[[str, int], "np.ndarray | None"],
        resolve_among: Callable[[Sequence[str], int], "Iterable[str] | None"] | None = None,
        resolve_saved: Callable[[str, int], "np.ndarray | None"] | None = None,
    ):
        self.seq = seq
        self._resolve_ids = resolve_ids
        self._resolve_rows = resolve_rows
        self._resolve_among = resolve_among
        self._resolve_saved = resolve_saved
        self._ids: AllowedIds | None = None
        self._rows: dict[str, np.ndarray | None] = {}
        self._saved: dict[str, np.ndarray | None] = {}
        self._memo: dict[tuple[int, Hashable], Memo] = {}
        self._inherited: dict[tuple[int, Hashable], tuple[Memo, frozenset[str]]] = {}

    def ids(self) -> "AllowedIds":
        """The members as an :class:`AllowedIds` (read from the store on first use)."""
        ids = self._ids
        if ids is None:
            ids = self._ids = AllowedIds(self._resolve_ids())
        return ids

    @property
    def resolved(self) -> bool:
        """Whether the ids were read (:meth:`ids`)."""
        return self._ids is not None

    def file_rows(self, space: str) -> "np.ndarray | None":
        """The rows of the members' vectors in ``space``'s file of the store (int64, unsorted),
        at :attr:`seq`; None when the store cannot say (it moved on, or keeps no such file)."""
        if space not in self._rows:
            saved = self._saved.get(space)
            self._rows[space] = saved if saved is not None else self._resolve_rows(space, self.seq)
        return self._rows[space]

    def rows_known(self, space: str) -> bool:
        """Whether :meth:`file_rows` of ``space`` was asked for already (the set is resolved there)."""
        return space in self._rows

    def rows_at_hand(self, space: str) -> "np.ndarray | None":
        """What :meth:`file_rows` of ``space`` gives when that costs no resolving: asked for
        already, or kept by the store for this very filter at :attr:`seq` (the SQLite store's
        saved row sets); None otherwise. Asking does not count as resolving
        (:meth:`rows_known` stays as it was until :meth:`file_rows` is called)."""
        if space in self._rows:
            return self._rows[space]
        if space not in self._saved:
            self._saved[space] = None if self._resolve_saved is None else self._resolve_saved(space, self.seq)
        return self._saved[space]

    def among(self, ids: Sequence[str]) -> "frozenset[str] | None":
        """The members among ``ids`` (a few candidates), without resolving the whole set: from
        the ids when they were read, else one lookup of just these ids in the store at
        :attr:`seq` (the same filter, scope and text filter). None when the store cannot say
        (it moved on, or offers no such lookup): the caller resolves the set instead."""
        if self._ids is not None:
            return self._ids.intersection(ids)
        if self._resolve_among is None:
            return None
        found = self._resolve_among(ids, self.seq)
        return None if found is None else frozenset(found)

    def memo(
        self,
        owner: Any,
        tag: Hashable,
        version: Hashable,
        compute: Callable[[], T],
        update: Callable[[T, Any, frozenset[str]], T | None] | None = None,
    ) -> T:
        """As :meth:`AllowedIds.memo`."""
        return _memo(self._memo, self._inherited, owner, tag, version, compute, update)

    def carried(self, seq: int, rows_kept: bool) -> None:
        """The set's members are unchanged at store sequence ``seq`` (a write that no record
        entered or left). ``rows_kept``: no record was written at all, so the members' file
        rows stay too; otherwise they are read again when asked for (a member written
        anew, a new vector, has a new row)."""
        self.seq = seq
        if not rows_kept:
            self._rows.clear()
            self._saved.clear()

    def renewed(self, seq: int, changed: Iterable[str]) -> "AllowedRows":
        """The same filter resolved afresh at store sequence ``seq`` (after a write that changed
        the records ``changed``), inheriting this set's memos with those ids (the members of the
        two sets differ at most in them)."""
        new = AllowedRows(seq, self._resolve_ids, self._resolve_rows, self._resolve_among, self._resolve_saved)
        changed = frozenset(changed)
        if len(changed) <= INHERIT_MAX:
            for key, (memo, before) in self._inherited.items():
                if key not in self._memo and len(before) + len(changed) <= INHERIT_MAX:
                    new._inherited[key] = (memo, before | changed)
            for key, memo in self._memo.items():
                new._inherited[key] = (memo, changed)
        return new

    def derive(self, enter: Iterable[str], leave: Iterable[str]) -> "AllowedIds":
        """:meth:`AllowedIds.derive` of its ids, inheriting the memos made on this set too."""
        enter, leave = list(enter), list(leave)
        new = self.ids().derive(enter, leave)
        changed = frozenset(chain(enter, leave))
        if len(changed) <= INHERIT_MAX:
            for key, memo in self._memo.items():
                new._inherited.setdefault(key, (memo, changed))
            for key, (memo, before) in self._inherited.items():
                if key not in self._memo and len(before) + len(changed) <= INHERIT_MAX:
                    new._inherited.setdefault(key, (memo, before | changed))
        return new

    def __contains__(self, rid: object) -> bool:
        return rid in self.ids()

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids())

    def __len__(self) -> int:
        return len(self.ids())

    def __hash__(self) -> int:
        return hash(self.ids())

    def __eq__(self, other: object) -> bool:
        return self.ids() == other

    def __repr__(self) -> str:
        return f"AllowedRows(seq={self.seq}, resolved={self.resolved})"


def merge_sorted(sorted_values: "np.ndarray", drop: Iterable[int], add: Iterable[int]) -> "np.ndarray":
    """``sorted_values`` (sorted, unique int64) without ``drop`` and with ``add``, sorted and
    unique: how an index brings the rows or labels of an allowed set up to date. Values
    appended past the end (new rows, new labels: the usual case) cost one concatenation."""
    out = sorted_values
    drop = list(drop)
    if drop:
        out = out[~np.isin(out, drop)]
    extra = np.asarray(sorted(set(add)), dtype=np.int64)  # a few values: Python's sort beats np.unique's overhead
    if not len(extra):
        return out
    if not len(out) or extra[0] > out[-1]:
        return np.concatenate([out, extra])
    merged = np.concatenate([out, extra])
    merged.sort()
    keep = np.empty(len(merged), dtype=bool)
    keep[0] = True
    np.not_equal(merged[1:], merged[:-1], out=keep[1:])
    return merged[keep]


GATHER_MAX = 8192
"""Most rows an index keeps gathered for one allowed set (:class:`GatheredRows`)."""


class GatheredRows:
    """The vectors of an allowed set's rows (or labels), gathered into one contiguous buffer:
    an index scoring a small allowed set exactly reads them in order instead of gathering
    them from its whole matrix for every query (memoized with :meth:`AllowedIds.memo`).

    Rows ``[0, n)`` of the buffer are the vectors of ``rows`` in order. Records joining the
    set get rows past every earlier one (appended), so :meth:`extended` appends theirs in
    place when this view holds the buffer's last written row; an earlier view keeps reading
    only its own ``n`` rows, which are never written again. Only for row numbers whose
    vectors do not change meanwhile: an index calls :meth:`extended` only while no row moved."""

    __slots__ = ("rows", "buffer", "n")

    def __init__(self, rows: np.ndarray, buffer: "_Buffer", n: int):
        self.rows = rows
        self.buffer = buffer
        self.n = n

    @classmethod
    def of(cls, rows: np.ndarray, stored: np.ndarray) -> "GatheredRows":
        """Gather ``stored[rows]`` (with room for a few more rows)."""
        buffer = _Buffer(np.empty((len(rows) + max(16, len(rows) // 8), stored.shape[1]), dtype=stored.dtype))
        # mode "clip": written in place ("raise" buffers the output: 2-5x slower); the rows are the index's own
        np.take(stored, rows, axis=0, out=buffer.array[: len(rows)], mode="clip")
        buffer.filled = len(rows)
        return cls(rows, buffer, len(rows))

    def matrix(self) -> np.ndarray:
        """The gathered vectors, one row per entry of ``rows``."""
        view: np.ndarray = self.buffer.array[: self.n]
        return view

    def extended(self, rows: np.ndarray, stored: np.ndarray) -> "GatheredRows | None":
        """``stored[rows]`` when ``rows`` are this view's rows plus new ones past the last
        (appended in place when nobody appended after this view, else copied); None otherwise."""
        n, m = self.n, len(rows)
        if m < n or not np.array_equal(rows[:n], self.rows) or (n and m > n and rows[n] <= self.rows[-1]):
            return None
        buffer = self.buffer
        if buffer.filled != n or m > len(buffer.array):  # another view owns the rows past n, or no room
            grown = _Buffer(np.empty((max(2 * m, m + 16), stored.shape[1]), dtype=stored.dtype))
            grown.array[:n] = buffer.array[:n]
            buffer = grown
        np.take(stored, rows[n:], axis=0, out=buffer.array[n:m], mode="clip")
        buffer.filled = m
        return GatheredRows(rows, buffer, m)


class _Buffer:
    """A gathered-rows array and how many of its rows are written."""

    __slots__ = ("array", "filled")

    def __init__(self, array: np.ndarray):
        self.array = array
        self.filled = 0


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
        self._entries: dict[Hashable, tuple[AllowedIds | AllowedRows, Filter | None, "Scope | None", DocumentFilter | None]] = {}
        self.hits = 0
        self.misses = 0
        self.carried = 0

    def get(
        self,
        seq: int,
        key: Hashable,
        resolve: Callable[[], Iterable[str]],
        where: Filter | None = None,
        scope: "Scope | None" = None,
        where_document: DocumentFilter | None = None,
        rows: Callable[[str, int], "np.ndarray | None"] | None = None,
        among: Callable[[Sequence[str], int], "Iterable[str] | None"] | None = None,
        saved: Callable[[str, int], "np.ndarray | None"] | None = None,
    ) -> "AllowedIds | AllowedRows":
        """The set for ``key`` at store sequence ``seq`` (``resolve()`` on a miss).

        ``where``, ``scope`` and ``where_document`` (a text filter) are what ``resolve``
        evaluates; :meth:`advance` re-checks changed records against them. With ``rows`` (the
        store's ``rows(space, seq)``: the members' file rows), a set not read as ids yet is
        returned as an :class:`AllowedRows` (made lazily on a miss; ``among``, the store's
        ``among(ids, seq)``, answers :meth:`AllowedRows.among`; ``saved``, the rows the store
        kept without resolving, :meth:`AllowedRows.rows_at_hand`); without, always as ids."""
        if seq != self.seq:
            self._entries.clear()
            self.seq = seq
        found = self._entries.get(key)
        if found is not None:
            self.hits += 1
            allowed = found[0]
            if rows is None and isinstance(allowed, AllowedRows):
                return allowed.ids()
            return allowed
        self.misses += 1
        made: AllowedIds | AllowedRows = AllowedIds(resolve()) if rows is None else AllowedRows(seq, resolve, rows, among, saved)
        if len(self._entries) >= self.size:
            self._entries.pop(next(iter(self._entries)))
        self._entries[key] = (made, where, scope, where_document)
        return made

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
            for allowed, *_ in self._entries.values():
                if isinstance(allowed, AllowedRows):
                    allowed.carried(after, rows_kept=True)
            return
        for key, (allowed, where, scope, document) in list(self._entries.items()):
            if isinstance(allowed, AllowedRows) and not allowed.resolved:
                # its ids were never read (what it held before this write is unknown): the same
                # filter at the new state, inheriting the memos with every changed id
                self._entries[key] = (allowed.renewed(after, changed.keys()), where, scope, document)
                continue
            enter: list[str] = []
            leave: list[str] = []
            for rid, record in changed.items():
                keep = (
                    record is not None
                    and (scope is None or scope.covers(record.scope))
                    and matches(where, record.metadata)
                    and (document is None or document_matches(document, record.text))
                )
                if keep and rid not in allowed:
                    enter.append(rid)
                elif not keep and rid in allowed:
                    leave.append(rid)
            if leave or enter:  # a new set inheriting the memos: indexes update their translations
                self._entries[key] = (allowed.derive(enter, leave), where, scope, document)
            else:
                self.carried += 1
                if isinstance(allowed, AllowedRows):
                    allowed.carried(after, rows_kept=False)

    def clear(self) -> None:
        """Forget every set (the next lookups resolve again)."""
        self._entries.clear()
        self.seq = None
