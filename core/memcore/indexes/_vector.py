"""``VectorIndex``: the chores every index over one embedding space shares.

A vector index reads one vector per record and per query from ``config.space``. This base
class keeps its ``dim``, checks record and query vectors once, with one set of messages
(no vector or a wrong shape: :class:`DimensionError`; NaN or infinite values:
:class:`ValidationError`), and validates ``k`` and the query vectors before the subclass's
trusted :meth:`VectorIndex._search` / :meth:`VectorIndex._search_batch` runs. Checks of
what only one library needs (faiss' float32 overflow, Chroma's zero cosine vectors...)
stay in the subclass.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from operator import attrgetter
from typing import Any, Collection as AbstractSet, Sequence

import numpy as np

from ..errors import DimensionError, ValidationError
from ._index import Index, IndexContext, Requirements
from ..model._query import Hit
from ..model._query import Query
from ..model._record import Record
from ..model._record_rows import stacked
from ..model._checks import validate_k

__all__ = ["VectorIndex"]

_shape = attrgetter("shape")
_id_of = attrgetter("id")


class VectorIndex(Index):
    """Base class of an index over the vectors of one embedding space (``config.space``).

    A subclass calls ``super().__init__(config, context)`` (``links=True`` when it also reads
    ``record.links``) and implements :meth:`_search` (and, for real batches,
    :meth:`_search_batch`) plus the rest of :class:`~memcore.Index`. It gets:

    - ``config``, ``name``, ``mode_key`` and ``dim`` (the dimension of ``config.space``),
      ``requires`` (that space);
    - :meth:`record_matrix`: the records' vectors checked, as one float32 matrix
      (:meth:`validate` calls it);
    - :meth:`query_vector` / :meth:`query_matrix`: the query vectors checked
      (:meth:`validate_query` calls the first);
    - :meth:`search` / :meth:`search_batch`: ``k`` and the vectors validated, then the
      trusted hooks.
    """

    config: Any
    dim: int

    def __init__(self, config: Any, context: IndexContext, *, links: bool = False) -> None:
        """``config`` must have a ``space`` (a declared embedding space; ConfigError when not)."""
        super().__init__(config, context)
        self.config = config
        self.dim = context.space(config.space).dim
        self.requires = Requirements(spaces=(config.space,), links=links)

    # -- records ---------------------------------------------------------------------------

    def validate(self, records: Sequence[Record]) -> None:
        """Every record needs a finite ``dim``-d vector in ``config.space`` (the first bad one named)."""
        self.record_matrix(records)

    def record_matrix(self, records: Sequence[Record], *, latest: bool = False) -> tuple[list[str], np.ndarray]:
        """The records' ids and their vectors in ``config.space`` as one ``(n, dim)`` float32
        matrix, checked: a missing vector or another shape is a :class:`DimensionError`,
        NaN or infinite values a :class:`ValidationError`, naming the first bad record.

        ``latest``: a repeated id keeps its last record, at the place of its first (what
        re-adding means); every record is checked all the same.

        The matrix may be read-only (the records' own, when they were inserted as columns:
        :meth:`memcore.Collection.insert_columns`): copy it before changing it.
        """
        space, dim = self.config.space, self.dim
        kept = stacked(records, space)
        if kept is not None and kept.shape[1] == dim:  # inserted as columns: ids unique, vectors checked (norms_checked) and stacked once
            return list(map(_id_of, records)), kept
        try:
            column = [r.vectors[space] for r in records]
            fine = {*map(_shape, column)} <= {(dim,)}
        except (KeyError, AttributeError):
            fine = False
        if not fine:  # some record lacks the vector or has another shape: name the first
            for r in records:
                v = r.vectors.get(space)
                if v is None:
                    raise DimensionError(f"index {self.name!r}: record {r.id!r} has no vector in space {space!r}")
                if getattr(v, "shape", None) != (dim,):
                    raise DimensionError(
                        f"index {self.name!r}: the vector of record {r.id!r}: expected a {dim}-d vector in space {space!r}, got shape {getattr(v, 'shape', None)}"
                    )
        ids = [r.id for r in records]
        if latest:
            last = {rid: i for i, rid in enumerate(ids)}
            if len(last) != len(ids):
                ids, column = list(last), [column[i] for i in last.values()]
        if not column:
            return ids, np.zeros((0, dim), dtype=np.float32)
        matrix = np.asarray(np.concatenate(column).reshape(len(column), dim), dtype=np.float32)  # np.stack's result, without its per-row Python
        if not _finite_rows(matrix):
            rows = np.isfinite(matrix).all(axis=1)
            if not rows.all():
                raise ValidationError(f"index {self.name!r}: the vector of record {ids[int(np.argmin(rows))]!r} contains NaN or infinite values")
        return ids, matrix

    # -- queries ---------------------------------------------------------------------------

    def validate_query(self, query: Query) -> None:
        """The query needs a finite ``dim``-d vector in ``config.space``; a subclass with
        query modes extends this (``super().validate_query(query)``)."""
        self.query_vector(query)

    def query_vector(self, query: Query) -> np.ndarray:
        """The query's vector in ``config.space``, checked (:class:`DimensionError` when it
        is missing or of another shape, :class:`ValidationError` when not finite).

        Checked once per query: ``validate_query`` and ``search`` both ask, the second
        finds the same vector object marked as checked on the query (a vector replaced in
        ``query.vectors`` is checked again).
        """
        space = self.config.space
        v = query.vectors.get(space)
        if v is None:
            raise DimensionError(f"index {self.name!r}: the query has no vector in space {space!r}")
        checked = query._checked
        if checked is not None and checked.get(space) is v and v.shape == (self.dim,):
            return v  # checked by validate_query (or an earlier search) of this query
        if getattr(v, "shape", None) != (self.dim,):
            raise DimensionError(f"index {self.name!r}: query vector of shape {getattr(v, 'shape', None)}, expected dimension {self.dim}")
        try:
            square = float(v.dot(v))  # finite when every value is (or overflowing: checked below)
        except RuntimeWarning:  # overflow, with warnings turned into errors
            square = math.inf
        if not math.isfinite(square) and not np.isfinite(v).all():
            raise ValidationError(f"index {self.name!r}: the query vector in space {space!r} contains NaN or infinite values")
        if checked is None:
            query._checked = {space: v}
        else:
            checked[space] = v
        return v

    def query_matrix(self, queries: Sequence[Query]) -> np.ndarray:
        """The queries' vectors as one ``(n, dim)`` float32 matrix, checked in one pass; the
        error of the first bad query (as :meth:`query_vector` raises it) otherwise."""
        space, shape = self.config.space, (self.dim,)
        rows = [q.vectors.get(space) for q in queries]
        fine = [row for row in rows if row is not None and getattr(row, "shape", None) == shape]
        if fine and len(fine) == len(rows):
            matrix = np.asarray(np.stack(fine), dtype=np.float32)
            if _finite_rows(matrix) or np.isfinite(matrix).all():
                return matrix
        for query in queries:  # something is wrong: the error of the first bad query
            self.query_vector(query)
        return np.zeros((0, self.dim), dtype=np.float32)  # no queries

    # -- search ----------------------------------------------------------------------------

    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        """``k`` and the query vector validated, then :meth:`_search`."""
        if type(k) is not int or k <= 0:  # validate_k's common case without its call: this runs for every query
            k = validate_k(k)
        return self._search(query, self.query_vector(query), k, allowed)

    def search_batch(self, queries: Sequence[Query], k: int, allowed: AbstractSet[str] | None = None) -> list[list[Hit]]:
        """``k`` and the query vectors validated, then :meth:`_search_batch`."""
        k = validate_k(k)
        if not queries:
            return []
        return self._search_batch(queries, self.query_matrix(queries), k, allowed)

    @abstractmethod
    def _search(self, query: Query, vector: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[Hit]:
        """The best ``k`` hits for ``query``, whose ``vector`` (``(dim,)``, finite) and ``k``
        (a positive int) are checked already: nothing here validates them again."""

    def _search_batch(self, queries: Sequence[Query], matrix: np.ndarray, k: int, allowed: AbstractSet[str] | None) -> list[list[Hit]]:
        """:meth:`_search` of each query (row ``i`` of ``matrix`` is the vector of query ``i``,
        checked); a subclass that batches for real overrides this."""
        return [self._search(query, vector, k, allowed) for query, vector in zip(queries, matrix)]


def _finite_rows(matrix: np.ndarray) -> bool:
    """True when every row's squared norm is finite, so every value is (False may also mean
    a finite row whose square overflows: the caller looks at the values then)."""
    try:
        return bool(np.isfinite(np.einsum("ij,ij->i", matrix, matrix)).all())
    except (RuntimeWarning, FloatingPointError):  # overflow, with warnings turned into errors
        return False
