"""Reading and writing an index's payload: the files its ``save`` writes into its folder.

The payload contract: an index writes and reads only its own files, in the directory it is
given. The core wraps them (:class:`~memcore.index_handle.IndexHandle`): ``index.json``
records the kind, the config, the format version (an index may still read the older
versions it lists in ``Index.readable_versions``) and a SHA-256 of every file; the save is
atomic and a save cut short falls back to ``.previous``. A plugin therefore checks no
header of its own, only what its files mean (row counts agreeing between two files...).

These helpers read one file each and raise :class:`~memcore.CorruptError` naming the index
(``where``, e.g. ``"lsh index 'docs' in /path"``) and the file when it is missing,
unreadable or not what was expected. ``.npy`` / ``.npz`` files never hold pickles.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from .._util.atomic import atomic_write_bytes
from ..errors import CorruptError

__all__ = ["read_json", "read_json_object", "read_npy", "npy_bytes", "write_npz", "read_npz"]

_UNREADABLE = (OSError, ValueError, EOFError, zipfile.BadZipFile)


def read_json(path: Path, where: str) -> Any:
    """The JSON document in ``path``; CorruptError when it is missing or not JSON."""
    path = Path(path)
    try:
        return json.loads(path.read_bytes())
    except _UNREADABLE as exc:
        raise CorruptError(f"{where}: cannot read {path.name}: {exc}") from None


def read_json_object(path: Path, where: str) -> dict[str, Any]:
    """The JSON object in ``path``; CorruptError when it is missing, not JSON or not an object."""
    document = read_json(path, where)
    if not isinstance(document, dict):
        raise CorruptError(f"{where}: {Path(path).name} is not a JSON object")
    return document


def read_npy(path: Path, where: str, *, dtype: npt.DTypeLike | None = None, shape: Sequence[int] | None = None, mmap: bool = False) -> np.ndarray:
    """The array in the ``.npy`` file ``path`` (no pickle; memory-mapped read-only with ``mmap``).

    CorruptError when it is missing or unreadable, or when its dtype / shape is not the
    ``dtype`` / ``shape`` given (each checked only when given)."""
    path = Path(path)
    try:
        array: np.ndarray = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except _UNREADABLE as exc:
        raise CorruptError(f"{where}: cannot read {path.name}: {exc}") from None
    if not isinstance(array, np.ndarray):  # an .npz archive under an .npy name
        raise CorruptError(f"{where}: {path.name} is not an .npy array")
    wrong_dtype = dtype is not None and array.dtype != np.dtype(dtype)
    wrong_shape = shape is not None and tuple(array.shape) != tuple(shape)
    if wrong_dtype or wrong_shape:
        want_dtype = np.dtype(dtype) if dtype is not None else array.dtype
        want_shape = list(shape) if shape is not None else list(array.shape)
        raise CorruptError(f"{where}: {path.name} holds {array.dtype}{list(array.shape)}, expected {want_dtype}{want_shape}")
    return array


def npy_bytes(array: npt.ArrayLike) -> bytes:
    """``array`` as the bytes of an ``.npy`` file (C order, no pickle), for :func:`memcore.atomic_write_bytes`."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Named arrays as one uncompressed ``.npz`` (``.npy`` members, no pickle), written atomically."""
    buffer = io.BytesIO()
    np.savez(buffer, **{name: np.asarray(array) for name, array in arrays.items()})  # type: ignore[arg-type]  # numpy's stub: a key could be its bool allow_pickle (absent before numpy 2.1)
    atomic_write_bytes(Path(path), buffer.getvalue())


def read_npz(path: Path, where: str, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The arrays ``names`` of an ``.npz`` written by :func:`write_npz` (pickle refused);
    CorruptError when the file is missing, unreadable or lacks one of them."""
    path = Path(path)
    try:
        data = np.load(path, allow_pickle=False)
    except _UNREADABLE as exc:
        raise CorruptError(f"{where}: cannot read {path.name}: {exc}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):  # an .npy array under an .npz name
        raise CorruptError(f"{where}: {path.name} is not an .npz archive")
    try:
        with data:
            return {name: data[name] for name in names}
    except (*_UNREADABLE, KeyError) as exc:
        raise CorruptError(f"{where}: cannot read {path.name}: {exc}") from None
