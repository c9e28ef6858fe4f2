"""Atomic file writes: a temp file beside the target, fsynced, then ``os.replace``-d in.

Every index and store writes its files through these, so a crash leaves the old file or the
new one, never half of either.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

__all__ = ["atomic_write_with", "atomic_write_bytes", "atomic_write_json"]


def atomic_write_with(path: Path, write: Callable[[str], None]) -> None:
    """Atomically (re)place ``path`` with what ``write(tmp_path)`` writes: the temp file is
    beside ``path``, fsynced, then ``os.replace``-d in; removed if ``write`` raises. For
    libraries that write to a path themselves (``faiss.write_index``...)."""
    path = Path(path)
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
