"""Format 1: saves without the vectors the store already keeps, refilled on load.

Format 2 (the index's ``save`` since issue 25) writes every layout with its vectors:
refilling 100k x 384 vectors from SQLite row by row took ~1 s at open, reading them back
with the graph in one ``faiss.read_index`` a fraction of that. This module still reads the
format-1 saves described below (the next save rewrites them as format 2).

In a collection the index gets a :class:`memcore.plugin.VectorReader` (``IndexContext.vectors``).
Then the layouts whose vectors are the records' own vectors (prepared: normalised for
cosine) save no second copy of them:

- ``hnsw`` (``IndexHNSWFlat``): ``index.faiss`` is written with faiss'
  ``IO_FLAG_SKIP_STORAGE`` -- the graph without its ``IndexFlat`` storage -- plus
  ``tombstones.npy``, the vectors of tombstones (removed records still in the graph: the
  store no longer has them, and the graph walks through them). On load the graph is read
  back with the same flag and a new ``IndexFlat`` is filled position by position: live
  labels from the store, tombstones from ``tombstones.npy``;
- ``flat`` (``IndexIDMap2(IndexFlat)``): no faiss file at all; the index is rebuilt from
  the store's vectors in label order.

Records the store no longer has (deleted after the save, before a crash) are taken out
at load: dropped from a flat index, made tombstones (zero vectors) in the graph; the
catch-up that follows would have removed them anyway. Every other layout (IVF, PQ, SQ,
pre-transforms, an untrained buffer) keeps its own copy, as without a reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from memcore.plugin import CorruptError, VectorReader, atomic_write_bytes, npy_bytes, read_npy

from .container import Container
from .labels import LabelMap
from .scores import Scoring
from .storage import TOMBSTONES_FILE

__all__ = ["store_layout", "write_tombstones", "load_hnsw", "load_flat"]

_CHUNK = 16384  # rows per IndexFlat.add (flat) or per in-place move (hnsw)


def store_layout(faiss: Any, main: Container, pending: Container | None) -> str | None:
    """``"hnsw"`` or ``"flat"`` when ``main`` can be saved without its vectors, else None."""
    if pending is not None:
        return None
    if type(main.index) is faiss.IndexHNSWFlat:
        return "hnsw"
    if main.wrapped and type(main.searcher) in (faiss.IndexFlat, faiss.IndexFlatIP, faiss.IndexFlatL2):
        return "flat"
    return None


def write_tombstones(main: Container, labels: LabelMap, dim: int, path: Path) -> bool:
    """Write the (prepared) vectors of the tombstones in label order; False when there are none."""
    if not labels.dead:
        path.unlink(missing_ok=True)
        return False
    dead = np.asarray(sorted(labels.dead), dtype=np.int64)
    atomic_write_bytes(path, npy_bytes(main.reconstruct(dead, dim)))
    return True


def _read_live(reader: VectorReader, labels: LabelMap, live: np.ndarray, space: str, scoring: Scoring) -> tuple[np.ndarray, np.ndarray]:
    """The store's vectors of the live labels (sorted), raw, and which ones the store still has."""
    ids = labels.ids_for(live)
    return reader.read(ids, space, scoring.dim)


def load_hnsw(faiss: Any, path: Path, labels: LabelMap, reader: VectorReader, space: str, scoring: Scoring, where: str) -> Any:
    """Read the graph saved without storage and give it an ``IndexFlat`` refilled from the store.

    The storage is sized once and written in place: the store writes its vectors straight
    into it (:meth:`memcore.plugin.VectorReader.read_into`; with tombstones packed first, then moved
    to their positions in place); they are normalised there, tombstones' vectors placed from
    ``tombstones.npy``."""
    try:
        graph = faiss.read_index(str(path), faiss.IO_FLAG_SKIP_STORAGE)
    except RuntimeError as exc:
        lines = [line for line in str(exc).splitlines() if line.strip()]
        raise CorruptError(f"{where}: cannot read {path.name}: {lines[-1] if lines else exc}") from None
    if type(graph) is not faiss.IndexHNSWFlat:
        raise CorruptError(f"{where}: {path.name} holds a {type(graph).__name__}, not the HNSW graph it saved")
    ntotal = int(graph.ntotal)
    if ntotal != len(labels) + len(labels.dead) or labels.next_label != ntotal:
        raise CorruptError(f"{where}: the graph has {ntotal} nodes, the id map {len(labels)} + {len(labels.dead)} tombstones")
    dim = scoring.dim
    dead = np.asarray(sorted(labels.dead), dtype=np.int64)
    dead_vectors = _read_tombstones(path.with_name(TOMBSTONES_FILE), len(dead), dim, where)
    live = labels.live_labels()
    flat = faiss.IndexFlat(dim, graph.metric_type)
    flat.codes.resize(ntotal * dim * 4)
    flat.ntotal = ntotal
    stored = faiss.rev_swig_ptr(flat.get_xb(), ntotal * dim).reshape(ntotal, dim)
    m = len(live)
    # the store writes the live vectors straight into faiss' storage, packed at the front ...
    present = reader.read_into(labels.ids_for(live), space, stored[:m])
    # ... then, with tombstones, each moves to its label, from the last down: a destination
    # (live[i] >= i) is never a row still to be moved
    for stop in range(m, 0, -_CHUNK) if m < ntotal else ():
        start = max(0, stop - _CHUNK)
        stored[live[start:stop]] = stored[start:stop]
    scoring.prepare_inplace(stored, f"{where}: stored vectors")  # tombstones' rows are overwritten next
    if len(dead):
        stored[dead] = dead_vectors  # already prepared when saved
    graph.storage = flat
    graph.own_fields = True
    flat.this.disown()  # the graph owns (and frees) its storage from now on
    gone = live[~present]
    if len(gone):  # deleted from the store after the save: tombstones with zero vectors
        labels.bury(labels.drop([labels.id_of[int(label)] for label in gone]))
    return graph


def load_flat(faiss: Any, index: Any, labels: LabelMap, reader: VectorReader, space: str, scoring: Scoring, where: str) -> Any:
    """Fill the new empty ``IndexIDMap2(IndexFlat)`` ``index`` from the store, in label order."""
    if labels.dead:
        raise CorruptError(f"{where}: a flat index has no tombstones, the id map lists {len(labels.dead)}")
    live = labels.live_labels()
    raw, present = _read_live(reader, labels, live, space, scoring)
    gone = live[~present]
    if len(gone):  # deleted from the store after the save
        labels.drop([labels.id_of[int(label)] for label in gone])
        raw, live = raw[present], live[present]
    for start in range(0, len(live), _CHUNK):
        stop = min(start + _CHUNK, len(live))
        index.add_with_ids(scoring.prepare(raw[start:stop], f"{where}: stored vectors"), live[start:stop])
    return index


def _read_tombstones(path: Path, count: int, dim: int, where: str) -> np.ndarray:
    if not count:
        return np.zeros((0, dim), dtype=np.float32)
    return read_npy(path, where, dtype=np.float32, shape=(count, dim))
