"""Saved row sets: the file rows of the filters a writer resolved, kept for its next open.

A filtered search resolves its filter and scope to the rows of the matching records in a
space's vector file (:meth:`SQLiteStore.allowed_rows`: one SQL statement joining a field's
index with the space's ``rid -> row`` table, ~1 ms for 1,000 matches at 100k records in a
fresh process, ~5 ms for 10,000 at 1M, while the search that follows takes a fraction of
a millisecond). A process keeps resolved sets for as long as the store does not change;
a new process resolved them all again. So the store remembers the row sets it resolved at
its present sequence number, and the writer saves them when it closes into one file beside
the database, ``row_sets.bin``, stamped with that sequence number and the schema version.
The next process answers the same filter, scope and space from the file while the store is
still at exactly that sequence number (checked in the same read snapshot as the SQL would
be): any write since (this process's, or another's seen by a reader) makes every saved set
stale, and the SQL answers as before. A set is therefore exact by construction, scopes
included (the scope is part of its key): it is the answer the SQL gave at that very state.

The file (replaced atomically: written beside, fsynced, renamed over) holds a magic line,
the sequence number, the schema version, a table of the sets (per set a 16-byte BLAKE2b
digest of its key, where its rows start, how many, and the CRC-32 of their bytes: no filter
value or scope is written in clear) with its own CRC-32, and the rows as little-endian
int64, read through a read-only memory map. A set's checksum is checked when it is first
used (a flipped bit must not hand an index rows of other records: ~4 µs for 1,000 rows). A missing, damaged or stale file
is ignored (and replaced or removed at the writer's next close). The writer removes the
file at its first write (:meth:`RowSets.drop_file`), before that write commits: every set
is stale from then on, and a forgotten scope's keys and rows must not stay on disk. It holds at most
:data:`SETS_MAX` sets and :data:`ROWS_MAX` rows.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import zlib
from pathlib import Path
import numpy as np

from .._util.atomic import atomic_write_with
from .._util.log import get_logger
from ..model._document import DocumentFilter, document_key
from ..model._filters import Filter, filter_key
from ..model._record import Scope

__all__ = ["RowSets", "ROW_SETS_FILE", "SETS_MAX", "ROWS_MAX", "row_set_key"]

log = get_logger("memcore.store")

ROW_SETS_FILE = "row_sets.bin"
"""The file of saved row sets, beside the database."""

SETS_MAX = 64
"""Most sets remembered and saved."""

ROWS_MAX = 1 << 22
"""Most rows remembered and saved, over every set (32 MiB)."""

_MAGIC = b"memcore-rowsets\n"
_HEAD = struct.Struct("<QQQQ")
"""After the magic: the sequence number, the schema version, the number of sets, and the
CRC-32 of those three and the table of sets."""


def row_set_key(space: str, where: Filter | None, where_document: DocumentFilter | None, scope: Scope | None) -> bytes:
    """The key of one resolved set: a digest (BLAKE2b, 16 bytes) of the space, the filter,
    the text filter and the scope (their cache keys: equal for the same meaning)."""
    scoped = tuple(sorted(scope.as_dict().items())) if scope is not None else ()
    text = repr((space, filter_key(where), document_key(where_document), scoped))
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class RowSets:
    """The row sets of one store: those remembered at its present sequence number, and the
    saved file's (read on first use)."""

    def __init__(self, path: Path, schema: int):
        self.path = path
        self.schema = schema
        self._seq: int | None = None
        self._sets: dict[bytes, np.ndarray] = {}
        self._rows = 0
        self._saved: tuple[int, dict[bytes, tuple[np.ndarray, int]]] | None = None
        self._read = False
        self._file_kept = True  # until the writer's first write removes it (see drop_file)

    def get(self, key: bytes, seq: int) -> np.ndarray | None:
        """The rows of ``key`` resolved at sequence ``seq`` (remembered, or saved at exactly
        that state); None when neither has them. The caller has checked that the store is
        at ``seq``."""
        if self._seq == seq:
            found = self._sets.get(key)
            if found is not None:
                return found
        saved = self._saved_sets()
        if saved is None or saved[0] != seq:
            return None
        entry = saved[1].get(key)
        if entry is None:
            return None
        rows, crc = entry
        if zlib.crc32(rows.data) != crc:  # damaged: the file is not used again
            log.warning("store.row_sets_unreadable", path=str(self.path), error="a set does not match its checksum")
            self._saved = None
            return None
        self.put(key, seq, rows)  # remembered (checked once), also for the next save
        return rows

    def put(self, key: bytes, seq: int, rows: np.ndarray) -> None:
        """Remember the rows ``key`` resolved to at sequence ``seq`` (those of an earlier
        state are forgotten; beyond the limits, nothing more is remembered)."""
        if self._seq != seq:
            self._seq, self._sets, self._rows = seq, {}, 0
        if key in self._sets or len(self._sets) >= SETS_MAX or self._rows + len(rows) > ROWS_MAX:
            return
        self._sets[key] = rows
        self._rows += len(rows)

    def save(self, seq: int) -> None:
        """Write the sets valid at ``seq`` (the store's last sequence number: the writer
        closing) into the file, with those it saved at that same state; a stale file with
        nothing new to replace it is removed. Errors are logged, never raised (a cache)."""
        try:
            saved = self._saved_sets()
            listed = saved[1] if saved is not None and saved[0] == seq else {}
            fresh = {k: v for k, v in self._sets.items() if k not in listed} if self._seq == seq else {}
            if not fresh:
                if saved is None or saved[0] != seq:  # stale, damaged, of another schema, or absent
                    self.path.unlink(missing_ok=True)
                return
            kept = {k: rows for k, (rows, crc) in listed.items() if zlib.crc32(rows.data) == crc}
            sets = {**kept, **fresh}
            total = 0
            chosen: dict[bytes, np.ndarray] = {}
            for key, rows in sets.items():
                if len(chosen) >= SETS_MAX or total + len(rows) > ROWS_MAX:
                    break
                chosen[key] = rows
                total += len(rows)
            atomic_write_with(self.path, lambda tmp: _write(Path(tmp), seq, self.schema, chosen))
        except (OSError, ValueError) as exc:
            log.warning("store.row_sets_not_saved", path=str(self.path), error=str(exc))

    def drop_file(self) -> None:
        """The writer is about to change the store, which makes every saved set stale:
        remove the file now, not at close, so that a write that forgets a scope or deletes
        records leaves none of their keys or rows on disk once it commits. Once per process
        (the writer's close saves a fresh file); a failure is logged, never raised."""
        if not self._file_kept:
            return
        self._file_kept, self._saved, self._read = False, None, True
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("store.row_sets_not_removed", path=str(self.path), error=str(exc))

    def load(self, seq: int) -> None:
        """Read the file's table of sets and map its rows (once; at the store's open, as an
        index's payload is: a filter's first query reads nothing more), the store being at
        sequence ``seq``. A file saved at another state is dropped at once: it could only
        serve while the store is at its very state, and a store that is not at it when
        opened is past it, or restored from a backup of another history that may reach that
        number with other records. Never raises."""
        saved = self._saved_sets()
        if saved is not None and saved[0] != seq:
            self._saved = None

    def _saved_sets(self) -> tuple[int, dict[bytes, tuple[np.ndarray, int]]] | None:
        """The file's sequence number and sets (read once; None when absent or unreadable)."""
        if not self._read:
            self._read = True
            self._saved = _read(self.path, self.schema)
        return self._saved


_ENTRY = np.dtype([("key", "u1", (16,)), ("start", "<u8"), ("count", "<u8"), ("crc", "<u8")])
"""One set in the file's table: its key, its first row's index among the rows, its row
count, the CRC-32 of its rows' bytes (checked when the set is first used)."""


def _write(path: Path, seq: int, schema: int, sets: dict[bytes, np.ndarray]) -> None:
    """The file: magic, sequence number, schema version, set count, the table of sets, the rows."""
    table = np.zeros(len(sets), dtype=_ENTRY)
    blobs = [np.ascontiguousarray(rows, dtype="<i8").tobytes() for rows in sets.values()]
    start = 0
    for i, (key, blob) in enumerate(zip(sets, blobs)):
        table[i] = (np.frombuffer(key, dtype=np.uint8), start, len(blob) // 8, zlib.crc32(blob))
        start += len(blob) // 8
    listed = struct.pack("<QQQ", seq, schema, len(sets)) + table.tobytes()
    with open(path, "wb") as fh:
        fh.write(_MAGIC + _HEAD.pack(seq, schema, len(sets), zlib.crc32(listed)) + table.tobytes())
        for blob in blobs:
            fh.write(blob)


def _read(path: Path, schema: int) -> tuple[int, dict[bytes, tuple[np.ndarray, int]]] | None:
    """The saved sets (each as a read-only view of the mapped file and the CRC-32 its bytes
    must have); None (logged when damaged) when the file is absent, of another schema
    version, or not what :func:`_write` wrote."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("store.row_sets_unreadable", path=str(path), error=str(exc))
        return None
    try:
        size = os.fstat(fd).st_size
        if size < len(_MAGIC) + _HEAD.size:
            raise ValueError("too short")
        data = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        if data[: len(_MAGIC)] != _MAGIC:
            raise ValueError("not a row sets file")
        seq, stamp, count, crc = _HEAD.unpack_from(data, len(_MAGIC))
        begin = len(_MAGIC) + _HEAD.size
        end = begin + count * _ENTRY.itemsize
        if end > size or (size - end) % 8:
            raise ValueError("truncated")
        if zlib.crc32(struct.pack("<QQQ", seq, stamp, count) + data[begin:end]) != crc:
            raise ValueError("the table of sets does not match its checksum")
        if stamp != schema:
            return None
        rows = np.frombuffer(data, dtype="<i8", offset=end)
        sets: dict[bytes, tuple[np.ndarray, int]] = {}
        for key, first, n, check in np.frombuffer(data, dtype=_ENTRY, count=count, offset=begin).tolist():  # Python ints: no ufunc
            if first + n > len(rows):
                raise ValueError("a set past the end of the file")
            sets[bytes(key)] = (rows[first : first + n], check)  # its rows checked when first used (RowSets.get)
        return int(seq), sets
    except (OSError, ValueError, struct.error) as exc:
        log.warning("store.row_sets_unreadable", path=str(path), error=str(exc))
        return None
    finally:
        os.close(fd)
