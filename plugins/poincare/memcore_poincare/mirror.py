"""A derived in-memory copy of the particles Chroma stores, for the cone and neighbour steps.

Chroma stays the stored copy and the truth: every write goes to Chroma first and, once
Chroma took it, to the mirror (:meth:`ParticleMirror.upsert`, :meth:`delete`,
:meth:`set_metadata`). After an open or a load the mirror is read from its snapshot
(:mod:`.snapshot`) when that is whole and matches Chroma, else rebuilt from the collection
(one batched ``get``) the first time a search needs it.

What it holds, one row per particle: the unit direction (float32), ``v``, ``T`` and
``born`` (float64 arrays, read by the projection without touching the metadata), the
Chroma metadata dict (returned in :class:`~.types.SearchResult`) and the id; and a journal
of the ids changed since the last snapshot save (what an incremental save writes).

The cone (step 1) is answered here too (:meth:`ParticleMirror.cone`: exact cosine top
``cone_width`` over the held directions with faiss's inner-product kernel, ~0.7 ms at 100k
x 64 against ~1.6 ms for Chroma's ids-only HNSW query; from 8192 rows a float16 copy
narrows it first and only the best few are scored in float32, with a certificate that the
result is still the exact cone, :mod:`.prescan`), then the candidates' directions,
v/T/born and metadata are read here, and the neighbour fetch (step 3) is a dict lookup
instead of a Chroma ``get``. Reading embeddings and metadata through the Chroma API is what
made those steps slow (9 ms against 0.8 ms for 100 ids at 20k points).

Only the writes of this process reach it: with several processes writing to one Chroma
server, turn it off (``mirror = "off"``; ``"auto"`` does for http connections).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

import numpy as np

from . import clusters
from .clusters import ClusterCone
from .prescan import MIN_ROWS, Fp16Prescan, margin

__all__ = ["ParticleMirror"]


class ParticleMirror:
    """Directions, v/T/born, metadata and ids of every stored particle, row-indexed."""

    def __init__(self, dim: int):
        self.dim = int(dim)
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.metadatas: list[dict[str, Any]] = []
        self._u = np.zeros((0, self.dim), dtype=np.float32)
        self._vtb = np.zeros((0, 3), dtype=np.float64)  # v, T, born
        self._upserted: dict[str, None] = {}  # changed since the last snapshot save (ordered set)
        self._deleted: dict[str, None] = {}
        self._saved_as: tuple[str, str, int] | None = None
        self._prescan: Fp16Prescan | None = None  # the float16 copy narrowing the cone (.prescan), built on first use
        self._clusters: ClusterCone | None = None  # the cluster-pruned cone (.clusters), built on first use
        self._links: dict[int, tuple[dict[str, Any], tuple[str, ...]]] = {}  # row -> (its metadata dict, its links parsed)

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
        mirror.mark_saved(None)  # matches no snapshot: the next save writes a base
        return mirror

    @classmethod
    def from_arrays(cls, dim: int, ids: list[str], directions: np.ndarray, metadatas: list[dict[str, Any]]) -> "ParticleMirror":
        """A mirror of these rows (a snapshot's base): ids unique, directions (n, dim) unit."""
        mirror = cls(dim)
        n = len(ids)
        mirror.ids, mirror.metadatas = ids, metadatas
        mirror.rows = {rid: row for row, rid in enumerate(ids)}
        if len(mirror.rows) != n:
            raise ValueError("ids repeat")
        mirror._u = np.ascontiguousarray(directions, dtype=np.float32)
        mirror._vtb = np.empty((n, 3), dtype=np.float64)
        for j, key in enumerate(("v", "T", "born")):
            mirror._vtb[:, j] = np.fromiter((m[key] for m in metadatas), dtype=np.float64, count=n)
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
            self._touch(row)
            self._u[row] = directions[i]
            self._vtb[row] = (meta["v"], meta["T"], meta["born"])
            self._upserted[rid] = None
            self._deleted.pop(rid, None)

    def _touch(self, row: int) -> None:
        """Row ``row`` was written: the cone's helpers score it exactly until they are rebuilt."""
        if self._prescan is not None:
            self._prescan.touch(row)
        if self._clusters is not None:
            self._clusters.touch(row)

    def delete(self, ids: Iterable[str]) -> None:
        """Remove rows (unknown ids ignored); the last row moves into each hole."""
        for rid in ids:
            row = self.rows.pop(rid, None)
            if row is None:
                continue
            self._upserted.pop(rid, None)
            self._deleted[rid] = None
            last = len(self.ids) - 1
            if row != last:
                moved = self.ids[last]
                self.ids[row], self.metadatas[row] = moved, self.metadatas[last]
                self._u[row], self._vtb[row] = self._u[last], self._vtb[last]
                self.rows[moved] = row
                self._touch(row)
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
            self._upserted[rid] = None

    # -- the search steps ------------------------------------------------------------------

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """Rows of the held ids among ``ids`` (in that order; others skipped)."""
        return np.fromiter((self.rows[i] for i in ids if i in self.rows), dtype=np.int64)

    def links_of(self, row: int) -> tuple[str, ...]:
        """The link targets of ``row`` (its metadata's ``links`` JSON, parsed once per
        metadata version; anything but a list of strings reads as no links)."""
        meta = self.metadatas[row]
        cached = self._links.get(row)
        if cached is not None and cached[0] is meta:  # writes replace the dict: identity tells a stale entry
            return cached[1]
        links = parse_links(meta.get("links"))
        self._links[row] = (meta, links)
        return links

    def arrays(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Directions (k, d) and v/T/born (k, 3) of ``rows`` (copies)."""
        return self._u[rows], self._vtb[rows]

    def direction(self, row: int) -> np.ndarray:
        """The unit direction of ``row`` (a view)."""
        direction: np.ndarray = self._u[row]
        return direction

    def take(self, rows: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Ids, directions (k, d), v/T/born (k, 3) and metadatas of ``rows``."""
        listed = rows.tolist()  # Python ints: list indexing with numpy integers is slower
        return [self.ids[r] for r in listed], self._u[rows], self._vtb[rows], [self.metadatas[r] for r in listed]

    # -- the journal of what changed since the last snapshot save (.snapshot) ---------------

    @property
    def saved_as(self) -> tuple[str, str, int] | None:
        """(folder, base name, delta segments) of the snapshot the mirror matches with an
        empty journal; None when it matches none (built from Chroma)."""
        return self._saved_as

    def mark_saved(self, where: tuple[str, str, int] | None) -> None:
        """The snapshot now holds every row: empty the journal."""
        self._saved_as = where
        self._upserted.clear()
        self._deleted.clear()

    def journal(self) -> tuple[list[str], list[str]]:
        """Ids upserted (still held) and ids deleted since the last save."""
        return list(self._upserted), list(self._deleted)

    # -- the exact cone ----------------------------------------------------------------------

    def cone(self, directions: np.ndarray, k: int, rows: np.ndarray | None = None) -> list[np.ndarray]:
        """Step 1 without Chroma: per query direction (rows of ``directions``), the rows of the
        ``k`` held particles of highest cosine (exact; among ``rows`` when given), best first.
        faiss's exact inner-product kernel (one query at a time: its batched BLAS path is
        slower for a handful of queries); numpy when faiss is missing."""
        base = self.directions if rows is None else self._u[rows]
        k = min(int(k), base.shape[0])
        if k == 0:
            return [np.zeros(0, dtype=np.int64) for _ in range(len(directions))]
        queries = np.ascontiguousarray(directions, dtype=np.float32)
        out = []
        knn = _faiss_knn()
        whole = rows is None and knn is not None  # the helpers narrow a cone over every row, with faiss
        pruned = self._cluster_cone(k) if whole else None
        prescan: Fp16Prescan | None = None
        for q in queries:
            narrowed = pruned.cone(q.reshape(1, -1), base, k, knn) if pruned is not None and pruned.useful else None
            if narrowed is None and whole:
                prescan = prescan or self._fp16_prescan(k)  # built when the clusters first decline
                narrowed = prescan.cone(q.reshape(1, -1), base, k, knn) if prescan is not None else None
            if narrowed is not None:
                out.append(narrowed.astype(np.int64))
                continue
            if knn is not None:
                _, found = knn(q.reshape(1, -1), base, k)
                picked = found[0][found[0] >= 0]
            else:
                scores = base @ q
                part = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
                picked = part[np.argsort(-scores[part], kind="stable")]
            out.append(picked.astype(np.int64) if rows is None else rows[picked])
        return out

    def cone_stats(self) -> dict[str, int | None]:
        """The float16 pre-scan so far: rows its copy holds (None: not built), cones it
        answered (``certified``) and cones it left to the float32 scan (``refused``)."""
        p, c = self._prescan, self._clusters
        return {
            "clusters_rows": None if c is None else c.built,
            "clusters_served": 0 if c is None else c.served,
            "clusters_declined": 0 if c is None else c.declined,
            "prescan_rows": None if p is None else p.built,
            "certified": 0 if p is None else p.certified,
            "refused": 0 if p is None else p.refused,
        }

    def _cluster_cone(self, k: int) -> ClusterCone | None:
        """The cluster-pruned cone (built or rebuilt now when missing or stale), or None for
        fewer than ``clusters.MIN_ROWS`` rows, a cone of a tenth of them or more, or once it
        stopped paying (no cluster structure to prune with)."""
        n = len(self.ids)
        if n < clusters.MIN_ROWS or 10 * k > n:
            return None
        if self._clusters is None or self._clusters.stale(n):
            import faiss

            self._clusters = ClusterCone(self.directions, faiss)
        return self._clusters if self._clusters.useful else None

    def _fp16_prescan(self, k: int) -> Fp16Prescan | None:
        """The float16 copy (built or rebuilt now when missing or stale), or None when the
        full float32 scan is as cheap (few rows, or a cone of half of them or more)."""
        n = len(self.ids)
        if n < MIN_ROWS or 2 * (k + margin(k)) > n:
            return None
        if self._prescan is None or self._prescan.stale(n):
            import faiss

            self._prescan = Fp16Prescan(self.directions, faiss)
        return self._prescan


def parse_links(raw: Any) -> tuple[str, ...]:
    """Link targets from a metadata ``links`` value (a JSON list of ids); anything else: none."""
    try:
        links = json.loads(raw or "[]")
    except (TypeError, ValueError):
        return ()
    return tuple(t for t in links if isinstance(t, str)) if isinstance(links, list) else ()


def _faiss_knn() -> Any:
    """``faiss.knn`` with the inner-product metric, or None when faiss is not installed."""
    global _KNN
    if _KNN is False:
        try:
            import faiss
        except ImportError:
            _KNN = None
        else:
            metric = faiss.METRIC_INNER_PRODUCT

            def knn(q: np.ndarray, base: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
                return faiss.knn(q, np.ascontiguousarray(base), k, metric=metric)

            _KNN = knn
    return _KNN


_KNN: Any = False
