"""Record ids <-> faiss int64 labels, and tombstones.

Every vector added gets the next label of a monotonic counter (a re-added id gets a new
label), so a label is never reused: a stale faiss result can never name the wrong record.
Labels of removed vectors that the faiss index still holds (HNSW cannot remove) are
tombstones until the next compaction.

Saved as arrays (:meth:`LabelMap.to_arrays`, written to ``idmap.npz`` by :mod:`.storage`):
the labels, the ids as one UTF-8 text with their offsets, the tombstones. Reading 100k ids
back this way takes a few tens of milliseconds, where the JSON lists of earlier saves
(still read: :meth:`LabelMap.from_json`) took ~0.3 s of parsing and per-item checks.
"""

from __future__ import annotations

from collections.abc import Sized
from itertools import repeat
from typing import Any, Iterable, Sequence

import numpy as np

from memcore.plugin import CorruptError

__all__ = ["LabelMap"]

DROPPED_MAX = 65_536
"""Most dropped labels :attr:`LabelMap.dropped` keeps before it starts a new epoch."""


class LabelMap:
    """The two-way map of live ids and labels, the label counter and the tombstones."""

    def __init__(self) -> None:
        self.label_of: dict[str, int] = {}
        self.id_of: dict[int, str] = {}
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
        return len(self.label_of)

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
        self.id_of = dict(enumerate(ids))
        self.label_of = {rid: i for i, rid in enumerate(ids)}
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
        return np.asarray(sorted(self.id_of), dtype=np.int64)

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
        order = sorted(self.id_of)  # already ascending (labels only ever grow): a linear pass
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
        bounds = offsets.tolist()
        ids = list(map(decoded.__getitem__, map(slice, bounds[:-1], bounds[1:])))
        label_list = labels.tolist()
        out = cls()
        out.label_of = dict(zip(ids, label_list))
        if len(out.label_of) != n:
            raise CorruptError(f"{where}: inconsistent id map (duplicate ids or labels, labels past the counter)")
        out.id_of = dict(zip(label_list, ids))
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
        out.label_of = dict(zip(ids, labels))
        out.id_of = dict(zip(labels, ids))
        out.next_label = next_label
        out.dead = dead
        if (
            len(ids) != len(labels)
            or len(out.label_of) != len(ids)
            or len(out.id_of) != len(ids)
            or not all(isinstance(i, str) for i in ids)
            or any(not 0 <= x < next_label for x in labels)
            or any(not 0 <= x < next_label for x in dead)
            or dead & out.id_of.keys()
        ):
            raise CorruptError(f"{where}: inconsistent id map (duplicate ids or labels, labels past the counter)")
        return out
