"""The SQLite store: one file per collection, WAL, atomic batches, one writer process.

Tables (schema version 2, see :mod:`._sqlite_schema`): ``records`` (insertion order is the
rowid; ``member_of`` holds the record's index membership), one ``vectors_<slot>`` table per
space (float32 blobs keyed by the record's rowid), ``links``, ``oplog`` (one row per batch
and index, sequence-numbered), ``state`` (JSON per namespace/key) and ``meta`` (schema
version, last sequence). Older files are migrated when a writer opens them.

This module holds :class:`SQLiteStore` (opening, reads, the op log, state) with what every
read goes through; the write path is :class:`~._sqlite_writes.SQLiteWrites`, the writer's
lock :class:`~._sqlite_writes.WriterLock`.

**The row cache** (:class:`RowCache`): the rows behind ``SQLiteStore.get(...,
with_vectors=False)``, cached between writes. Every retrieval attaches the records of its hits: on a small memory (hundreds of items,
an agent's conversation) that ``SELECT`` is the largest fixed cost of a query. The store
keeps the rows it read (text, metadata, scope, times, links -- never vectors). The writer
(the only process that writes) forgets in each ``apply`` the rows that batch can change
(:meth:`RowCache.forget`: the records it writes, deletes or gives links to a deleted record;
everything for a batch dropping indexes or touching more than :data:`FORGET_UP_TO` ids); a
reader forgets every row whenever the store's sequence number moved. Callers get new
:class:`~memcore.model.Record` objects built from the cached row each time, so nothing
they change can reach the cache: flat metadata (every value a string, number, boolean or
null: the common case) is kept parsed and copied with ``dict()``, nested metadata is kept as
its JSON text and parsed again for each caller.

**Safety at the store boundary.** :func:`guard_methods` wraps every public store method so
that SQLite failures (``DatabaseError``, "attempt to write a readonly database", undecodable
UTF-8, malformed JSON or numbers) surface as :class:`CorruptError` naming the file;
:func:`check_store_file` refuses a missing or empty database in a directory that holds index
folders: that is a damaged collection, not a new one.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Literal, Mapping, Sequence, TypeVar

import numpy as np
from pydantic import Field, field_validator

from .._util.atomic import storage_full
from ..errors import ConfigError, CorruptError, FilterError, LockedError, MemcoreError, NotFoundError, StorageFullError, ValidationError
from ..model._document import DocumentFilter, document_to_sql
from ..model._filters import Filter, filter_fields, to_sql
from .._util.log import get_logger
from ..model._record_batch import RecordBatch
from ..model._record import Link, Record, Scope
from ..model._checks import check_finite_vectors
from .._plugins._registry import ComponentConfig
from ._store import LogRead, LogTail, Op, Store, Version
from ._sqlite_fields import FieldIndexes
from ._sqlite_schema import SCHEMA_VERSION, chunks as _chunks, json_text, members as _members, open_schema, unpack_ops
from ._sqlite_vectors import SCAN_FROM, Space, SpaceSlots, read_vectors, vector_rows
from ._sqlite_vector_files import VECTOR_DIR, MappedSpace
from ._sqlite_tail import TailMark, data_version, read_logs, wanted_ids
from ._sqlite_row_sets import ROW_SETS_FILE, RowSets, row_set_key
from ._sqlite_writes import SQLiteWrites, WriterLock, rollback

__all__ = ["SQLiteStore", "SQLiteStoreConfig", "SCHEMA_VERSION", "FORGET_UP_TO", "RowCache", "guard_methods", "check_store_file"]

log = get_logger("memcore.store")

T = TypeVar("T")
_SCAN_FROM = SCAN_FROM
"""``vectors()`` of at least this many ids scans the space once instead of looking ids up."""
PAGE_SIZE = 8192
"""Page size of new store files (SQLite's default 4096 wastes a third of every page of vectors)."""


class SQLiteStoreConfig(ComponentConfig):
    """Settings of the ``sqlite`` store."""

    kind: str = "sqlite"
    filename: str = Field(
        "store.sqlite3", min_length=1, max_length=255, description="Database file name inside the collection directory (a plain name: no path separators)."
    )
    synchronous: Literal["OFF", "NORMAL", "FULL"] = Field(
        "NORMAL",
        description="SQLite synchronous pragma (NORMAL is durable with WAL except on power loss); the vector files are fdatasynced before each commit unless OFF.",
    )
    read_only: bool = Field(False, description="Open as a reader: no writer lock, writes raise.")
    history: bool = Field(
        True,
        description="Keep every version of each record for Memory.history (replaced texts stay until the record is deleted or its scope forgotten); false: keep none, an update overwrites the replaced text.",
    )

    @field_validator("filename")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if "/" in value or "\\" in value or "\x00" in value or value in (".", "..") or value != value.strip():
            raise ValueError(f"filename must be a plain file name inside the collection directory, got {value!r}")
        return value

    filter_indexes: int = Field(
        16,
        ge=0,
        le=64,
        description="Most metadata fields given an SQLite index the first time a where filter reads them (0: never).",
    )


# -- the row cache ------------------------------------------------------------------------

Row = tuple[Any, ...]
"""``(id, text, metadata, scope, created_at, updated_at, links)``; metadata as
:func:`parsed_metadata` left it, scope a (frozen, shareable) :class:`~memcore.model.Scope` or None."""

_SCALARS = (str, int, float, bool, type(None))
FORGET_UP_TO = 1_000
"""A write involving more ids than this forgets every cached row (cheaper than sorting them out)."""


def parsed_metadata(text: str) -> dict[str, Any] | str:
    """Stored metadata JSON as a dict when it is flat (a shallow copy is then a full copy),
    else the JSON text itself (each caller parses its own copy)."""
    meta = json.loads(text)
    if type(meta) is dict and all(type(v) in _SCALARS for v in meta.values()):
        return meta
    return text


def cached_row(row: list[Any]) -> Row:
    """The cached form of a ``records`` row ``(id, text, metadata, user_id, agent_id,
    run_id, created_at, updated_at, links)``: metadata parsed once, the scope built once."""
    rid, text, metadata, user_id, agent_id, run_id, created_at, updated_at, links = row
    scope = None if user_id is None and agent_id is None and run_id is None else Scope(user_id, agent_id, run_id)
    return (rid, text, parsed_metadata(metadata), scope, created_at, updated_at, links)


def row_record(row: Row) -> Record:
    """A new :class:`Record` (without vectors) from a cached row; nothing it holds is shared
    with the cache but immutable values."""
    meta = row[2]
    return Record(row[0], row[1], dict(meta) if type(meta) is dict else json.loads(meta), {}, row[6], row[3], row[4], row[5])


class RowCache:
    """Record rows by id, valid for one store sequence number; at most ``limit`` rows.

    ``rows`` is replaced, never emptied in place: a dict handed out earlier stays a snapshot
    of one sequence number (rows are only added to it while no write happened since it was
    made), what a :class:`~memcore.model._record_batch.RecordBatch` relies on. After a write that
    changed none of its rows (:meth:`forget`), the dict stays current but is *shared*: the
    next :meth:`put` copies it first, so a snapshot never gains a row read after a write."""

    def __init__(self, limit: int = 20_000):
        self.limit = limit
        self.rows: dict[str, Row] = {}
        self.seq: int | None = None
        self.version: int | None = None
        """A reader's ``data_version`` taken before the rows' sequence number was checked:
        while it reads the same, no write happened since and the rows are current."""
        self._shared = False

    def valid_for(self, seq: int) -> None:
        """Forget every row when the store moved past the sequence they were read at."""
        if seq != self.seq:
            self.clear()
            self.seq = seq

    def put(self, rows: dict[str, Row]) -> bool:
        """Remember rows (everything is forgotten first when the limit would be passed).
        True when ``self.rows`` holds every row it held before and the new ones."""
        kept = len(self.rows) + len(rows) <= self.limit and len(rows) <= self.limit
        if not kept:
            self.rows = {}
        elif self._shared:
            self.rows = dict(self.rows)
        self._shared = False
        if len(rows) <= self.limit:
            self.rows.update(rows)
        return kept

    def forget(self, ids: Collection[str]) -> None:
        """Before a write that changes the rows of ``ids`` and no others: the other rows
        stay (in a new dict when some of ``ids`` were held, else in the same dict, shared);
        more than :data:`FORGET_UP_TO` ids forget everything."""
        rows = self.rows
        if len(ids) > FORGET_UP_TO:
            self.clear()
            return
        stale = [rid for rid in ids if rid in rows]
        if not stale:
            self._shared = True
            return
        kept = rows.copy()
        for rid in stale:
            del kept[rid]
        self.rows = kept
        self._shared = False

    def clear(self) -> None:
        """Forget every row."""
        self.rows = {}
        self.seq = None
        self.version = None
        self._shared = False


# -- safety at the store boundary -----------------------------------------------------------


SQLITE_FULL = 13
SQLITE_IOERR = 10
NEAR_FULL = 1 << 20
"""Free bytes (or bytes left under the file size limit) below which an SQLite I/O error is
taken for a full disk: SQLite reports ENOSPC as SQLITE_FULL, but EFBIG (``ulimit -f``) and
EDQUOT (quota) only as a generic write error."""


def _no_room(file: Path) -> bool:
    """Whether the store's files have no room left: the file system's free space (for this
    user) or the process's file size limit is (nearly) used up."""
    try:
        stat = os.statvfs(file.parent)
        if stat.f_bavail * stat.f_frsize < NEAR_FULL:
            return True
        import resource

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit == resource.RLIM_INFINITY:
            return False
        sizes = [p.stat().st_size for p in file.parent.glob(file.name + "*") if p.is_file()]
        return any(size > limit - NEAR_FULL for size in sizes)
    except (OSError, ImportError, ValueError):
        return False


def _storage_full(file: Path, exc: BaseException) -> StorageFullError | None:
    """The :class:`StorageFullError` an SQLite or OS error stands for, if it is one."""
    if isinstance(exc, OSError):
        return storage_full(exc, file)
    if not isinstance(exc, sqlite3.OperationalError):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    full = code == SQLITE_FULL or "database or disk is full" in str(exc).lower()
    if not full and (code is not None and code & 0xFF == SQLITE_IOERR or "disk i/o error" in str(exc).lower()):
        full = _no_room(file)
    if not full:
        return None
    return StorageFullError(
        f"{file}: no room to write ({' '.join(str(exc).split())}): the disk, the quota or the file size limit is full; "
        "the batch was not stored, nothing acknowledged was lost: free space (or raise the limit) and retry",
        path=str(file),
    )


def _typed(file: Path, exc: BaseException) -> MemcoreError:
    full = _storage_full(file, exc)
    if full is not None:
        return full
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, sqlite3.OperationalError):
        low = text.lower()
        if "database is locked" in low or "database is busy" in low:
            return LockedError(f"{file}: {text}; another connection holds it, retry later")
        if "too large" in low or "too many" in low or "stack overflow" in low:
            return FilterError(f"the filter is too large for SQLite ({text}); split it")
    return CorruptError(f"{file}: {type(exc).__name__}: {text} (check it with `memcore info --check`)")


def guard_methods(*parts: type, skip: frozenset[str] = frozenset({"close", "size_bytes"})) -> Callable[[type[T]], type[T]]:
    """A class decorator: wrap each public method of the class, and of the ``parts`` it is
    assembled from (mixins), so raw SQLite and decoding failures become typed errors."""

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except MemcoreError:
                raise
            except (sqlite3.DatabaseError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise _typed(self.file, exc) from exc
            except OSError as exc:  # a full disk under the store's own files (the writer lock's note...)
                full = storage_full(exc, self.file)
                if full is None:
                    raise
                raise full from exc
            except (ValueError, KeyError, IndexError) as exc:  # malformed numbers / rows in the file
                raise CorruptError(f"{self.file}: unreadable stored value ({type(exc).__name__}: {exc})") from exc

        return guarded

    def decorate(cls: type[T]) -> type[T]:
        own = vars(cls)
        methods = {name: value for part in parts for name, value in vars(part).items() if name not in own} | dict(own)
        for name, value in methods.items():
            if callable(value) and not name.startswith("_") and name not in skip:
                setattr(cls, name, wrap(value))
        return cls

    return decorate


def check_store_file(directory: Path, file: Path) -> None:
    """A missing or empty database beside index folders is damage, never a fresh start.

    memcore does not delete files it cannot account for: the caller must restore the
    database (or move the directory away) before a new collection is created there.
    """
    if file.is_file() and file.stat().st_size > 0:
        return
    indexes = directory / "indexes"
    leftovers = sorted(p.name for p in indexes.iterdir()) if indexes.is_dir() else []
    wal = [p.name for p in (file.with_name(file.name + "-wal"),) if p.exists() and p.stat().st_size > 0]
    if leftovers or wal:
        state = "is empty" if file.is_file() else "is missing"
        raise CorruptError(
            f"{file} {state} but {directory} holds {'index folders ' + str(leftovers[:5]) if leftovers else ''}"
            f"{' and ' if leftovers and wal else ''}{'a write-ahead log ' + str(wal) if wal else ''}: the store was "
            "deleted or truncated. Restore it from a backup, or move the directory away to start a new collection; "
            "memcore deletes nothing it cannot account for"
        )


@guard_methods(SQLiteWrites)
class SQLiteStore(SQLiteWrites, Store):
    """Records in one SQLite file with WAL; see the module docstring for the tables."""

    def __init__(self, path: str | os.PathLike[str], config: SQLiteStoreConfig | None = None):
        self.config = config or SQLiteStoreConfig()
        self.read_only = self.config.read_only
        self.keeps_history = self.config.history
        self.dir = Path(path)
        self.file = self.dir / self.config.filename
        self._mutex = threading.RLock()
        self._rows = RowCache()
        self._seq: int | None = None  # the writer's last sequence number, known without a read (only it writes)
        self._probe: tuple[int, dict[str, tuple[int, str] | None]] | None = None
        self._row_memo: tuple[int, dict[str, tuple[list[str], np.ndarray, np.ndarray]]] | None = None
        """What the writer's last batch wrote: ``(seq, space -> (ids, rows, vectors))``."""
        """What the writer's last ``get`` found: ``(seq, id -> (rowid, member_of), None when absent)``."""
        self._read_rows: dict[str, dict[str, int]] = {}
        """A reader's last ``get`` with vectors: ``space -> id -> file row`` (what an index
        adding those records asks next, :meth:`_rows_holding`)."""
        self._row_sets = RowSets(self.dir / ROW_SETS_FILE, SCHEMA_VERSION)
        """The row sets resolved at the present state, and those saved at the last close."""
        self._tail: TailMark | None = None
        """What a reader's last :meth:`read_tail` found (its "nothing new" answer)."""
        if self.dir.exists() and not self.dir.is_dir():
            raise ConfigError(f"{self.dir} is a file; a collection is a directory", location="path")
        if self.read_only:
            if not self.file.is_file():
                raise NotFoundError(f"no memcore store at {self.file}")
        else:
            self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = None if self.read_only else WriterLock(self.dir)
        try:
            check_store_file(self.dir, self.file)
        except CorruptError:
            self.close()
            raise
        try:
            fresh = not self.read_only and (not self.file.exists() or self.file.stat().st_size == 0)
            self.db = sqlite3.connect(self.file, check_same_thread=False, isolation_level=None, timeout=5.0)
            if fresh:  # 8 KiB pages hold five 384-d float32 vectors where 4 KiB pages held two: 1.08x the raw bytes, not 1.35x
                self.db.execute(f"PRAGMA page_size={PAGE_SIZE}")
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(f"PRAGMA synchronous={self.config.synchronous}")
            self.db.execute("PRAGMA foreign_keys=OFF")
            if not self.read_only:  # deleted rows are overwritten with zeros, not left in free pages (see close)
                self.db.execute("PRAGMA secure_delete=ON")
            self._open_schema()
            self._spaces = SpaceSlots(self.db, self.dir, writable=not self.read_only)
            self._sync_files = self.config.synchronous != "OFF"
            if not self.read_only:
                self._spaces.recover()
            self._fields = FieldIndexes(self.db, self.config.filter_indexes, writable=not self.read_only)
            self._row_sets.load(self.last_seq())
        except sqlite3.DatabaseError as exc:
            self.close()
            raise CorruptError(f"{self.file} is not a readable memcore store: {exc}") from None
        except OSError as exc:  # a full disk while migrating or recovering the space files
            self.close()
            full = storage_full(exc, self.file)
            if full is None:
                raise
            raise full from exc
        except BaseException:
            self.close()
            raise

    _rows: RowCache

    def _open_schema(self) -> None:
        """Create the tables of a new file, migrate an older one (writers only), refuse a newer one."""
        started = time.perf_counter()
        version = open_schema(self.db, self.read_only, self.file)
        if version is not None:
            try:  # give back the pages of the version 1 tables (the migrated file would keep them free, ~2x the size)
                self.db.execute("VACUUM")
            except sqlite3.Error as exc:  # a full disk: the file is migrated and sound, only larger
                log.warning("store.vacuum_failed", path=str(self.file), error=str(exc))
            log.info("store.migrated", path=str(self.file), version=version, to=SCHEMA_VERSION, seconds=round(time.perf_counter() - started, 3))

    # -- reads ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[None]:
        """A reader's several SELECTs in one read transaction (one WAL snapshot): a write
        committed by another connection in between is seen by all of them or by none. The
        writer needs none (only it writes)."""
        if not self.read_only or self.db.in_transaction:
            yield
            return
        self.db.execute("BEGIN")
        try:
            yield
        finally:
            self.db.execute("COMMIT")

    def get(self, ids: Sequence[str], *, with_vectors: bool = True) -> list[Record | None]:
        if not with_vectors:
            return self._get_cached(ids)
        with self._mutex, self._snapshot():  # a reader: records, links and vectors of one version
            self._read_rows = {}
            found: dict[str, Record] = {}
            seen: dict[str, tuple[int, str] | None] = {}
            for chunk in _chunks(list(ids)):
                marks = ",".join("?" * len(chunk))
                by_rowid: dict[int, Record] = {}
                for row in self.db.execute(
                    f"SELECT id, text, metadata, user_id, agent_id, run_id, created_at, updated_at, rowid, member_of FROM records WHERE id IN ({marks})",
                    list(chunk),
                ):
                    # the common shapes cheaply: no scope, empty metadata
                    scope = None if row[3] is None and row[4] is None and row[5] is None else Scope(row[3], row[4], row[5])
                    record = Record(row[0], row[1], {} if row[2] == "{}" else json.loads(row[2]), {}, (), scope, row[6], row[7])
                    found[row[0]] = by_rowid[row[8]] = record
                    seen[row[0]] = (row[8], row[9])
                if not by_rowid:  # none stored (an insert checking its ids): no links or vectors to read
                    continue
                links: dict[str, list[Link]] = {}
                for src, tgt, rel, w in self.db.execute(
                    f"SELECT source, target, relation, weight FROM links WHERE source IN ({marks}) ORDER BY source, target, relation", list(chunk)
                ):
                    links.setdefault(src, []).append(Link(tgt, rel, w))
                for rid, ls in links.items():
                    found[rid].links = tuple(ls)
                rowids = list(by_rowid)
                committed = self._spaces.refresh() if self.read_only else None  # a reader: the map and the rows in one statement
                for space in self._spaces.items():
                    pairs = self.db.execute(f"SELECT rid, row FROM {space.table} WHERE rid IN ({','.join('?' * len(rowids))})", rowids).fetchall()
                    if not pairs:
                        continue
                    matrix = self._spaces.matrix(space, committed=None if committed is None else committed.get(space.slot, 0))
                    if committed is not None:
                        self._read_rows.setdefault(space.name, {}).update((by_rowid[rowid].id, row) for rowid, row in pairs)
                    for rowid, row in pairs:
                        record = by_rowid[rowid]
                        if not 0 <= row < len(matrix):
                            raise CorruptError(
                                f"{self.file}: stored vector {space.name!r} of record {record.id!r} is at row {row}, past the {len(matrix)} rows of its file"
                            )
                        record.vectors[space.name] = self._stored_vector(record.id, space.name, matrix[row].tobytes()).copy()
            if self._seq is not None:  # the writer, its sequence number known: remembered for the next apply
                self._probe = (self._seq, dict.fromkeys(ids, None) | seen) if len(seen) < len(ids) else (self._seq, seen)
            return [found.get(i) for i in ids] if found else [None] * len(ids)  # none stored: a batch of new records

    def _get_cached(self, ids: Sequence[str]) -> list[Record | None]:
        """Records without vectors, from rows cached until the next write (see :class:`RowCache`)."""
        rows = self._cached_rows(ids)
        # this runs for every hit of every query: a cached row is all a Record needs
        return [None if (row := rows.get(i)) is None else row_record(row) for i in ids]

    def get_batch(self, ids: Sequence[str]) -> RecordBatch:
        """The cached rows of ``ids`` (a snapshot: the cache replaces its dict, never empties
        it), each record built on first access."""
        if not self.read_only:  # the writer's cache changes only in its own writes: a cached read needs no lock
            rows = self._rows.rows
            if all(map(rows.__contains__, ids)):
                return RecordBatch(rows, row_record, complete=True)
        return RecordBatch(self._cached_rows(ids), row_record)

    def _cached_rows(self, ids: Sequence[str]) -> Mapping[str, Row]:
        """Rows holding at least every stored record of ``ids``, read now; never changed later."""
        if not self.read_only:  # the writer's cache changes only in its own writes: a cached read needs no lock
            rows = self._rows.rows
            if all(map(rows.__contains__, ids)):
                return rows
        with self._mutex:
            cache = self._rows
            version = data_version(self.db) if self.read_only else None
            if version is not None and version == cache.version and all(map(cache.rows.__contains__, ids)):
                return cache.rows  # no commit since the rows were known current: no snapshot needed
            return self._read_rows_into(cache, ids, version)

    def _read_rows_into(self, cache: RowCache, ids: Sequence[str], version: int | None) -> Mapping[str, Row]:
        with self._snapshot():
            # a reader reads the sequence number and the rows in one snapshot, so rows are
            # never cached under an older sequence number than the version they hold
            if self.read_only:  # rows are valid for one sequence number
                cache.valid_for(self.last_seq())
                cache.version = version  # taken before this snapshot: never newer than the rows
            rows = cache.rows
            if all(map(rows.__contains__, ids)):  # the usual case on a small memory: every row cached
                return rows
            missing = list(dict.fromkeys(i for i in ids if i not in rows))
            fetched: dict[str, list[Any]] = {}
            for chunk in _chunks(missing):
                marks = ",".join("?" * len(chunk))
                for row in self.db.execute(
                    f"SELECT id, text, metadata, user_id, agent_id, run_id, created_at, updated_at FROM records WHERE id IN ({marks})", list(chunk)
                ):
                    fetched[row[0]] = [*row, ()]
                links: dict[str, list[Link]] = {}
                for src, tgt, rel, w in self.db.execute(
                    f"SELECT source, target, relation, weight FROM links WHERE source IN ({marks}) ORDER BY source, target, relation", list(chunk)
                ):
                    links.setdefault(src, []).append(Link(tgt, rel, w))
                for rid, ls in links.items():
                    fetched[rid][8] = tuple(ls)
            found = {rid: cached_row(row) for rid, row in fetched.items()}
            if not found:
                return rows
            if cache.put(found):  # added to the current rows (or to a copy of them)
                return cache.rows
            return {**{i: rows[i] for i in ids if i in rows}, **found}  # the cache started afresh (its limit)

    def _stored_vector(self, rid: str, space: str, data: bytes) -> np.ndarray:
        """A stored vector, checked: a damaged blob is a CorruptError naming the record and file."""
        try:
            if not isinstance(data, bytes) or not data or len(data) % 4:
                raise ValueError(f"a blob of {len(data) if isinstance(data, bytes) else type(data).__name__} bytes is no float32 vector")
            vector = np.frombuffer(data, dtype=np.float32)
        except (ValueError, TypeError) as exc:
            raise CorruptError(f"{self.file}: stored vector {space!r} of record {rid!r} is unreadable ({exc}); delete or update the record") from None
        try:
            check_finite_vectors(vector.reshape(1, -1), f"vector {space!r} of record {rid!r}")
        except ValueError as exc:  # ValidationError is a ValueError
            raise CorruptError(f"{self.file}: stored {exc}; delete or update the record") from None
        return vector

    def texts(self, ids: Sequence[str]) -> list[str | None]:
        """One ``SELECT id, text`` per chunk of ids: no metadata parsing, links or vectors."""
        with self._mutex:
            found: dict[str, str] = {}
            for chunk in _chunks(list(ids)):
                marks = ",".join("?" * len(chunk))
                found.update(self.db.execute(f"SELECT id, text FROM records WHERE id IN ({marks})", list(chunk)).fetchall())
            return [found.get(i) for i in ids] if found else [None] * len(ids)  # none stored: a batch of new records

    def _where(self, where: Filter | None, scope: Scope | None, index: str | None) -> tuple[str, list[Any]]:
        if where is not None:
            with self._mutex:
                self._fields.ensure(filter_fields(where))
        sql, params = to_sql(where, "r.metadata")
        if index is not None:  # membership is part of the record's row
            sql += " AND instr(r.member_of, ?) > 0"
            params.append(f"|{index}|")
        for key, value in (scope.as_dict() if scope else {}).items():
            sql += f" AND r.{key} = ?"
            params.append(value)
        return sql, params

    def ids(self, *, where: Filter | None = None, scope: Scope | None = None, index: str | None = None, limit: int | None = None) -> list[str]:
        return self.find_ids(where=where, scope=scope, index=index, limit=limit)

    def count(self, *, where: Filter | None = None, scope: Scope | None = None, index: str | None = None) -> int:
        return self.find_count(where=where, scope=scope, index=index)

    def find_ids(
        self,
        *,
        where: Filter | None = None,
        where_document: DocumentFilter | None = None,
        scope: Scope | None = None,
        index: str | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[str]:
        """One ``SELECT`` (the text filter compiled to ``instr``), ordered by rowid (insertion order)."""
        sql, params = self._filter_sql(where, where_document, scope, index)
        tail = f" LIMIT {int(limit)}" if limit is not None else (" LIMIT -1" if offset else "")
        if offset:
            tail += f" OFFSET {int(offset)}"
        with self._mutex:
            return [row[0] for row in self.db.execute(f"SELECT r.id FROM records r WHERE {sql} ORDER BY r.rowid{tail}", params)]

    def _filter_sql(self, where: Filter | None, where_document: DocumentFilter | None, scope: Scope | None, index: str | None) -> tuple[str, list[Any]]:
        """The ``WHERE`` clause (over ``records r``) and parameters of a metadata filter, a
        scope, an index's membership and a text filter (compiled to ``instr``)."""
        sql, params = self._where(where, scope, index)
        if where_document is not None:
            text_sql, text_params = document_to_sql(where_document, "r.text")
            sql += f" AND {text_sql}"
            params.extend(text_params)
        return sql, params

    def allowed_ids(self, *, where: Filter | None = None, where_document: DocumentFilter | None = None, scope: Scope | None = None) -> list[str]:
        """:meth:`find_ids` without its ``ORDER BY``: a field's index (value, id) answers an
        equality or range filter from the index alone, in index order (no sort of the matches)."""
        sql, params = self._filter_sql(where, where_document, scope, None)
        with self._mutex:
            return [row[0] for row in self.db.execute(f"SELECT r.id FROM records r WHERE {sql}", params)]

    @contextlib.contextmanager
    def _snapshot_at(self, seq: int) -> Iterator[bool]:
        """One read snapshot (a transaction, unless one is open already) for the ``with`` block;
        yields whether the store is at sequence ``seq`` in it. Called under ``_mutex``. The
        writer needs none while it knows its sequence number (only it writes, and not while
        the block runs: the mutex): no statement at all."""
        if not self.read_only and self._seq is not None:
            yield self._seq == seq
            return
        began = not self.db.in_transaction
        if began:
            self.db.execute("BEGIN")
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key='seq'").fetchone()
            yield (int(row[0]) if row else 0) == seq
        finally:
            if began:
                self.db.execute("COMMIT")

    def allowed_rows(
        self, space: str, seq: int, *, where: Filter | None = None, where_document: DocumentFilter | None = None, scope: Scope | None = None
    ) -> np.ndarray | None:
        """The rows in ``space``'s vector file of the records :meth:`allowed_ids` gives, at store
        sequence ``seq``: one ``SELECT`` joining the row map, its matches concatenated by
        SQLite into one string parsed by numpy (no Python object per match). None when the store
        is no longer at ``seq`` (read in the same snapshot) or has no such space. The rows of a
        filter resolved at this very state before, by this process or by the writer before its
        last close, are answered without the statement (see :mod:`._sqlite_row_sets`)."""
        key = row_set_key(space, where, where_document, scope)
        with self._mutex:
            found = self._spaces.get(space)
            if found is None:
                return None
            rows = self._row_sets.get(key, seq)  # resolved at this very state before (see _sqlite_row_sets)
            if rows is None:
                sql, params = self._filter_sql(where, where_document, scope, None)
            with self._snapshot_at(seq) as current:
                if not current:  # the store moved on: neither the remembered rows nor the SQL's
                    return None
                if rows is not None:
                    return rows
                text = self.db.execute(f"SELECT group_concat(v.row) FROM records r JOIN {found.table} v ON v.rid = r.rowid WHERE {sql}", params).fetchone()[0]
            rows = np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, dtype=np.int64)
            rows.setflags(write=False)  # remembered: read, never changed in place
            self._row_sets.put(key, seq, rows)
        return rows

    def saved_rows(
        self, space: str, seq: int, *, where: Filter | None = None, where_document: DocumentFilter | None = None, scope: Scope | None = None
    ) -> np.ndarray | None:
        """The rows :meth:`allowed_rows` gives when this filter was resolved at this very state
        before (by this process, or by the writer before its last close: see
        :mod:`._sqlite_row_sets`), without the statement; None otherwise."""
        with self._mutex:
            if self._spaces.get(space) is None:
                return None
            rows = self._row_sets.get(row_set_key(space, where, where_document, scope), seq)
            if rows is None:
                return None
            with self._snapshot_at(seq) as current:
                return rows if current else None

    def allowed_among(
        self,
        ids: Sequence[str],
        seq: int,
        *,
        where: Filter | None = None,
        where_document: DocumentFilter | None = None,
        scope: Scope | None = None,
    ) -> list[str] | None:
        """The ids among ``ids`` :meth:`allowed_ids` gives, at store sequence ``seq``: the
        filter's SQL with ``id IN (...)``, which SQLite answers with one search per id in the
        field's index (value, type, id) or the id's own; None when the store is no longer at
        ``seq`` (read in the same snapshot)."""
        sql, params = self._filter_sql(where, where_document, scope, None)
        found: list[str] = []
        with self._mutex:
            with self._snapshot_at(seq) as current:
                if not current:
                    return None
                for chunk in _chunks(list(ids)):
                    marks = ",".join("?" * len(chunk))
                    found.extend(r[0] for r in self.db.execute(f"SELECT r.id FROM records r WHERE r.id IN ({marks}) AND {sql}", [*chunk, *params]))
        return found

    def find_count(
        self, *, where: Filter | None = None, where_document: DocumentFilter | None = None, scope: Scope | None = None, index: str | None = None
    ) -> int:
        sql, params = self._filter_sql(where, where_document, scope, index)
        with self._mutex:
            return int(self.db.execute(f"SELECT COUNT(*) FROM records r WHERE {sql}", params).fetchone()[0])

    def history(self, record_id: str) -> list[Version]:
        """The ``history`` rows of one record in write order, the latest version of a live
        record read from its row, in one snapshot (none in a file made before the table
        existed and not opened for writing since)."""
        if not self.keeps_history:
            return super().history(record_id)
        with self._mutex, self._snapshot():
            try:
                rows = self.db.execute(
                    "SELECT seq, op, text, metadata, user_id, agent_id, run_id, at FROM history WHERE record_id=? ORDER BY n", (record_id,)
                ).fetchall()
            except sqlite3.OperationalError:
                if self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='history'").fetchone() is None:
                    return []
                raise
            if not rows:  # an insert kept in the record's row (records.hseq): its only version
                kept = self.db.execute(
                    "SELECT hseq, text, metadata, user_id, agent_id, run_id, created_at FROM records WHERE id=? AND hseq IS NOT NULL", (record_id,)
                ).fetchone()
                if kept is not None:
                    rows = [(kept[0], "insert", *kept[1:])]
            elif rows[-1][1] != "delete" and rows[-1][2] is None:  # the latest version of a live record is its row
                current = self.db.execute("SELECT text, metadata FROM records WHERE id=?", (record_id,)).fetchone()
                if current is not None:
                    rows[-1] = (rows[-1][0], rows[-1][1], current[0], current[1], *rows[-1][4:])
        out = []
        for seq, op, text, metadata, user, agent, run, at in rows:
            scope = None if user is None and agent is None and run is None else Scope(user_id=user, agent_id=agent, run_id=run)
            out.append(Version(int(seq), record_id, op, text, None if metadata is None else json.loads(metadata), scope, float(at)))
        return out

    def history_ids(self) -> list[str]:
        """Every record id with a version (a row of ``history``, or an insert kept in its
        record's row), ordered by the sequence number of its first version; within one
        batch, ids whose first version is a row written then (a delete, an update) by that
        row, then its inserts in insertion order (``rowid``, kept in ``history.rid`` once the
        insert is written as a row)."""
        if not self.keeps_history:
            return super().history_ids()
        with self._mutex:  # one statement: one snapshot
            try:
                return [
                    row[0]
                    for row in self.db.execute(
                        "SELECT id FROM (SELECT record_id AS id, min(seq) AS first, min(rid) IS NOT NULL AS kind, coalesce(min(rid), min(n)) AS pos "
                        "FROM history GROUP BY record_id UNION ALL SELECT id, hseq, 1, rowid FROM records WHERE hseq IS NOT NULL) ORDER BY first, kind, pos"
                    )
                ]
            except sqlite3.OperationalError:
                if self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='history'").fetchone() is None:
                    return []
                raise

    def import_history(self, versions: Sequence[Version]) -> None:
        """Replace the ``history`` rows of the records of ``versions`` in one transaction; the
        latest version of a live record keeps no text or metadata (they are its row)."""
        if not self.keeps_history:
            super().import_history(versions)
        if self.read_only:
            raise ValidationError("this store is open read-only")
        rows = [(v.seq, v.record_id, v.op, v.text, None if v.metadata is None else json_text(v.metadata), *_scope_fields(v.scope), v.at) for v in versions]
        ids = list(dict.fromkeys(v.record_id for v in versions))
        with self._mutex:
            cur = self.db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                for chunk in _chunks(ids):
                    cur.execute(f"DELETE FROM history WHERE record_id IN ({','.join('?' * len(chunk))})", list(chunk))
                    cur.execute(f"UPDATE records SET hseq = NULL WHERE id IN ({','.join('?' * len(chunk))}) AND hseq IS NOT NULL", list(chunk))
                cur.executemany(
                    "INSERT INTO history (seq, record_id, op, text, metadata, user_id, agent_id, run_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
                )
                for chunk in _chunks(ids):
                    marks = ",".join("?" * len(chunk))
                    cur.execute(
                        f"UPDATE history SET text = NULL, metadata = NULL WHERE op != 'delete' AND n IN (SELECT max(h.n) FROM history h "
                        f"WHERE h.record_id IN ({marks}) AND h.record_id IN (SELECT id FROM records) GROUP BY h.record_id)",
                        list(chunk),
                    )
                cur.execute("COMMIT")
            except BaseException:
                rollback(self.db)
                raise

    def memberships(self, ids: Sequence[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        with self._mutex:
            for chunk in _chunks(list(ids)):
                for rid, member_of in self.db.execute(f"SELECT id, member_of FROM records WHERE id IN ({','.join('?' * len(chunk))})", list(chunk)):
                    out[rid] = _members(member_of)
        return out

    def vectors(self, ids: Sequence[str], space: str) -> tuple[np.ndarray, np.ndarray]:
        """Stored vectors of ``ids``: their rows looked up (chunked for a few ids, one scan of
        the space's table for many), then gathered from the space's mapped file; see
        :func:`._sqlite_vectors.read_vectors`."""
        with self._mutex, self._snapshot():
            found = self._spaces.get(space)
            if found is None:
                return np.zeros((len(ids), 0), dtype=np.float32), np.zeros(len(ids), dtype=bool)
            return read_vectors(self.db, self._spaces, found, list(ids), lambda rid, data: self._stored_vector(rid, space, data), self.file, _SCAN_FROM)

    def vectors_into(self, ids: Sequence[str], space: str, out: np.ndarray) -> np.ndarray:
        """:meth:`vectors` with the rows gathered straight into ``out``."""
        with self._mutex, self._snapshot():
            found = self._spaces.get(space)
            if found is None:
                out[:] = 0.0
                return np.zeros(len(ids), dtype=bool)
            _, present = read_vectors(
                self.db, self._spaces, found, list(ids), lambda rid, data: self._stored_vector(rid, space, data), self.file, _SCAN_FROM, out=out
            )
            return present

    def mapped_vectors(self, space: str) -> MappedSpace | None:
        """The space's file as a read-only mapped matrix and the rows of records (see
        :class:`._sqlite_vector_files.MappedSpace`); None when the store has no such space yet."""
        with self._mutex:
            found = self._spaces.get(space)
        if found is None:
            return None
        return MappedSpace(
            space,
            found.dim,
            lambda ids: self._vector_rows(found, ids),
            lambda populate: self._mapped_matrix(found, populate),
            lambda ids, vectors: self._rows_holding(found, ids, vectors),
        )

    def _vector_rows(self, space: Space, ids: Sequence[str]) -> np.ndarray:
        with self._mutex, self._snapshot():
            return vector_rows(self.db, space, list(ids), _SCAN_FROM)

    def _rows_holding(self, space: Space, ids: Sequence[str], vectors: np.ndarray) -> np.ndarray | None:
        """The rows of ``ids`` when each holds the given vector, else None. The writer's last
        batch is compared in memory (the index receiving the records it just stored, in
        order); otherwise the rows are looked up and compared with the file."""
        memo = self._row_memo
        if memo is not None and memo[0] == self._seq and space.name in memo[1]:
            written, rows, matrix = memo[1][space.name]
            if written == ids:  # a list compare: the batch's ids, in order
                return rows if np.array_equal(matrix, vectors) else None
        known = self._read_rows.get(space.name) if self.read_only else None
        if known is not None and all(map(known.__contains__, ids)):  # a reader adding the records it just read
            found = np.fromiter((known[i] for i in ids), dtype=np.int64, count=len(ids))
        else:
            found = self._vector_rows(space, ids)
        if len(found) and found.min() < 0:
            return None
        stored = self._mapped_matrix(space, False)
        if len(found) and found.max() >= len(stored):
            return None
        return found if np.array_equal(np.take(stored, found, axis=0), vectors) else None

    def _mapped_matrix(self, space: Space, populate: bool) -> np.ndarray:
        with self._mutex:  # one statement (the committed rows): its own snapshot
            return self._spaces.matrix(space, populate=populate)

    # -- log and state -------------------------------------------------------------------

    def last_seq(self) -> int:
        if self._seq is not None:  # the writer: every query asks (allowed-set cache), and only it writes
            return self._seq
        with self._mutex:
            row = self.db.execute("SELECT value FROM meta WHERE key='seq'").fetchone()
            seq = int(row[0]) if row else 0
            if not self.read_only:
                self._seq = seq
        return seq

    def ops_since(self, seq: int, index: str) -> list[Op]:
        with self._mutex:
            rows = self.db.execute("SELECT seq, ops FROM oplog WHERE index_name=? AND seq>? ORDER BY n", (index, seq)).fetchall()
        return [Op(row_seq, index, rid, op) for row_seq, ops in rows for rid, op in unpack_ops(ops)]  # type: ignore[arg-type]

    def prune_log(self, upto: int) -> None:
        if self.read_only:
            return
        with self._mutex:
            start = max(upto, self.log_start())
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.execute("DELETE FROM oplog WHERE seq <= ?", (upto,))
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('log_start', ?)", (str(start),))
                self.db.execute("COMMIT")
            except BaseException:
                rollback(self.db)
                raise

    def read_log(self, seq: int, index: str) -> LogRead:
        """One read transaction (one WAL snapshot): a concurrent prune cannot open a gap."""
        with self._mutex:
            self.db.execute("BEGIN")
            try:
                start = self.log_start()
                last = self.last_seq()
                ops = self.ops_since(seq, index)
            finally:
                self.db.execute("COMMIT")
        return LogRead(start, last, ops)

    def read_tail(self, since: Mapping[str, int]) -> LogTail:
        """Every asked index's log and the last change of an index definition from one
        statement (see :mod:`._sqlite_tail`), and the records its adds and updates name
        (:meth:`get`). A reader answers "nothing new"
        from ``PRAGMA data_version`` alone when no other connection committed since its
        last call."""
        with self._mutex:
            version = data_version(self.db) if self.read_only else None
            mark = self._tail
            if version is not None and mark is not None and mark.answers(version, since):
                return LogTail(mark.logs(since), definitions=mark.definitions)
            logs, start, last, definitions = read_logs(self.db, since)
            if version is not None:
                self._tail = TailMark(version, start, last, definitions)
            ids = wanted_ids(logs, since) if logs else []
            records = {r.id: r for r in self.get(ids) if r is not None} if ids else {}
        return LogTail(logs, records, definitions)

    def log_start(self) -> int:
        with self._mutex:
            row = self.db.execute("SELECT value FROM meta WHERE key='log_start'").fetchone()
        return int(row[0]) if row else 0

    def get_state(self, namespace: str, key: str, default: Any = None) -> Any:
        with self._mutex:
            row = self.db.execute("SELECT value FROM state WHERE namespace=? AND key=?", (namespace, key)).fetchone()
        return json.loads(row[0]) if row else default

    def state_items(self, namespace: str) -> dict[str, Any]:
        with self._mutex:
            rows = self.db.execute("SELECT key, value FROM state WHERE namespace=? ORDER BY key", (namespace,)).fetchall()
        return {k: json.loads(v) for k, v in rows}

    def state_namespaces(self) -> list[str]:
        with self._mutex:
            return [row[0] for row in self.db.execute("SELECT DISTINCT namespace FROM state ORDER BY namespace").fetchall()]

    # -- lifecycle -----------------------------------------------------------------------

    def integrity_check(self) -> list[str]:
        """SQLite's ``PRAGMA integrity_check`` and each space file's length against the rows
        the store references: the problems found (empty when the store is sound)."""
        with self._mutex, self._snapshot():
            rows = [row[0] for row in self.db.execute("PRAGMA integrity_check").fetchall()]
            problems = [] if rows == ["ok"] else rows
            for space in self._spaces.items(refresh=True):
                committed = self._spaces.committed(space)
                try:
                    have = self._spaces.file(space).size_rows()
                except CorruptError as exc:
                    problems.append(str(exc))
                    continue
                if have < committed:
                    problems.append(f"vectors/{space.slot}.f32 (space {space.name!r}) holds {have} rows, the store references {committed}")
                top = self.db.execute(f"SELECT max(row) FROM {space.table}").fetchone()[0]
                if top is not None and top >= committed:
                    problems.append(f"space {space.name!r}: a record references row {top}, past the committed {committed}")
        return problems

    def size_bytes(self) -> int:
        files = [*self.dir.glob(self.config.filename + "*"), *(self.dir / VECTOR_DIR).glob("*.f32"), self.dir / ROW_SETS_FILE]
        return sum(p.stat().st_size for p in files if p.is_file())

    def close(self) -> None:
        """Checkpoint the WAL into the file and truncate it (the writer), then let go of the
        connection and the writer lock.

        With ``secure_delete`` the pages a delete frees are zeroed in the WAL; the
        checkpoint copies them over the old content in the database file and empties the
        WAL, so no frame holding deleted content is left behind either."""
        with self._mutex:
            db = getattr(self, "db", None)
            if db is not None:
                if not self.read_only:
                    self._save_row_sets()
                    self._checkpoint(db)
                db.close()
                spaces = getattr(self, "_spaces", None)
                if spaces is not None:
                    spaces.close()
                self.db = None  # type: ignore[assignment]
            lock = getattr(self, "_lock", None)
            if lock is not None:
                lock.release()
                self._lock = None

    def _save_row_sets(self) -> None:
        """Save the row sets resolved at the store's last state for the next open (see
        :mod:`._sqlite_row_sets`; a failure is logged, the store closes all the same)."""
        row_sets = getattr(self, "_row_sets", None)
        if row_sets is None:
            return
        try:
            seq = self.last_seq()
        except sqlite3.Error as exc:
            log.warning("store.row_sets_not_saved", path=str(self.file), error=str(exc))
            return
        row_sets.save(seq)

    def _checkpoint(self, db: sqlite3.Connection) -> None:
        """``PRAGMA wal_checkpoint(TRUNCATE)``; a failure (a reader holding an old snapshot,
        a full disk) is logged: the WAL is then checkpointed by the last connection to close."""
        try:
            busy, _frames, _done = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as exc:
            log.warning("store.checkpoint_failed", path=str(self.file), error=str(exc))
            return
        if busy:
            log.warning("store.checkpoint_busy", path=str(self.file), action="a reader holds the WAL; the last connection to close checkpoints it")


def sqlite_store_factory(config: SQLiteStoreConfig, path: str | os.PathLike[str] | None) -> SQLiteStore:
    """Build the SQLite store of the collection at ``path`` (a directory)."""
    if path is None:
        raise ConfigError('the sqlite store needs a collection directory (path=...); use kind = "memory" for no files', location="store")
    return SQLiteStore(path, config)


def _scope_fields(scope: Scope | None) -> tuple[str | None, str | None, str | None]:
    """The ``user_id, agent_id, run_id`` columns of a scope."""
    return (None, None, None) if scope is None else (scope.user_id, scope.agent_id, scope.run_id)
