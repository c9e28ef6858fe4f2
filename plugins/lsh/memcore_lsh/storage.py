"""On-disk format of the ``lsh`` index: ``.npy`` arrays and one JSON file, no pickle.

Files in the index directory, each written atomically (temp file + ``os.replace``):

- ``planes.npy``: the ``(dim, tables * bits)`` float32 hyperplanes (persisted, so a reopened
  index hashes exactly as before, whatever the numpy version's random streams);
- ``codes.npy``: ``(n, tables)`` uint64 codes of the held records, in slot order;
- ``vectors.npy``: ``(n, dim)`` normalised float32 vectors (only with ``store_vectors``);
- ``lsh.json`` (written last): format version, parameters, the ids in slot order.

The hash tables are not stored: :meth:`BucketTables.rebuild` sorts the codes again on load.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np

from memcore.plugin import atomic_write_bytes, atomic_write_json, CorruptError

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


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def write_snapshot(directory: Path, snap: Snapshot) -> None:
    """Write ``snap`` into ``directory``: arrays first, ``lsh.json`` last."""
    directory = Path(directory)
    atomic_write_bytes(directory / PLANES_FILE, _npy(snap.planes))
    atomic_write_bytes(directory / CODES_FILE, _npy(snap.codes))
    if snap.vectors is not None:
        atomic_write_bytes(directory / VECTORS_FILE, _npy(snap.vectors))
    else:
        (directory / VECTORS_FILE).unlink(missing_ok=True)
    atomic_write_json(
        directory / META_FILE,
        {"format_version": snap.format_version, **snap.params(), "count": len(snap.ids), "ids": snap.ids},
    )


def _load_array(path: Path, dtype: np.dtype, shape: tuple[int, int], what: str) -> np.ndarray:
    try:
        array: np.ndarray = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise CorruptError(f"{what}: cannot read {path.name}: {exc}") from None
    if array.dtype != dtype or array.shape != shape:
        raise CorruptError(f"{what}: {path.name} holds {array.dtype}{list(array.shape)}, expected {np.dtype(dtype)}{list(shape)}")
    return array


def read_snapshot(directory: Path, expected: SnapshotParams, format_version: int, what: str) -> Snapshot:
    """Read what :func:`write_snapshot` wrote, checking it against ``expected`` parameters.

    Raises :class:`memcore.CorruptError` on unreadable, inconsistent or mismatched files.
    """
    directory = Path(directory)
    try:
        meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptError(f"{what}: cannot read {META_FILE}: {exc}") from None
    if not isinstance(meta, dict):
        raise CorruptError(f"{what}: {META_FILE} is not a JSON object")
    if meta.get("format_version") != format_version:
        raise CorruptError(f"{what}: format version {meta.get('format_version')!r}, expected {format_version}; rebuild the index")
    found = {key: meta.get(key) for key in expected}
    if found != expected:
        raise CorruptError(f"{what}: saved with {found}, the index is configured with {expected}")
    ids = meta.get("ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or len(set(ids)) != len(ids) or meta.get("count") != len(ids):
        raise CorruptError(f"{what}: {META_FILE} has a malformed id list")
    dim, tables, bits, n = expected["dim"], expected["tables"], expected["bits"], len(ids)
    planes = _load_array(directory / PLANES_FILE, np.dtype(np.float32), (dim, tables * bits), what)
    if not np.isfinite(planes).all():
        raise CorruptError(f"{what}: {PLANES_FILE} holds non-finite values")
    codes = _load_array(directory / CODES_FILE, np.dtype(np.uint64), (n, tables), what)
    if bits < 64 and n and int(codes.max()) >> bits:
        raise CorruptError(f"{what}: {CODES_FILE} holds codes wider than {bits} bits")
    vectors = None
    if expected["store_vectors"]:
        vectors = _load_array(directory / VECTORS_FILE, np.dtype(np.float32), (n, dim), what)
        if not np.isfinite(vectors).all():
            raise CorruptError(f"{what}: {VECTORS_FILE} holds non-finite values")
    return Snapshot(format_version, dim, tables, bits, expected["seed"], planes, ids, codes, vectors)
