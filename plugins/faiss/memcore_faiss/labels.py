"""Record ids <-> faiss int64 labels, and tombstones.

Every vector added gets the next label of a monotonic counter (a re-added id gets a new
label), so a label is never reused: a stale faiss result can never name the wrong record.
Labels of removed vectors that the faiss index still holds (HNSW cannot remove) are
tombstones until the next compaction.

Saved as arrays (:meth:`LabelMap.to_arrays`, written to ``idmap.npz`` by :mod:`.storage`):
the labels, the ids as one UTF-8 text with their offsets, the tombstones. Reading 100k ids
back this way takes a few tens of milliseconds, where the JSON lists of earlier saves
(still read: :meth:`LabelMap.from_json`) took ~0.3 s of parsing and per-item checks.

A loaded map keeps the saved arrays as they are (:class:`SavedIds`) until something needs
the dicts: searches turn labels into ids by position (:meth:`LabelMap.id_or_none`), and
the two dicts are built at the first change or id lookup (at 1M ids ~0.85 s of CPU that a
reopen no longer pays; the check that no id is saved twice runs then too).
"""

from __future__ import annotations

from collections.abc import Sized
from itertools import repeat
from typing import Any, Iterable, Sequence

import numpy as np

from memcore.plugin import CorruptError

__all__ = ["LabelMap", "SavedIds"]

DROPPED_MAX = 65_536
"""Most dropped labels :attr:`LabelMap.dropped` keeps before it starts a new epoch."""


class LabelMap:
    """The two-way map of live ids and labels, the label counter and the tombstones."""

    def __init__(self) -> None:
        self._label_of: dict[str, int] = {}
        self._id_of: dict[int, str] = {}
        #: the ids of a save not yet turned into the two dicts (see :meth:`_materialize`)
        self._saved: SavedIds | None = None
        self.next_label = 0
        self.dead: set[int] = set()
        #: bumped whenever ``dead`` changes (cached tombstone selectors compare it)
        self.dead_version = 0
        #: bumped whenever any label changes (memos of allowed sets compare it)
        self.version = 0
        #: bumped when live labels change other than by :meth:`assign` and :meth:`drop` (a relabel)
        self.epoch = 0
        #: labels dropped since the last epoch, in order (memos of allowed sets catch up from it)
        self.dropped: list[int] = []

    def __len__(self) -> int:
        return len(self._saved) if self._saved is not None else len(self._label_of)

    @property
    def label_of(self) -> dict[str, int]:
        """Live id -> label (built from a save's arrays at first use)."""
        if self._saved is not None:
            self._materialize()
        return self._label_of

    @property
    def id_of(self) -> dict[int, str]:
        """Live label -> id (built from a save's arrays at first use)."""
        if self._saved is not None:
            self._materialize()
        return self._id_of

    def id_or_none(self, label: int) -> str | None:
        """The live id of ``label``, None for -1, a tombstone or an unknown label; reads a
        save's arrays in place when the dicts are not built (a search needs no more)."""
        saved = self._saved
        if saved is not None:
            return saved.get(label)
        return self._id_of.get(label)

    def ids_for(self, labels: np.ndarray) -> list[str]:
        """The ids of live ``labels`` (KeyError for a label that is not live)."""
        saved = self._saved
        if saved is not None:
            return [saved[int(label)] for label in labels.tolist()]
        return list(map(self._id_of.__getitem__, labels.tolist()))

    def _materialize(self) -> None:
        """Build the two dicts from the save's arrays; CorruptError when an id is saved twice."""
        saved = self._saved
        assert saved is not None
        ids = saved.ids()
        labels = saved.labels.tolist()
        label_of = dict(zip(ids, labels))
        if len(label_of) != len(ids):
            raise CorruptError(f"{saved.where}: inconsistent id map (duplicate ids or labels, labels past the counter)")
        self._label_of, self._id_of, self._saved = label_of, dict(zip(labels, ids)), None

    def assign(self, ids: Sequence[str]) -> np.ndarray:
        """New labels for ``ids`` (which must not be live), as an int64 array."""
        self.version += 1
        start = self.next_label
        labels = np.arange(start, start + len(ids), dtype=np.int64)
        for offset, rid in enumerate(ids):
            self.label_of[rid] = start + offset
            self.id_of[start + offset] = rid
        self.next_label = start + len(ids)
        return labels

    def drop(self, ids: Iterable[str]) -> np.ndarray:
        """Forget the live ``ids`` that are held; returns their labels (unknown ids ignored)."""
        self.version += 1
        labels = []
        for rid in ids:
            label = self.label_of.pop(rid, None)
            if label is not None:
                del self.id_of[label]
                labels.append(label)
        if len(self.dropped) + len(labels) > DROPPED_MAX:  # a long journal: memos translate afresh
            self.dropped = []
            self.epoch += 1
        self.dropped.extend(labels)
        return np.asarray(labels, dtype=np.int64)

    def marker(self) -> tuple[int, int, int]:
        """Where the labels stand: ``(epoch, next_label, dropped so far)``; see :meth:`changes_since`."""
        return (self.epoch, self.next_label, len(self.dropped))

    def changes_since(self, marker: tuple[int, int, int]) -> tuple[range, list[int]] | None:
        """The labels assigned and the labels dropped since ``marker`` (None when a relabel
        came between: every label may have changed)."""
        epoch, next_label, dropped = marker
        if epoch != self.epoch or next_label > self.next_label or dropped > len(self.dropped):
            return None
        return range(next_label, self.next_label), self.dropped[dropped:]

    def bury(self, labels: np.ndarray) -> None:
        """Mark ``labels`` (already dropped) as tombstones still inside the faiss index."""
        if len(labels):
            self.dead.update(int(x) for x in labels)
            self.dead_version += 1

    def clear_dead(self) -> None:
        """After a compaction: no tombstones left."""
        self.dead.clear()
        self.dead_version += 1

    def relabel(self, order: np.ndarray) -> None:
        """Give the live labels ``order`` the new labels 0..n-1 (after a positional rebuild).

        ``order`` lists every live label once, in the order the vectors were re-added;
        tombstones are gone and the counter restarts at n.
        """
        self.version += 1
        self.epoch += 1
        self.dropped = []
        id_of = self.id_of
        ids = [id_of[int(label)] for label in order]
        if len(ids) != len(id_of):
            raise ValueError("relabel needs every live label exactly once")
        self._id_of = dict(enumerate(ids))
        self._label_of = {rid: i for i, rid in enumerate(ids)}
        self.next_label = len(ids)
        self.clear_dead()

    def labels_for(self, ids: Iterable[str]) -> np.ndarray:
        """Sorted labels of the live ids among ``ids`` (others ignored)."""
        if not isinstance(ids, Sized):
            ids = list(ids)
        found = np.fromiter(map(self.label_of.get, ids, repeat(-1)), dtype=np.int64, count=len(ids))
        found = found[found >= 0]
        found.sort()
        return found

    def live_labels(self) -> np.ndarray:
        """Every live label, sorted."""
        if self._saved is not None:
            return self._saved.labels.copy()
        return np.asarray(sorted(self._id_of), dtype=np.int64)

    # -- persistence -------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """JSON-safe state (ids and labels as parallel lists, in label order): the id map of
        saves before ``idmap.npz``; :meth:`to_arrays` is what ``save`` writes now."""
        order = sorted(self.id_of)
        return {
            "ids": [self.id_of[label] for label in order],
            "labels": order,
            "next_label": self.next_label,
            "tombstones": sorted(self.dead),
        }

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The id map as arrays (no pickle): ``labels`` (int64, ascending), ``text`` (the ids
        in label order, concatenated, UTF-8 as uint8), ``offsets`` (int64, n + 1: id ``i`` is
        ``text[offsets[i]:offsets[i + 1]]`` counted in characters) and ``tombstones`` (int64, sorted)."""
        if self._saved is not None:  # unchanged since it was read: the same arrays
            return {**self._saved.arrays(), "tombstones": np.asarray(sorted(self.dead), dtype=np.int64)}
        order = sorted(self._id_of)  # already ascending (labels only ever grow): a linear pass
        ids = list(map(self.id_of.__getitem__, order))
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)), out=offsets[1:])
        return {
            "labels": np.asarray(order, dtype=np.int64),
            "offsets": offsets,
            "text": np.frombuffer("".join(ids).encode("utf-8", "surrogatepass"), dtype=np.uint8),
            "tombstones": np.asarray(sorted(self.dead), dtype=np.int64),
        }

    @classmethod
    def from_arrays(cls, arrays: Any, next_label: Any, where: str) -> "LabelMap":
        """Rebuild from :meth:`to_arrays` output and the label counter; CorruptError when
        malformed or inconsistent (the same checks as :meth:`from_json`, vectorised)."""
        try:
            labels, offsets, text, dead = (arrays[key] for key in ("labels", "offsets", "text", "tombstones"))
            next_label = int(next_label)
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptError(f"{where}: malformed id map ({exc!r})") from None
        n = len(labels) if isinstance(labels, np.ndarray) else -1
        shapes_ok = (
            all(isinstance(a, np.ndarray) and a.ndim == 1 for a in (labels, offsets, text, dead))
            and labels.dtype == offsets.dtype == dead.dtype == np.int64
            and text.dtype == np.uint8
            and len(offsets) == n + 1
        )
        if not shapes_ok:
            raise CorruptError(f"{where}: malformed id map (arrays of unexpected types or lengths)")
        try:
            decoded = text.tobytes().decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise CorruptError(f"{where}: malformed id map ({exc.reason})") from None
        if (
            offsets[0] != 0
            or offsets[-1] != len(decoded)
            or (n and not (offsets[1:] > offsets[:-1]).all())  # every id non-empty
            or (n and (labels[0] < 0 or labels[-1] >= next_label or not (labels[1:] > labels[:-1]).all()))  # ascending: unique
            or (len(dead) and (dead[0] < 0 or dead[-1] >= next_label or not (dead[1:] > dead[:-1]).all()))
            or (n and len(dead) and np.isin(dead, labels, assume_unique=True).any())
        ):
            raise CorruptError(f"{where}: inconsistent id map (duplicate ids or labels, labels past the counter)")
        out = cls()
        out._saved = SavedIds(decoded, text, offsets, labels, where)
        out.next_label = next_label
        out.dead = set(dead.tolist())
        return out

    @classmethod
    def from_json(cls, data: Any, where: str) -> "LabelMap":
        """Rebuild from :meth:`to_json` output; CorruptError when inconsistent."""
        try:
            ids = list(data["ids"])
            labels = [int(x) for x in data["labels"]]
            next_label = int(data["next_label"])
            dead = {int(x) for x in data["tombstones"]}
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptError(f"{where}: malformed id map ({exc!r})") from None
        out = cls()
        out._label_of = dict(zip(ids, labels))
        out._id_of = dict(zip(labels, ids))
        out.next_label = next_label
        out.dead = dead
        if (
            len(ids) != len(labels)
            or len(out._label_of) != len(ids)
            or len(out._id_of) != len(ids)
            or not all(isinstance(i, str) for i in ids)
            or any(not 0 <= x < next_label for x in labels)
            or any(not 0 <= x < next_label for x in dead)
            or dead & out._id_of.keys()
        ):
            raise CorruptError(f"{where}: inconsistent id map (duplicate ids or labels, labels past the counter)")
        return out


class SavedIds:
    """The ids of a save as read (checked, not yet in dicts): label -> id by position.

    ``labels`` ascend (checked at read), so a label's position is found by binary search,
    or is the label itself when the labels are ``0..n-1`` (a save with no removals since
    its last compaction). Tombstones are not among ``labels``.
    """

    __slots__ = ("text", "raw", "offsets", "labels", "where", "_dense")

    def __init__(self, text: str, raw: np.ndarray, offsets: np.ndarray, labels: np.ndarray, where: str) -> None:
        self.text, self.raw, self.offsets, self.labels, self.where = text, raw, offsets, labels, where
        n = len(labels)
        self._dense = n == 0 or (int(labels[0]) == 0 and int(labels[-1]) == n - 1)

    def __len__(self) -> int:
        return len(self.labels)

    def _position(self, label: int) -> int:
        """Where ``label`` is in ``labels``, -1 when it is not there."""
        n = len(self.labels)
        if self._dense:
            return label if 0 <= label < n else -1
        pos = int(np.searchsorted(self.labels, label))
        return pos if pos < n and int(self.labels[pos]) == label else -1

    def get(self, label: int) -> str | None:
        """The id of ``label``, None when it is not a live label of the save."""
        pos = self._position(label)
        if pos < 0:
            return None
        return self.text[int(self.offsets[pos]) : int(self.offsets[pos + 1])]

    def __getitem__(self, label: int) -> str:
        found = self.get(label)
        if found is None:
            raise KeyError(label)
        return found

    def ids(self) -> list[str]:
        """Every id, in label order."""
        bounds = self.offsets.tolist()
        return list(map(self.text.__getitem__, map(slice, bounds[:-1], bounds[1:])))

    def arrays(self) -> dict[str, np.ndarray]:
        """``labels``, ``offsets`` and ``text`` as :meth:`LabelMap.to_arrays` writes them."""
        return {"labels": self.labels, "offsets": self.offsets, "text": self.raw}
