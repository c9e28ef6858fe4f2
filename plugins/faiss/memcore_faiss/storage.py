"""On-disk format of a faiss index directory: native faiss files plus a JSON sidecar.

Files (all written to a temp file in the same directory, fsynced, then ``os.replace``-d):

- ``index.faiss``: the main index with its vectors, faiss' own format
  (``faiss.write_index``), read back memory-mapped until the first write (:mod:`.mapped`;
  format 2; format 1 wrote
  an HNSW graph without its vectors and a Flat index not at all, refilled from the store's
  vectors at load, see :mod:`.refill`: still read);
- ``tombstones.npy``: only in a format-1 save of an HNSW graph without vectors, the
  vectors of its tombstones (the store no longer has them);
- ``pending.faiss``: only while a trainable index is untrained, the exact IDMap2(Flat)
  buffer holding the vectors collected so far;
- ``idmap.npz``: the id map (ids, labels, tombstones) as arrays, see
  :meth:`.labels.LabelMap.to_arrays` (saves before it kept them as lists in ``state.json``,
  still read), and optionally ``rows``, the store's file row of each label (:mod:`.rows`);
- ``state.json``, written last: format version, dimension, metric, factory, trained
  flag, the label counter and the id map's file and counts, where the vectors are
  (``"vectors": "own"`` or ``"store"`` with ``store_layout`` and ``space``) and the expected ``ntotal`` of
  each faiss file, so a mismatched set of files is refused with CorruptError; ``trained_on``
  (how many vectors the training saw, informative).

The core's ``index.json`` checks the kind, config and format version and a checksum of
each file before ``load``; the sidecar's copies of them are informative, ``load`` compares
only the dimension (the space's, not the config's). No pickle anywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from memcore.plugin import atomic_write_json, atomic_write_with, CorruptError, read_json_object, read_npz, write_npz

from .mapped import MappedFile, open_mapped

__all__ = [
    "MAIN_FILE",
    "PENDING_FILE",
    "STATE_FILE",
    "TOMBSTONES_FILE",
    "IDMAP_FILE",
    "write_faiss",
    "read_faiss",
    "read_faiss_mapped",
    "write_state",
    "read_state",
    "write_idmap",
    "read_idmap",
    "read_store_rows",
    "remove_stale",
]

MAIN_FILE = "index.faiss"
PENDING_FILE = "pending.faiss"
STATE_FILE = "state.json"
TOMBSTONES_FILE = "tombstones.npy"
IDMAP_FILE = "idmap.npz"
IDMAP_ARRAYS = ("labels", "offsets", "text", "tombstones")
"""The arrays of ``idmap.npz`` (:meth:`.labels.LabelMap.to_arrays`)."""
ROWS_ARRAY = "rows"
"""The optional array of ``idmap.npz``: the store's file row of each of ``labels`` (see :mod:`.rows`)."""


def write_faiss(faiss: Any, index: Any, path: Path, flags: int = 0) -> None:
    """``faiss.write_index`` (with IO ``flags``) to a temp file beside ``path``, fsync, then ``os.replace``."""
    atomic_write_with(Path(path), lambda tmp: faiss.write_index(index, tmp, flags) if flags else faiss.write_index(index, tmp))


def read_faiss(faiss: Any, path: Path, where: str) -> Any:
    """``faiss.read_index``; CorruptError when the file is missing or unreadable."""
    if not Path(path).is_file():
        raise CorruptError(f"{where}: {Path(path).name} is missing")
    try:
        return faiss.read_index(str(path))
    except RuntimeError as exc:
        lines = [line for line in str(exc).splitlines() if line.strip()]
        raise CorruptError(f"{where}: cannot read {Path(path).name}: {lines[-1] if lines else exc}") from None


def read_faiss_mapped(faiss: Any, path: Path, where: str) -> tuple[Any, MappedFile | None]:
    """:func:`read_faiss` memory-mapped where faiss and the platform can (see :mod:`.mapped`):
    the index and the :class:`.mapped.MappedFile` it reads from, else the index read into
    memory and None."""
    if not Path(path).is_file():
        raise CorruptError(f"{where}: {Path(path).name} is missing")
    try:
        opened = open_mapped(faiss, Path(path))
    except (RuntimeError, OSError) as exc:
        lines = [line for line in str(exc).splitlines() if line.strip()]
        raise CorruptError(f"{where}: cannot read {Path(path).name}: {lines[-1] if lines else exc}") from None
    if opened is None:
        return read_faiss(faiss, path, where), None
    return opened


def write_state(directory: Path, state: dict[str, Any]) -> None:
    """Write the JSON sidecar (last, after the faiss files)."""
    atomic_write_json(Path(directory) / STATE_FILE, state)


def read_state(directory: Path, where: str) -> dict[str, Any]:
    """Read the JSON sidecar; CorruptError when missing or not a JSON object."""
    return read_json_object(Path(directory) / STATE_FILE, where)


def write_idmap(directory: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write the id map's arrays (:data:`IDMAP_ARRAYS`) as ``idmap.npz``, atomically, no pickle."""
    write_npz(Path(directory) / IDMAP_FILE, arrays)


def read_idmap(directory: Path, where: str) -> dict[str, np.ndarray]:
    """The arrays of ``idmap.npz``; CorruptError when it is missing, unreadable or lacks one."""
    return read_npz(Path(directory) / IDMAP_FILE, where, IDMAP_ARRAYS)


def read_store_rows(directory: Path, where: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``(labels, rows)`` of ``idmap.npz`` when it keeps :data:`ROWS_ARRAY`, else None."""
    path = Path(directory) / IDMAP_FILE
    try:
        with np.load(path, allow_pickle=False) as data:
            if ROWS_ARRAY not in data.files:
                return None
    except (OSError, ValueError) as exc:
        raise CorruptError(f"{where}: cannot read {IDMAP_FILE}: {exc}") from None
    arrays = read_npz(path, where, ("labels", ROWS_ARRAY))
    return arrays["labels"], arrays[ROWS_ARRAY]


def remove_stale(directory: Path, keep: set[str]) -> None:
    """Delete files this index wrote before that the current state no longer lists."""
    for name in (MAIN_FILE, PENDING_FILE, TOMBSTONES_FILE, IDMAP_FILE):
        if name not in keep:
            try:
                (Path(directory) / name).unlink()
            except FileNotFoundError:
                pass
