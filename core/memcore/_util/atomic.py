"""Atomic file writes: a temp file beside the target, fsynced, then ``os.replace``-d in.

Every index and store writes its files through these, so a crash leaves the old file or the
new one, never half of either. A write that fails because the disk, the quota or the
process's file size limit is full raises :class:`~memcore.StorageFullError` naming the
file (the target keeps its previous content); other OS errors pass through unchanged.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import StorageFullError

__all__ = ["atomic_write_with", "atomic_write_bytes", "atomic_write_json", "FULL_ERRNOS", "storage_full", "storage_full_errors"]

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
"""``errno`` values meaning "no room to write": the disk is full, the file passed the
process's size limit (``ulimit -f``), the user's quota is used up."""


def storage_full(exc: BaseException, path: str | os.PathLike[str] | None, *, exact: bool = False) -> StorageFullError | None:
    """A :class:`StorageFullError` for ``exc`` when it is an OS error of :data:`FULL_ERRNOS`,
    else None. It names ``exc.filename``, else ``path`` (``exact``: ``path`` first)."""
    if not isinstance(exc, OSError) or isinstance(exc, StorageFullError) or exc.errno not in FULL_ERRNOS:
        return None
    where = str((path or exc.filename) if exact else (exc.filename or path) or "")
    error = StorageFullError(
        f"cannot write {where or 'a file'}: {os.strerror(exc.errno or 0)} ({errno.errorcode.get(exc.errno or 0, exc.errno)}); "
        "nothing acknowledged was lost: free space (or raise the limit) and retry",
        path=where or None,
    )
    error.errno = exc.errno
    return error


@contextlib.contextmanager
def storage_full_errors(path: str | os.PathLike[str] | None, *, exact: bool = False) -> Iterator[None]:
    """Inside the block, an OS error meaning "no room" (:data:`FULL_ERRNOS`) becomes a
    :class:`StorageFullError` naming its file, else ``path`` (``exact``: ``path`` first);
    everything else passes through."""
    try:
        yield
    except OSError as exc:
        full = storage_full(exc, path, exact=exact)
        if full is None:
            raise
        raise full from exc


def atomic_write_with(path: Path, write: Callable[[str], None]) -> None:
    """Atomically (re)place ``path`` with what ``write(tmp_path)`` writes: the temp file is
    beside ``path``, fsynced, then ``os.replace``-d in; removed if ``write`` raises. For
    libraries that write to a path themselves (``faiss.write_index``...)."""
    path = Path(path)
    with storage_full_errors(path, exact=True):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        try:
            write(tmp)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``path``, fsync, then ``os.replace`` it in."""

    def write(tmp: str) -> None:
        Path(tmp).write_bytes(data)

    atomic_write_with(path, write)


def atomic_write_json(path: Path, value: Any) -> None:
    """Atomically write a JSON document."""
    atomic_write_bytes(Path(path), json.dumps(value, sort_keys=True, indent=1).encode("utf-8"))
