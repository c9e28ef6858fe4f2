"""New records built from columns, with each space's vectors kept as one matrix.

:meth:`memcore.Collection.insert_columns` validates a batch given as columns (ids, texts,
metadata columns, one ``(n, dim)`` matrix per space) and builds its records with the
vectors of each space as the rows of one float32 matrix. The write path then needs that
matrix several times (each target index checks and adds it, the store writes it to the
space's file); :class:`RecordRows` keeps it, and the metadata JSON the store writes, so
that none of them stacks ``n`` vectors again or encodes ``n`` dicts one by one.

What it hands out is checked against the records as they are when asked
(:meth:`RecordRows.matrix`): a record replaced in the list, or a vector replaced in a
record, answers None and the caller stacks the vectors as for any other batch.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from operator import attrgetter, is_, itemgetter
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ._record import Record

__all__ = ["RecordRows", "stacked", "metadata_texts", "norms_checked"]

_vectors_of = attrgetter("vectors")
_metadata_of = attrgetter("metadata")
_CHECKED: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()
"""The matrices of live :class:`RecordRows`, by ``id``."""


class RecordRows(list["Record"]):
    """A list of new records whose vectors of each space in ``matrices`` are, in order, the
    rows of that matrix (read-only float32, C-contiguous), and whose metadata JSON texts
    (as the store writes them) are ``metadata_json`` (None: not computed).

    A plain list to every reader; :func:`stacked` and :func:`metadata_texts` hand out the
    kept matrix and texts only while the records are still the ones it was built with.
    """

    def __init__(self, records: Sequence[Record], matrices: dict[str, np.ndarray], metadata_json: list[str] | None = None) -> None:
        """``matrices`` are read-only float32 matrices each of whose rows passed the float32
        squared-norm test of :func:`memcore.model.check_finite_vectors` (the caller checked
        them: :func:`norms_checked` answers True for them)."""
        super().__init__(records)
        for matrix in matrices.values():
            _CHECKED[id(matrix)] = matrix
        self.ids = [r.id for r in records]
        """The records' ids, in order."""
        self.matrices = matrices
        """Space name -> the ``(n, dim)`` matrix whose row ``i`` is record ``i``'s vector."""
        self._rows = {name: list(map(itemgetter(name), map(_vectors_of, records))) for name in matrices}
        self._metadata = list(map(_metadata_of, records))
        self._metadata_json = metadata_json

    def _same(self, records: Sequence[Record]) -> bool:
        """``records`` are this list's records, in order (the same objects)."""
        return len(records) == len(self._metadata) and (records is self or all(map(is_, records, self)))

    def matrix(self, records: Sequence[Record], space: str) -> np.ndarray | None:
        """The matrix of ``space`` when ``records`` are these records, in order, each still
        holding its own row of it as its vector (None otherwise)."""
        matrix = self.matrices.get(space)
        if matrix is None or not self._same(records):
            return None
        try:
            held = map(itemgetter(space), map(_vectors_of, records))
            return matrix if all(map(is_, held, self._rows[space])) else None
        except KeyError:
            return None

    def metadata_json(self, records: Sequence[Record]) -> list[str] | None:
        """The metadata JSON texts when ``records`` are these records, in order, each still
        holding the metadata dict it was built with (None otherwise)."""
        if self._metadata_json is None or not self._same(records):
            return None
        return self._metadata_json if all(map(is_, map(_metadata_of, records), self._metadata)) else None


def stacked(records: Sequence[Record], space: str) -> np.ndarray | None:
    """The vectors of ``space`` of ``records`` as one matrix without stacking them, when
    ``records`` is a :class:`RecordRows` that kept it (None: stack them as usual)."""
    return records.matrix(records, space) if type(records) is RecordRows else None


def metadata_texts(records: Sequence[Record]) -> list[str] | None:
    """The metadata JSON texts of ``records`` when ``records`` is a :class:`RecordRows`
    that computed them (None: encode each record's metadata as usual)."""
    return records.metadata_json(records) if type(records) is RecordRows else None


def norms_checked(matrix: np.ndarray) -> bool:
    """``matrix`` is a matrix of a :class:`RecordRows` (read-only, every row's norm checked
    when the batch was built): :func:`memcore.model.check_finite_vectors` would pass it."""
    return _CHECKED.get(id(matrix)) is matrix
