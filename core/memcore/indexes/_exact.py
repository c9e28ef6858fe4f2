"""The builtin ``exact`` vector index: brute-force numpy search (cosine, inner product, L2).

Exact and dependency-free, fast enough for tens of thousands of vectors; for more, use
the faiss plugin (``memcore[faiss]``).
"""

from __future__ import annotations

import json
import math
import mmap
import sys
from collections.abc import Sequence as SequenceABC
from itertools import repeat
from operator import neg
from pathlib import Path
from typing import Any, Collection as AbstractSet, Literal, Sequence

import numpy as np
from pydantic import Field

from ._allowed import GATHER_MAX, AllowedIds, AllowedRows, GatheredRows, merge_sorted
from ..errors import CorruptError, DimensionError
from .._util.atomic import atomic_write_bytes, atomic_write_json, atomic_write_with
from ._index import IndexContext
from ..model._query import Hit
from ..model._query import Query
from ..model._record import Record
from ..model._checks import check_finite_vectors
from ..model._record_rows import norms_checked
from ._vector import VectorIndex
from ._exact_mapped import ROWS, SCALE, MappedRows
from .._plugins._registry import ComponentConfig

__all__ = ["ExactIndex", "ExactIndexConfig", "top_k", "top_columns", "product_pays"]

MATRIX = "matrix.npy"
"""The held rows, prepared, as a raw ``.npy`` (format 2): memory-mapped at load."""


class ExactIndexConfig(ComponentConfig):
    """Settings of the ``exact`` index."""

    kind: str = "exact"
    space: str = Field("default", description="Embedding space whose vectors are indexed.")
    metric: Literal["cosine", "ip", "l2"] = Field("cosine", description="cosine similarity, inner product, or L2 (score = -squared distance).")


def product_pays(queries: int, rows: int, dim: int) -> bool:
    """Whether one matrix product for ``queries`` query vectors beats a matrix-vector
    product each, over ``rows`` rows of ``dim`` values: with a single-threaded OpenBLAS a
    product of a few queries costs more than their matrix-vector products (measured, x86_64:
    10k x 128, 2 queries 0.82 ms against 0.28, still behind at 6, ahead from 8; 100k x 384, where
    each matrix-vector product reads the whole matrix again, ahead from 4)."""
    return queries >= 8 or (queries >= 4 and rows * dim >= 1 << 24)


def top_k(scores: np.ndarray, ids: Sequence[str], k: int) -> list[tuple[str, float]]:
    """The ``k`` best (id, score) pairs, ties broken by id for determinism."""
    return list(zip(*top_columns(scores, ids, k)))


def top_columns(scores: np.ndarray, ids: Sequence[str], k: int) -> tuple[list[str], list[float]]:
    """:func:`top_k` as two lists, the ids and their scores (what the index builds hits from)."""
    n = scores.shape[0]
    if n == 0:
        return [], []
    if k < n:
        # the k-th best score by value (a partition of a copy: half the cost of argpartition), then
        # every row scoring at least that: the k best plus any tied with the k-th, so the id tie-break is exact
        kth_of = scores.copy()
        kth_of.partition(n - k)  # the method: np.partition without its Python wrapper
        kth = kth_of[n - k]
        part = (scores >= kth).nonzero()[0]  # np.flatnonzero without its Python wrapper (scores is 1-d)
    else:
        part = np.arange(n)
    if len(part) <= 64:  # a short list: two C-level Python sorts are cheaper than numpy calls
        values = scores[part].tolist()
        rids = list(map(ids.__getitem__, part.tolist()))
        order = sorted(range(len(rids)), key=rids.__getitem__)  # by id, then (stable) by score, best first
        order.sort(key=values.__getitem__, reverse=True)
        del order[k:]
        return list(map(rids.__getitem__, order)), list(map(values.__getitem__, order))
    part = part[np.argsort(-scores[part], kind="stable")]
    ranked = scores[part]
    if len(part) <= k and not (ranked[1:] == ranked[:-1]).any():  # no ties: numpy's order is final
        return [ids[i] for i in part.tolist()], ranked.tolist()
    values_of = dict(zip(part.tolist(), ranked.tolist()))
    best = sorted(values_of, key=lambda i: (-values_of[i], ids[i]))[:k]
    return [ids[i] for i in best], [values_of[i] for i in best]


GATHER_BLOCK = 128
"""Rows gathered at a time by :func:`gathered_dot` (192 KiB at 384 float32: in the CPU cache,
and below the allocator's fresh-mapping threshold: a 1024-row buffer cost ~380 page faults,
~0.9 ms, the first time a process scored a set)."""


def gathered_dot(stored: np.ndarray, picks: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``stored[picks].dot(q)`` without the gathered copy: :data:`GATHER_BLOCK` rows at a time
    into one reused buffer, each block's product written into the result."""
    out = np.empty(len(picks), dtype=np.result_type(stored.dtype, q.dtype))
    buffer = np.empty((min(GATHER_BLOCK, len(picks)), stored.shape[1]), dtype=stored.dtype)
    for start in range(0, len(picks), GATHER_BLOCK):
        part = picks[start : start + GATHER_BLOCK]
        block = buffer[: len(part)]
        np.take(stored, part, axis=0, out=block, mode="clip")  # "clip": written in place ("raise" buffers the output)
        np.dot(block, q, out=out[start : start + len(part)])
    return out


def _map_matrix(path: Path) -> Any:
    """The ``.npy`` at ``path`` memory-mapped copy-on-write, as a plain ndarray (numpy's
    ``memmap`` subclass makes every later slice and product several times slower), its
    pages mapped ahead where the kernel can (``MADV_POPULATE_READ``, Linux 5.14+: ~14 ms
    for 100k x 384 in the page cache, against ~130 ms of page faults in the first filtered
    query that gathers scattered rows); whatever is not an ``.npy`` is returned as
    ``np.load`` gives it, for the caller's checks."""
    mapped = np.load(path, mmap_mode="c", allow_pickle=False)
    if not isinstance(mapped, np.memmap):
        return mapped
    handle = getattr(mapped, "_mmap", None)
    advice = getattr(mmap, "MADV_POPULATE_READ", 22 if sys.platform == "linux" else None)
    if handle is not None and advice is not None and mapped.size:
        try:
            handle.madvise(advice)
        except (OSError, ValueError, AttributeError):  # an older kernel, or no madvise: faulted in on use
            pass
    return mapped.view(np.ndarray)


class _RowIds(SequenceABC[str]):
    """The ids of some rows, by position in ``rows`` (read only while the index is unchanged:
    memos of it are keyed by the index version)."""

    __slots__ = ("_ids", "_rows")

    def __init__(self, ids: Sequence[str], rows: np.ndarray):
        self._ids = ids
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._ids[r] for r in self._rows[i].tolist()]
        return self._ids[int(self._rows[i])]


IDS_TEXT = "ids.txt"
"""The ids of the rows, UTF-8, one per line (format 3, when no id holds a line break)."""


class SavedIds(SequenceABC[str]):
    """The ids of a loaded save, read from ``ids.txt`` without building a string per id:
    an id is decoded when asked for (a query decodes its hits' ids only). An index that
    changes turns it into a list first (:meth:`ExactIndex._id_list`)."""

    __slots__ = ("_blob", "_breaks")

    def __init__(self, blob: bytes):
        self._blob = blob
        # the line breaks (numpy's: no Python int per id); id ``i`` ends at break ``i``
        breaks = np.flatnonzero(np.frombuffer(blob, dtype=np.uint8) == 10) if blob else np.zeros(0, dtype=np.int64)
        self._breaks = np.append(breaks, len(blob)) if blob else breaks

    def __len__(self) -> int:
        return len(self._breaks)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        breaks = self._breaks
        end = int(breaks[i])
        if i < 0:
            i += len(breaks)
        return self._blob[int(breaks[i - 1]) + 1 if i > 0 else 0 : end].decode()

    def to_list(self) -> list[str]:
        """Every id, as a list."""
        return self._blob.decode().split("\n") if self._blob else []

    def text(self) -> bytes:
        """The ``ids.txt`` bytes it was read from."""
        return self._blob


_MEMOIZED = (AllowedIds, AllowedRows)
"""The allowed sets that keep an index's translations (:meth:`AllowedIds.memo`)."""


class ExactIndex(VectorIndex):
    """A float32 matrix with one row per id; search is one matrix-vector product."""

    config: ExactIndexConfig
    format_version = 3
    readable_versions = (1, 2)
    takes_store_rows = True

    def __init__(self, config: ExactIndexConfig, context: IndexContext):
        super().__init__(config, context)
        self.score_name = {"cosine": "cosine similarity", "ip": "inner product", "l2": "negative squared L2 distance"}[config.metric]
        self.score_range = {"cosine": (-1.0, 1.0), "ip": (None, None), "l2": (None, 0.0)}[config.metric]
        self.cosine_space = config.space if config.metric == "cosine" else None
        self._matrix = np.zeros((0, self.dim), dtype=np.float32)
        self._ids: list[str] | SavedIds = []
        self._rows_map: dict[str, int] | None = {}
        self._n = 0
        self._epoch = 0  # bumped when held rows move or go (not on appends): memos of allowed sets compare (epoch, rows)
        self._reader = context.vectors  # the store's vectors: what a format-1 save without its own copy reads back
        self._mapped: MappedRows | None = None
        """The rows are the store's (its mapped file), not :attr:`_matrix`: see :mod:`._exact_mapped`."""
        self._own = False  # the rows could not be the store's: a copy of its own until rebuilt
        self._position_memo: tuple[tuple[int, int], np.ndarray] | None = None

    @property
    def _rows(self) -> dict[str, int]:
        """The position of each id, built on first use after a load (a search needs none)."""
        rows = self._rows_map
        if rows is None:
            ids = self._id_list()
            rows = self._rows_map = dict(zip(ids, range(len(ids))))
            if len(rows) != len(ids):
                raise CorruptError(f"exact index {self.name!r}: the saved ids repeat an id")
        return rows

    @_rows.setter
    def _rows(self, rows: dict[str, int]) -> None:
        self._rows_map = rows

    def _id_list(self) -> list[str]:
        """The ids as a list (a loaded :class:`SavedIds` is turned into one: the index changes)."""
        ids = self._ids
        if not isinstance(ids, list):
            ids = self._ids = ids.to_list()
        return ids

    def _prepare(self, vectors: np.ndarray, *, in_place: bool = False) -> np.ndarray:
        """Vectors as the index keeps them (unit rows for cosine). ``in_place``: ``vectors``
        is a float32 matrix the caller hands over (one read from the store on load): it is
        normalised where it is, in blocks, with the same values as a copy would get."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise DimensionError(f"index {self.name!r} expects dimension {self.dim}, got shape {vectors.shape}")
        if self.config.metric == "cosine":
            if in_place and vectors.flags.writeable and vectors.flags.c_contiguous:
                for start in range(0, vectors.shape[0], 8192):  # no full-size temporaries
                    block = vectors[start : start + 8192]
                    norms = np.linalg.norm(block, axis=1, keepdims=True)
                    np.divide(block, norms, out=block, where=norms > 0)
                    zero = norms[:, 0] == 0
                    if zero.any():
                        block[zero] = 0  # as the copy gets them (only all-zero rows have a zero norm once validated)
                return vectors
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        return vectors

    def add(self, records: Sequence[Record]) -> None:
        if not records:
            return
        # a batch may repeat an id: the last one wins (rows in order of first appearance, as before)
        latest, vectors = self.record_matrix(records, latest=True)
        if not norms_checked(vectors):  # a column batch's matrix passed this check when it was built
            check_finite_vectors(vectors, f"index {self.name!r}: vectors")  # norms float32 arithmetic handles
        mapped = self._mapped if self._mapped is not None or self._n else self._map_store()
        if mapped is not None:
            rows = mapped.rows_of(latest, vectors)
            if rows is not None:
                self._add_mapped(mapped, latest, rows, vectors)
                return
            self._own_copy()
        start, count = self._n, len(latest)
        self._reserve(start + count)
        # the checked vectors are normalised where they are, then go into the spare rows past
        # the held ones (an overflowing row is never normalised to zeros)
        block = self._matrix[start : start + count]
        block[...] = self._prepare(vectors, in_place=True)
        if not self._rows.keys().isdisjoint(latest):  # some ids are held already: replaced
            self.remove([rid for rid in latest if rid in self._rows])  # moves held rows only, all below ``start``
            if self._n != start:
                self._matrix[self._n : self._n + count] = block  # numpy copies overlapping rows safely
                start = self._n
        self._rows.update(zip(latest, range(start, start + count)))
        self._id_list().extend(latest)
        self._n = start + count

    def _map_store(self) -> MappedRows | None:
        """An empty index over a store that keeps this space in a mapped file: its rows
        become the store's (None: a copy of its own, as without a store)."""
        if self._own or self._reader is None:
            return None
        space = self._reader.mapped(self.config.space, self.dim)
        if space is None:
            return None
        self._mapped = MappedRows(space, self.config.metric == "cosine")
        return self._mapped

    def _add_mapped(self, mapped: MappedRows, latest: list[str], rows: np.ndarray, vectors: np.ndarray) -> None:
        if not self._rows.keys().isdisjoint(latest):  # some ids are held already: replaced
            self.remove([rid for rid in latest if rid in self._rows])
        start = self._n
        mapped.put(start, rows, vectors)
        self._rows.update(zip(latest, range(start, start + len(latest))))
        self._id_list().extend(latest)
        self._n = start + len(latest)

    def _own_copy(self) -> None:
        """Keep the rows in a matrix of its own from now on (the store does not hold some
        vector it was given): the held rows are copied out of the store's file."""
        mapped, self._mapped, self._own = self._mapped, None, True
        if mapped is not None:
            self._matrix = mapped.vectors(None, self._n) if self._n else np.zeros((0, self.dim), dtype=np.float32)
            self._epoch += 1

    def _reserve(self, need: int) -> None:
        """Room for ``need`` rows (at least doubling, so appends stay amortised O(1))."""
        if need > self._matrix.shape[0]:
            rows = max(need, 2 * self._matrix.shape[0], 64)
            try:  # in place: realloc lets the kernel move the held pages, nothing is copied or touched again
                self._matrix.resize((rows, self.dim), refcheck=True)  # new rows are zeros, as np.zeros gives
            except ValueError:  # a view of the matrix is alive, or it does not own its data: a grown copy
                grown = np.zeros((rows, self.dim), dtype=np.float32)
                grown[: self._n] = self._matrix[: self._n]
                self._matrix = grown

    def remove(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        held, self._ids = self._rows, self._id_list()
        for rid in ids:
            row = held.pop(rid, None)
            if row is None:
                continue
            self._epoch += 1
            last = self._n - 1
            if row != last:
                moved = self._ids[last]
                if self._mapped is not None:
                    self._mapped.move(row, last)
                else:
                    self._matrix[row] = self._matrix[last]
                self._ids[row] = moved
                self._rows[moved] = row
            self._ids.pop()
            self._n -= 1

    def _scores(self, rows: np.ndarray | None, queries: np.ndarray) -> np.ndarray:
        if self._mapped is not None:
            matrix = self._mapped.vectors(rows, self._n)
        else:
            matrix = self._matrix[: self._n] if rows is None else self._matrix[rows]
        if self.config.metric == "l2":
            diff = (matrix * matrix).sum(axis=1)[None, :] - 2.0 * (queries @ matrix.T) + (queries * queries).sum(axis=1)[:, None]
            scores: np.ndarray = -np.maximum(diff, 0.0)
            return scores
        product: np.ndarray = queries @ matrix.T
        return product

    def _search(self, query: Query, q: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        # runs for every query: the common case (no allowed set) without a call
        rows: np.ndarray | None
        ids: Sequence[str]
        if allowed is None:
            rows, ids = None, self._ids
        else:
            rows, ids = self._rows_of(allowed)
        if not ids:
            return []
        metric = self.config.metric
        if metric == "l2":
            scores = self._scores(rows, q.reshape(1, -1))[0]
        else:  # one matrix-vector product (BLAS gemv), the query normalised for cosine
            if metric == "cosine":
                norm = math.sqrt(float(q.dot(q)))
                q = q / norm if norm > 0 else np.zeros_like(q)
            mapped = self._mapped
            if mapped is not None and rows is None:
                scores = mapped.scores(q, self._n)
            elif rows is not None and 4 * len(rows) > self._n and (len(rows) > GATHER_MAX or not isinstance(allowed, _MEMOIZED)):
                # a dense allowed set no gathered copy holds: gathering its rows reads and writes
                # them before the product reads them again; one product over every row reads each
                # row once (2x faster at half of 100k x 384, measured), then its rows' scores are picked
                scores = (self._matrix[: self._n].dot(q) if mapped is None else mapped.scores(q, self._n))[rows]
            elif rows is not None and (len(rows) > GATHER_MAX or self._first_use(allowed)):
                # too many rows to keep a gathered copy, or a set's first query (a filter queried once never earns
                # the copy's page faults back): the rows gathered and scored block by block in one small buffer
                # (it stays in the CPU cache, and no set-sized array is allocated and faulted in)
                stored, picks = (self._matrix, rows) if mapped is None else (mapped.raw(), mapped.file_rows(rows))
                scores = gathered_dot(stored, picks, q)
                if mapped is not None:
                    scores = mapped.rescale(scores, rows)
            elif mapped is not None:
                assert rows is not None
                scores = mapped.rescale(self._matrix_of(rows, allowed).dot(q), rows)
            else:
                matrix = self._matrix[: self._n] if rows is None else self._matrix_of(rows, allowed)
                scores = matrix.dot(q)  # the method: cheaper than the @ operator for a matrix-vector product
        return self._hits(scores, ids, k)

    def _first_use(self, allowed: AbstractSet[str] | None) -> bool:
        """Whether ``allowed`` is a cached set this index scores for the first time: its rows
        are then scored block by block, and :meth:`_matrix_of` keeps a gathered copy from its
        second query on (writing a fresh copy of 1,000 rows of 384 floats costs ~380 page
        faults, more than the query that reads it, which a filter queried once never earns
        back). A set derived from one after a write continues its count."""
        if not isinstance(allowed, _MEMOIZED):
            return False
        uses: list[int] = allowed.memo(self, "uses", 0, lambda: [0], lambda old, _version, _changed: old)
        uses[0] += 1
        return uses[0] == 1

    def _matrix_of(self, rows: np.ndarray | None, allowed: AbstractSet[str] | None) -> np.ndarray:
        """The vectors of ``rows`` (all when None); a cached allowed set of up to
        :data:`~memcore.indexes._allowed.GATHER_MAX` rows keeps them gathered (:class:`GatheredRows`),
        extended as records are appended, gathered again once rows moved."""
        if rows is None:
            return self._matrix[: self._n]
        # mapped: the store's raw rows of these positions (the caller rescales their scores)
        stored, picks = (self._matrix, rows) if self._mapped is None else (self._mapped.raw(), self._mapped.file_rows(rows))
        if not isinstance(allowed, _MEMOIZED) or len(rows) > GATHER_MAX:
            picked: np.ndarray = stored[picks]
            return picked
        gathered: GatheredRows = allowed.memo(
            self,
            "gathered",
            (self._epoch, self._n),
            lambda: GatheredRows.of(picks, stored),
            lambda old, version, _changed: old.extended(picks, stored) if version[0] == self._epoch else None,
        )
        return gathered.matrix()

    def _hits(self, scores: np.ndarray, ids: Sequence[str], k: int) -> list[Hit]:
        rids, values = top_columns(scores, ids, k)
        raws = map(neg, values) if self.config.metric == "l2" else values
        return list(map(Hit, rids, values, raws, repeat(self.name)))  # Hit called from C: no per-hit Python frame of a comprehension

    def _rows_of(self, allowed: AbstractSet[str] | None) -> tuple[np.ndarray | None, Sequence[str]]:
        """The matrix rows (None: all) and their ids that ``allowed`` selects."""
        if allowed is None:
            return None, self._ids
        if isinstance(allowed, _MEMOIZED):  # the same set again: rows and ids computed once, then kept up to date
            return allowed.memo(
                self,
                "rows",
                (self._epoch, self._n),
                lambda: self._allowed_rows(allowed),
                lambda old, version, changed: self._update_rows(allowed, old, version, changed),
            )
        return self._allowed_rows(allowed)

    def _update_rows(
        self, allowed: AbstractSet[str], old: tuple[np.ndarray, Sequence[str]], version: tuple[int, int], changed: AbstractSet[str]
    ) -> tuple[np.ndarray, Sequence[str]] | None:
        """:meth:`_allowed_rows` of ``allowed`` from ``old``, its rows at ``version`` for a
        set differing from ``allowed`` at most in ``changed``: the rows appended since and the
        rows of ``changed`` are checked, nothing else (None when rows moved or went since)."""
        epoch, n = version
        if epoch != self._epoch or n > self._n or len(changed) + self._n - n > max(64, len(old[0]) // 4):
            return None
        ids, rows_of = self._ids, self._rows
        add = [row for row in range(n, self._n) if ids[row] in allowed]
        drop: list[int] = []
        for rid in changed:
            row = rows_of.get(rid)
            if row is None or row >= n:  # not held, or appended (checked above)
                continue
            (add if rid in allowed else drop).append(row)
        rows = merge_sorted(old[0], drop, add)
        return rows, _RowIds(ids, rows)

    def _search_batch(self, queries: Sequence[Query], matrix: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[list[Hit]]:
        rows, ids = self._rows_of(allowed)
        if not ids:
            return [[] for _ in queries]
        if self.config.metric != "l2" and not product_pays(len(queries), len(ids), self.dim):
            return [self._search(query, self.query_vector(query), k, allowed) for query in queries]  # the single searches, exactly
        q = self._prepare(matrix)
        scores = self._scores(rows, q) if self.config.metric == "l2" else self._products(rows, q, allowed)
        return [self._hits(row, ids, k) for row in scores]

    def _products(self, rows: np.ndarray | None, queries: np.ndarray, allowed: AbstractSet[str] | None) -> np.ndarray:
        """The ``(len(queries), len(rows))`` inner products of the prepared ``queries`` with the
        rows (all when None): one matrix product, over the store's mapped file in place
        (never a gathered copy of every row), as :meth:`_search` picks its rows."""
        mapped, n = self._mapped, self._n
        if rows is None or 4 * len(rows) > n:  # every row, or a dense set: one product over every row, then its columns
            every: np.ndarray = queries @ self._matrix[:n].T if mapped is None else mapped.scores_many(queries, n)
            return every if rows is None else every[:, rows]
        picked: np.ndarray = queries @ self._matrix_of(rows, allowed).T  # a sparse set: its rows (kept gathered when cached)
        return picked if mapped is None else mapped.rescale(picked, rows)

    def _allowed_rows(self, allowed: AbstractSet[str]) -> tuple[np.ndarray, Sequence[str]]:
        """The sorted rows of the held ids of ``allowed`` and a view of their ids (by position
        in ``rows``): numpy does the sort, and no list of every allowed id is built. A set the
        store resolves as rows of its file (:class:`AllowedRows`) is translated without its ids."""
        if isinstance(allowed, AllowedRows) and self._mapped is not None:
            file_rows = allowed.file_rows(self.config.space)
            if file_rows is not None:
                rows = self._positions(file_rows)
                return rows, _RowIds(self._ids, rows)
        rows = np.fromiter(map(self._rows.get, allowed, repeat(-1)), dtype=np.int64, count=len(allowed))
        rows = rows[rows >= 0]
        rows.sort()
        return rows, _RowIds(self._ids, rows)

    def _positions(self, file_rows: np.ndarray) -> np.ndarray:
        """The sorted positions holding ``file_rows`` (rows of the store's file; rows the index
        does not hold are left out): one gather through the file-row -> position map (none
        when position ``i`` is file row ``i``), then a sort or, for many rows, a mask."""
        assert self._mapped is not None
        n = self._n
        if self._mapped.ident:  # positions [0, n) are file rows [0, n)
            found = file_rows[file_rows < n]
        else:
            position_of = self._position_map()
            found = position_of[file_rows[file_rows < len(position_of)]]
            found = found[found >= 0]
        if 16 * len(found) < n:
            found = np.sort(found)
        else:  # a mask over every position: linear, no sort of many values
            mask = np.zeros(n, dtype=bool)
            mask[found] = True
            found = mask.nonzero()[0]
        return found

    def _position_map(self) -> np.ndarray:
        """The position of each file row (-1: not held), kept while no row moved or was added."""
        assert self._mapped is not None
        version = (self._epoch, self._n)
        memo = self._position_memo
        if memo is not None and memo[0] == version:
            return memo[1]
        at = self._mapped.at[: self._n]
        position_of = np.full(int(at.max()) + 1 if self._n else 0, -1, dtype=np.int64)
        position_of[at] = np.arange(self._n)
        self._position_memo = (version, position_of)
        return position_of

    def __len__(self) -> int:
        return self._n

    def save(self, directory: Path) -> None:
        """``ids.json`` (the id of each row) and the rows: over a store that keeps them in a
        mapped file, only their row numbers there (``rows.npy``, and ``scale.npy`` the inverse
        norms for cosine: format 3, :mod:`._exact_mapped`); otherwise ``matrix.npy`` (the held
        rows as the index keeps them: float32, unit rows for cosine; a raw ``.npy`` that
        :meth:`load` memory-maps). Formats 1 and 2 are still read."""
        mapped = self._mapped
        if mapped is not None:
            mapped.save(directory, self._n)
            stale = [MATRIX, "vectors.npy"]
        else:
            atomic_write_with(directory / MATRIX, self._write_matrix)
            stale = [ROWS, SCALE, "vectors.npy"]
        meta: dict[str, Any] = {"dim": self.dim, "vectors": "rows" if mapped is not None else "matrix", "space": self.config.space}
        ids = self._ids
        if isinstance(ids, SavedIds):  # unchanged since loaded
            atomic_write_bytes(directory / IDS_TEXT, ids.text())
            meta["ids"], meta["count"] = IDS_TEXT, len(ids)
        elif any("\n" in rid for rid in ids):  # a line break in an id: the ids as JSON
            meta["ids"] = ids
            stale.append(IDS_TEXT)
        else:
            atomic_write_bytes(directory / IDS_TEXT, "\n".join(ids).encode())
            meta["ids"], meta["count"] = IDS_TEXT, len(ids)
        atomic_write_json(directory / "ids.json", meta)
        for name in stale:  # another layout's files
            (directory / name).unlink(missing_ok=True)

    def _write_matrix(self, path: str) -> None:
        # the header, then the rows straight from memory (no copy) by the file's own write: a
        # full disk or file size limit raises its OSError (ENOSPC, EFBIG), which np.save's
        # tofile would turn into one without an errno (not recognised as StorageFullError)
        matrix = np.ascontiguousarray(self._matrix[: self._n])
        with open(path, "wb") as fh:
            np.lib.format.write_array_header_1_0(fh, np.lib.format.header_data_from_array_1_0(matrix))
            fh.write(matrix.reshape(-1).view(np.uint8).data)

    def load(self, directory: Path) -> None:
        """Format 3 over a store's mapped file: read the row numbers, map the file; a save
        of another layout over such a store adopts the store's rows (its own copy is not
        read; the next save rewrites it as format 3). Otherwise map ``matrix.npy``
        copy-on-write (nothing is read until searched; the first write that grows the matrix
        copies it into memory) or read a format-1 save."""
        where = f"exact index {self.name!r}"
        try:
            meta = json.loads((directory / "ids.json").read_text())
            ids: list[str] | SavedIds
            rows: dict[str, int] | None
            if meta.get("ids") == IDS_TEXT:  # format 3: one id per line, decoded when asked for
                ids, rows = SavedIds((directory / IDS_TEXT).read_bytes()), None
                if len(ids) != meta.get("count"):
                    raise ValueError(f"{IDS_TEXT} holds {len(ids)} ids, {meta.get('count')} saved")
            else:
                ids = meta["ids"]
                rows = dict(zip(ids, range(len(ids)))) if isinstance(ids, list) else {}
                if not isinstance(ids, list) or len(rows) != len(ids) or not {*map(type, ids)} <= {str}:
                    raise ValueError("ids must be a list of distinct strings")
            if meta.get("dim") != self.dim or meta.get("space", self.config.space) != self.config.space:
                raise ValueError(f"saved for space {meta.get('space')!r} of dimension {meta.get('dim')}, not {self.config.space!r} of {self.dim}")
            layout = meta.get("vectors", "own")
            space = None if self._reader is None else self._reader.mapped(self.config.space, self.dim)
            if layout == "rows" and space is None:
                raise ValueError("saved as rows of the store's vector file, which the store does not offer")
            # a save over the store's file, or an older one (format 1 or 2) adopting the store's rows
            adopt = space is not None and isinstance(ids, list) and meta.get("ids") != IDS_TEXT
            mapped = MappedRows(space, self.config.metric == "cosine") if space is not None and (layout == "rows" or adopt) else None
            matrix = None
            if mapped is not None:
                if layout == "rows":
                    mapped.load(directory, len(ids), where)
                else:
                    assert isinstance(ids, list)
                    ids, rows = self._adopt(mapped, ids)
            elif layout == "matrix":
                matrix = _map_matrix(directory / MATRIX)
            else:
                matrix = None if layout == "store" else np.load(directory / "vectors.npy", allow_pickle=False)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptError(f"{where}: cannot read {directory}: {exc}") from None
        if mapped is not None:
            self._mapped, self._own = mapped, False
            self._matrix = np.zeros((0, self.dim), dtype=np.float32)
        else:
            if matrix is None:
                assert isinstance(ids, list)  # formats 1 and 2 keep their ids in ids.json
                matrix, kept = self._read_store(ids, meta, where)
                if len(kept) != len(ids):
                    ids, rows = kept, {rid: i for i, rid in enumerate(kept)}
            elif not isinstance(matrix, np.ndarray) or matrix.dtype != np.float32 or matrix.shape != (len(ids), self.dim):
                raise CorruptError(f"{where}: files do not match dimension {self.dim} and {len(ids)} ids")
            if not matrix.flags.c_contiguous:
                raise CorruptError(f"{where}: the saved matrix is not in C order")
            self._matrix, self._mapped = matrix, None
            self._own = space is not None  # a copy of its own over a store's file: the vectors the store does not hold
        self._ids = ids
        self._rows_map = rows
        self._n = len(self._ids)
        self._epoch += 1

    def _adopt(self, mapped: MappedRows, ids: list[str]) -> tuple[list[str], dict[str, int]]:
        """An older save over a store with a mapped file: the store's rows of the saved ids
        (ids the store no longer has are dropped: deleted since, the catch-up agrees)."""
        found = mapped.space.rows(ids)
        if not (found >= 0).all():
            ids = [rid for rid, row in zip(ids, found.tolist()) if row >= 0]
            found = found[found >= 0]
        mapped.adopt(found)
        return ids, dict(zip(ids, range(len(ids))))

    def _read_store(self, ids: list[str], meta: dict[str, Any], where: str) -> tuple[np.ndarray, list[str]]:
        """The saved ids' vectors from the store, prepared; ids the store no longer has are dropped."""
        if self._reader is None:
            raise CorruptError(f"{where}: saved without its vectors (the store keeps them), and no store is given to read them from")
        if meta.get("dim") != self.dim or meta.get("space") != self.config.space:
            raise CorruptError(f"{where}: saved for space {meta.get('space')!r} of dimension {meta.get('dim')}, not {self.config.space!r} of {self.dim}")
        raw, present = self._reader.read(ids, self.config.space, self.dim)
        if not present.all():
            raw = raw[present]
            ids = [rid for rid, keep in zip(ids, present.tolist()) if keep]
        return self._prepare(raw, in_place=True), ids

    def stats(self) -> dict[str, Any]:
        return {"size": self._n, "dim": self.dim, "metric": self.config.metric, "space": self.config.space}
