"""On-disk format of the ``lsh`` index: ``.npy`` arrays and one JSON file, no pickle.

Files in the index directory, each written atomically (temp file + ``os.replace``):

- ``planes.npy``: the ``(dim, tables * bits)`` float32 hyperplanes (persisted, so a reopened
  index hashes exactly as before, whatever the numpy version's random streams);
- ``codes.npy``: ``(n, tables)`` uint64 codes of the held records, in slot order;
- ``vectors.npy``: ``(n, dim)`` normalised float32 vectors (only with ``store_vectors``);
- ``lsh.json`` (written last): format version, parameters, the ids in slot order.

The hash tables are not stored: :meth:`BucketTables.rebuild` sorts the codes again on load.
The core's ``index.json`` checks the format version, the config and a checksum of each file
before ``load``; ``lsh.json``'s copies of them are informative, the reader checks that the
files agree with each other and with the space's dimension.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np

from memcore.plugin import atomic_write_bytes, atomic_write_json, CorruptError, npy_bytes, read_json_object, read_npy

__all__ = ["Snapshot", "SnapshotParams", "write_snapshot", "read_snapshot", "META_FILE"]

META_FILE = "lsh.json"
PLANES_FILE = "planes.npy"
CODES_FILE = "codes.npy"
VECTORS_FILE = "vectors.npy"


class SnapshotParams(TypedDict):
    """The parameters a snapshot is saved with, which the loading index's config must match."""

    dim: int
    tables: int
    bits: int
    seed: int
    store_vectors: bool


@dataclass
class Snapshot:
    """Everything ``save`` writes: parameters, hyperplanes, ids, codes and (optionally) vectors."""

    format_version: int
    dim: int
    tables: int
    bits: int
    seed: int
    planes: np.ndarray
    ids: list[str]
    codes: np.ndarray
    vectors: np.ndarray | None

    def params(self) -> SnapshotParams:
        """The parameters that must match the config of the index loading it."""
        return {"dim": self.dim, "tables": self.tables, "bits": self.bits, "seed": self.seed, "store_vectors": self.vectors is not None}


def write_snapshot(directory: Path, snap: Snapshot) -> None:
    """Write ``snap`` into ``directory``: arrays first, ``lsh.json`` last."""
    directory = Path(directory)
    atomic_write_bytes(directory / PLANES_FILE, npy_bytes(snap.planes))
    atomic_write_bytes(directory / CODES_FILE, npy_bytes(snap.codes))
    if snap.vectors is not None:
        atomic_write_bytes(directory / VECTORS_FILE, npy_bytes(snap.vectors))
    else:
        (directory / VECTORS_FILE).unlink(missing_ok=True)
    atomic_write_json(
        directory / META_FILE,
        {"format_version": snap.format_version, **snap.params(), "count": len(snap.ids), "ids": snap.ids},
    )


def read_snapshot(directory: Path, expected: SnapshotParams, format_version: int, what: str) -> Snapshot:
    """Read what :func:`write_snapshot` wrote into arrays of the ``expected`` shapes.

    ``format_version``: the index's (the core checked the saved one in ``index.json``).
    Raises :class:`memcore.CorruptError` on unreadable or inconsistent files.
    """
    directory = Path(directory)
    meta = read_json_object(directory / META_FILE, what)
    if meta.get("dim") != expected["dim"]:  # the space's (the other parameters are config: the core compares them)
        raise CorruptError(f"{what}: saved with dim {meta.get('dim')!r}, the index's space has {expected['dim']}")
    ids = meta.get("ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or len(set(ids)) != len(ids) or meta.get("count") != len(ids):
        raise CorruptError(f"{what}: {META_FILE} has a malformed id list")
    dim, tables, bits, n = expected["dim"], expected["tables"], expected["bits"], len(ids)
    planes = read_npy(directory / PLANES_FILE, what, dtype=np.float32, shape=(dim, tables * bits))
    if not np.isfinite(planes).all():
        raise CorruptError(f"{what}: {PLANES_FILE} holds non-finite values")
    codes = read_npy(directory / CODES_FILE, what, dtype=np.uint64, shape=(n, tables))
    if bits < 64 and n and int(codes.max()) >> bits:
        raise CorruptError(f"{what}: {CODES_FILE} holds codes wider than {bits} bits")
    vectors = None
    if expected["store_vectors"]:
        vectors = read_npy(directory / VECTORS_FILE, what, dtype=np.float32, shape=(n, dim))
        if not np.isfinite(vectors).all():
            raise CorruptError(f"{what}: {VECTORS_FILE} holds non-finite values")
    return Snapshot(format_version, dim, tables, bits, expected["seed"], planes, ids, codes, vectors)
