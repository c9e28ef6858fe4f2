"""A derived in-memory copy of the particles Chroma stores, for the cone and neighbour steps.

Chroma stays the stored copy: every write goes to Chroma first and, once Chroma took it,
to the mirror (:meth:`ParticleMirror.upsert`, :meth:`delete`, :meth:`set_metadata`). The
mirror is built from the collection (one batched ``get``) the first time a search needs
it after an open or a load, so it never has to be saved.

What it holds, one row per particle: the unit direction (float32), ``v``, ``T`` and
``born`` (float64 arrays, read by the projection without touching the metadata), the
Chroma metadata dict (returned in :class:`~.types.SearchResult`) and the id.

The cone (step 1) is still Chroma's HNSW query, asked for ids only: the candidates'
directions, v/T/born and metadata are then read here, and the neighbour fetch (step 3) is a
dict lookup instead of a Chroma ``get``. Reading embeddings and metadata through the Chroma
API is what made those steps slow (9 ms against 0.8 ms for 100 ids at 20k points).

Only the writes of this process reach it: with several processes writing to one Chroma
server, turn it off (``mirror = "off"``; ``"auto"`` does for http connections).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from memcore import atomic_write_bytes, atomic_write_with

__all__ = ["ParticleMirror", "SNAPSHOT_FILES"]

SNAPSHOT_FILES = ("mirror-directions.npy", "mirror-vtb.npy", "mirror.json")


class ParticleMirror:
    """Directions, v/T/born, metadata and ids of every stored particle, row-indexed."""

    def __init__(self, dim: int):
        self.dim = int(dim)
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.metadatas: list[dict[str, Any]] = []
        self._u = np.zeros((0, self.dim), dtype=np.float32)
        self._vtb = np.zeros((0, 3), dtype=np.float64)  # v, T, born

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def directions(self) -> np.ndarray:
        """The (n, d) unit directions (a view)."""
        return self._u[: len(self.ids)]

    # -- building and keeping in step ------------------------------------------------------

    @classmethod
    def from_collection(cls, collection: Any, dim: int, batch: int) -> "ParticleMirror":
        """Every row of a Chroma collection (batched ``get`` of embeddings and metadatas)."""
        mirror = cls(dim)
        offset = 0
        while True:
            got = collection.get(limit=batch, offset=offset, include=["embeddings", "metadatas"])
            if not got["ids"]:
                break
            mirror.upsert(got["ids"], np.asarray(got["embeddings"], dtype=np.float32), got["metadatas"])
            offset += len(got["ids"])
        return mirror

    def _grow(self, needed: int) -> None:
        if needed <= self._u.shape[0]:
            return
        capacity = max(needed, 2 * self._u.shape[0], 1024)
        u = np.zeros((capacity, self.dim), dtype=np.float32)
        vtb = np.zeros((capacity, 3), dtype=np.float64)
        n = len(self.ids)
        u[:n], vtb[:n] = self._u[:n], self._vtb[:n]
        self._u, self._vtb = u, vtb

    def upsert(self, ids: Sequence[str], directions: np.ndarray, metadatas: Sequence[dict[str, Any]]) -> None:
        """Add or replace rows (``directions`` unit, (len(ids), dim))."""
        self._grow(len(self.ids) + len(ids))
        for i, rid in enumerate(ids):
            meta = {k: v for k, v in metadatas[i].items() if v is not None}  # as Chroma keeps it: None removes a key
            row = self.rows.get(rid)
            if row is None:
                row = len(self.ids)
                self.rows[rid] = row
                self.ids.append(rid)
                self.metadatas.append(meta)
            else:
                self.metadatas[row] = meta
            self._u[row] = directions[i]
            self._vtb[row] = (meta["v"], meta["T"], meta["born"])

    def delete(self, ids: Iterable[str]) -> None:
        """Remove rows (unknown ids ignored); the last row moves into each hole."""
        for rid in ids:
            row = self.rows.pop(rid, None)
            if row is None:
                continue
            last = len(self.ids) - 1
            if row != last:
                moved = self.ids[last]
                self.ids[row], self.metadatas[row] = moved, self.metadatas[last]
                self._u[row], self._vtb[row] = self._u[last], self._vtb[last]
                self.rows[moved] = row
            self.ids.pop()
            self.metadatas.pop()

    def set_metadata(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Merge metadata updates into held rows (Chroma's ``update``: None removes a key)."""
        for rid, update in zip(ids, metadatas):
            row = self.rows.get(rid)
            if row is None:
                continue
            merged = {**self.metadatas[row], **update}
            self.metadatas[row] = {k: v for k, v in merged.items() if v is not None}

    # -- the search steps ------------------------------------------------------------------

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """Rows of the held ids among ``ids`` (in that order; others skipped)."""
        return np.fromiter((self.rows[i] for i in ids if i in self.rows), dtype=np.int64)

    def take(self, rows: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Ids, directions (k, d), v/T/born (k, 3) and metadatas of ``rows``."""
        return [self.ids[r] for r in rows], self._u[rows], self._vtb[rows], [self.metadatas[r] for r in rows]

    # -- snapshot --------------------------------------------------------------------------

    def save(self, directory: Path, collection: str) -> None:
        """Write the snapshot into ``directory`` (each file atomically; the JSON, which names
        the collection and the row count, last)."""
        n = len(self.ids)
        for name, array in ((SNAPSHOT_FILES[0], self._u[:n]), (SNAPSHOT_FILES[1], self._vtb[:n])):

            def write(tmp: str, array: np.ndarray = array) -> None:
                with open(tmp, "wb") as fh:
                    np.save(fh, np.ascontiguousarray(array), allow_pickle=False)

            atomic_write_with(Path(directory) / name, write)
        document = {"collection": collection, "count": n, "dim": self.dim, "ids": self.ids, "metadatas": self.metadatas}
        atomic_write_bytes(Path(directory) / SNAPSHOT_FILES[2], json.dumps(document, separators=(",", ":")).encode("utf-8"))

    @classmethod
    def load(cls, directory: Path, collection: str, dim: int) -> "ParticleMirror | None":
        """The snapshot in ``directory`` if it is there, whole and of ``collection``; else None."""
        paths = [Path(directory) / name for name in SNAPSHOT_FILES]
        if not all(p.is_file() for p in paths):
            return None
        try:
            document = json.loads(paths[2].read_text(encoding="utf-8"))
            u = np.load(paths[0], allow_pickle=False)
            vtb = np.load(paths[1], allow_pickle=False)
        except (OSError, ValueError):
            return None
        ids, metas, n = document.get("ids"), document.get("metadatas"), document.get("count")
        if (
            document.get("collection") != collection
            or document.get("dim") != dim
            or not isinstance(ids, list)
            or not isinstance(metas, list)
            or len(ids) != n
            or len(metas) != n
            or u.shape != (n, dim)
            or vtb.shape != (n, 3)
        ):
            return None
        mirror = cls(dim)
        mirror.ids, mirror.metadatas = [str(i) for i in ids], metas
        mirror.rows = {rid: row for row, rid in enumerate(mirror.ids)}
        mirror._u, mirror._vtb = u.astype(np.float32, copy=False), vtb.astype(np.float64, copy=False)
        return mirror
