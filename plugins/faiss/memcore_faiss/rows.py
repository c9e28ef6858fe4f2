"""The store's file row of each label: a filtered search takes its allowed set as rows.

A store that keeps a space's vectors in one fixed-width file (the SQLite store) resolves a
filter straight to the rows of that file (:class:`memcore.plugin.AllowedRows`: one SQL
statement, the matches as one int64 array, no string per id), and the collection hands an
index that declares ``takes_store_rows`` the set in that form while the index is caught
up to the store. faiss labels are not file rows, so the index keeps the row of each label
(:class:`StoreRows`, filled from :meth:`memcore.plugin.MappedSpace.rows_holding` as records
are added) and turns a set of rows into its sorted labels with one gather through the
inverse map (:meth:`StoreRows.labels_of`). Translating the ids of a set instead costs a
string per member read from SQLite plus a dict lookup each: at 50% of 100k records that
was most of a first filtered query.

A label's row is known (``>= 0``), unknown (:data:`UNKNOWN`: the store does not hold the
vector the index was given, or a save made before the rows were kept) or none
(:data:`NONE`: no live label). The rows are usable only while no live label is unknown;
otherwise the index translates ids as before. Rows change only by logged writes, and the
index keeps a label exactly as long as it keeps the id (the catch-up from the log replaces
both), so a known row stays right. Saved beside the labels in ``idmap.npz`` (``rows``,
aligned with ``labels``); a save without it loads with every row unknown, and
:meth:`StoreRows.backfill` looks them up in the store once (the ids' present rows).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from memcore.plugin import CorruptError

__all__ = ["StoreRows", "UNKNOWN", "NONE"]

NONE = -1
"""Row of a label that is not live (never assigned, dropped, a tombstone)."""
UNKNOWN = -2
"""Row of a live label whose row in the store's file is not known."""


class StoreRows:
    """Label -> row of the store's vector file, and the inverse for allowed sets."""

    def __init__(self) -> None:
        self.row_of = np.full(64, NONE, dtype=np.int64)
        #: live labels whose row is :data:`UNKNOWN`
        self.unknown = 0
        #: the unknown rows came from a save that did not keep them: :meth:`backfill` may look them up
        self.from_save = False
        #: the label of each file row (-1: none), built on first use, then kept up to date
        self._inverse: np.ndarray | None = None

    @property
    def usable(self) -> bool:
        """Whether every live label's row is known."""
        return self.unknown == 0

    def _reserve(self, need: int) -> None:
        if need > len(self.row_of):
            grown = np.full(max(need, 2 * len(self.row_of)), NONE, dtype=np.int64)
            grown[: len(self.row_of)] = self.row_of
            self.row_of = grown

    def assign(self, labels: np.ndarray, rows: np.ndarray | None) -> None:
        """New live ``labels`` hold ``rows`` (None: unknown; the store does not hold their vectors)."""
        if not len(labels):
            return
        self._reserve(int(labels.max()) + 1)
        if rows is None:
            self.row_of[labels] = UNKNOWN
            self.unknown += len(labels)
            self.from_save = False  # these are not the saved ones: never looked up
            return
        self.row_of[labels] = rows
        inverse = self._inverse
        if inverse is not None and len(rows):
            top = int(rows.max()) + 1
            if top > len(inverse):
                inverse = self._inverse = np.concatenate([inverse, np.full(max(top, 2 * len(inverse)) - len(inverse), -1, dtype=np.int64)])
            inverse[rows] = labels

    def drop(self, labels: np.ndarray) -> None:
        """``labels`` are no longer live (removed, or tombstones)."""
        labels = labels[labels < len(self.row_of)]
        if not len(labels):
            return
        rows = self.row_of[labels]
        self.unknown -= int(np.count_nonzero(rows == UNKNOWN))
        self.row_of[labels] = NONE
        if self._inverse is not None:
            held = rows[rows >= 0]
            self._inverse[held[held < len(self._inverse)]] = -1

    def relabel(self, order: np.ndarray) -> None:
        """Live labels ``order`` become ``0..n-1`` (see :meth:`.labels.LabelMap.relabel`)."""
        moved = self.row_of[order] if len(order) else np.zeros(0, dtype=np.int64)
        self.row_of = np.full(max(64, 2 * len(order)), NONE, dtype=np.int64)
        self.row_of[: len(order)] = moved
        self._inverse = None

    def labels_of(self, file_rows: np.ndarray, live: int) -> np.ndarray:
        """The sorted live labels holding ``file_rows`` (rows no live label holds are left
        out); ``live``: how many labels are live (a mask beats a sort for many rows)."""
        inverse = self._inverse_map()
        found: np.ndarray = inverse[file_rows[(file_rows >= 0) & (file_rows < len(inverse))]]
        found = found[found >= 0]
        if 16 * len(found) < live:
            found.sort()
            return found
        mask = np.zeros(len(self.row_of), dtype=bool)
        mask[found] = True
        labels: np.ndarray = mask.nonzero()[0]
        return labels

    def _inverse_map(self) -> np.ndarray:
        """The label of each file row (-1: none)."""
        inverse = self._inverse
        if inverse is None:
            held = (self.row_of >= 0).nonzero()[0]
            rows = self.row_of[held]
            inverse = np.full(int(rows.max()) + 1 if len(rows) else 0, -1, dtype=np.int64)
            inverse[rows] = held
            self._inverse = inverse
        return inverse

    def backfill(self, labels: np.ndarray, ids: Sequence[str], space: Any) -> bool:
        """Look up the unknown rows of a save that did not keep them: ``labels`` (live, the
        unknown ones) hold the records ``ids``, whose rows ``space`` (a
        :class:`memcore.plugin.MappedSpace`) reports. False when some record has none."""
        if not self.from_save or not len(labels):
            return self.usable
        rows = np.asarray(space.rows(list(ids)), dtype=np.int64)
        self.from_save = False
        if len(rows) != len(labels) or (len(rows) and rows.min() < 0):
            return False
        self.row_of[labels] = rows
        self.unknown -= len(labels)
        self._inverse = None
        return self.usable

    # -- persistence -------------------------------------------------------------------

    def saved(self, labels: np.ndarray) -> np.ndarray | None:
        """The rows of the live ``labels`` (the id map's ``labels`` array) to save, or None
        while some are unknown."""
        if not self.usable:
            return None
        rows: np.ndarray = self.row_of[labels] if len(labels) else np.zeros(0, dtype=np.int64)
        return rows

    @classmethod
    def loaded(cls, labels: np.ndarray, rows: Any, next_label: int, where: str) -> "StoreRows":
        """The rows of a save (``rows`` aligned with the live ``labels``; None: a save that
        did not keep them, every row unknown until :meth:`backfill`)."""
        out = cls()
        out._reserve(next_label)
        if rows is None:
            out.row_of[labels] = UNKNOWN
            out.unknown = len(labels)
            out.from_save = True
            return out
        if not isinstance(rows, np.ndarray) or rows.dtype != np.int64 or rows.shape != labels.shape or (len(rows) and rows.min() < 0):
            raise CorruptError(f"{where}: malformed store rows in the id map")
        out.row_of[labels] = rows
        if np.count_nonzero(out._inverse_map() >= 0) != len(rows):  # built now: the first filtered query needs it
            raise CorruptError(f"{where}: the id map names one store row for two labels")
        return out
