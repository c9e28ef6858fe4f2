"""The SQLite store: one file per collection, WAL, atomic batches, one writer process.

Tables (schema version 2, see :mod:`.sqlite_schema`): ``records`` (insertion order is the
rowid; ``member_of`` holds the record's index membership), one ``vectors_<slot>`` table per
space (float32 blobs keyed by the record's rowid), ``links``, ``oplog`` (one row per batch
and index, sequence-numbered), ``state`` (JSON per namespace/key) and ``meta`` (schema
version, last sequence). Older files are migrated when a writer opens them.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from operator import attrgetter
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Mapping, Sequence

import numpy as np
from pydantic import Field, field_validator

from ..errors import ConfigError, CorruptError, NotFoundError, ValidationError
from ..model._filters import Filter, filter_fields, to_sql
from .._util.log import get_logger
from ..model._record_batch import RecordBatch
from ..model._record import Link, Record, Scope
from ..model._checks import check_finite_vectors
from .._plugins._registry import ComponentConfig
from ._store import Applied, LogRead, Op, Store, WriteBatch, involved_ids, make_ops, plan_ops
from ._sqlite_safety import WriterLock, check_store_file, guard_methods
from ._sqlite_fields import FieldIndexes
from ._sqlite_rows import Row, RowCache, cached_row, row_record
from ._sqlite_schema import (
    SCHEMA_VERSION,
    json_text as _json_text,
    member_text as _member_text,
    member_text_of,
    members as _members,
    open_schema,
    pack_adds,
    pack_ops,
    unpack_ops,
)
from ._sqlite_vectors import SCAN_FROM, SpaceSlots, read_vectors

__all__ = ["SQLiteStore", "SQLiteStoreConfig", "SCHEMA_VERSION"]

log = get_logger("memcore.store")

_CHUNK = 500  # SQLite host-parameter batches
_F32 = np.dtype(np.float32)
_dtype = attrgetter("dtype")
_ndim = attrgetter("ndim")
_c_contiguous = attrgetter("flags.c_contiguous")
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
    synchronous: Literal["OFF", "NORMAL", "FULL"] = Field("NORMAL", description="SQLite synchronous pragma (NORMAL is durable with WAL except on power loss).")
    read_only: bool = Field(False, description="Open as a reader: no writer lock, writes raise.")

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


def _chunks(seq: Sequence[Any]) -> list[Sequence[Any]]:
    return [seq[i : i + _CHUNK] for i in range(0, len(seq), _CHUNK)]


def _record_rows(fresh: list[Record], created: dict[str, float], member: dict[str, str]) -> Iterator[tuple[Any, ...]]:
    """The ``records`` row of each new record, made as ``executemany`` binds it (one tuple
    per record, nothing else, and none of them kept alive: this runs for every record inserted)."""
    for r in fresh:
        scope, rid = r.scope, r.id
        yield (
            rid,
            r.text,
            _json_text(r.metadata),
            None if scope is None else scope.user_id,
            None if scope is None else scope.agent_id,
            None if scope is None else scope.run_id,
            created[rid] if created else r.created_at,
            r.updated_at,
            member.get(rid, "|"),
        )


def _blobs(vectors: list[Any]) -> Iterable[Any]:
    """What ``executemany`` binds as each vector's blob: the arrays themselves when every one
    is a C-contiguous, non-empty 1-d float32 array (sqlite3 reads an object's buffer and
    copies it: the float32 bytes, with no bytes object made per vector), else ``tobytes``."""
    if (
        {*map(type, vectors)} == {np.ndarray}
        and {*map(id, map(_dtype, vectors))} == {id(_F32)}
        and {*map(_ndim, vectors)} == {1}
        and all(map(_c_contiguous, vectors))
        and all(map(len, vectors))
    ):
        return vectors
    return [v.tobytes() if type(v) is np.ndarray and v.dtype is _F32 else np.ascontiguousarray(v, dtype=np.float32).tobytes() for v in vectors]


def _scope_row(scope: Scope | None) -> tuple[str | None, str | None, str | None]:
    return (None, None, None) if scope is None else (scope.user_id, scope.agent_id, scope.run_id)


@guard_methods
class SQLiteStore(Store):
    """Records in one SQLite file with WAL; see the module docstring for the tables."""

    def __init__(self, path: str | os.PathLike[str], config: SQLiteStoreConfig | None = None):
        self.config = config or SQLiteStoreConfig()
        self.read_only = self.config.read_only
        self.dir = Path(path)
        self.file = self.dir / self.config.filename
        self._mutex = threading.RLock()
        self._rows = RowCache()
        self._seq: int | None = None  # the writer's last sequence number, known without a read (only it writes)
        self._probe: tuple[int, dict[str, tuple[int, str] | None]] | None = None
        """What the writer's last ``get`` found: ``(seq, id -> (rowid, member_of), None when absent)``."""
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
            self._spaces = SpaceSlots(self.db)
            self._fields = FieldIndexes(self.db, self.config.filter_indexes, writable=not self.read_only)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise CorruptError(f"{self.file} is not a readable memcore store: {exc}") from None
        except CorruptError:
            self.close()
            raise

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

    # -- writes --------------------------------------------------------------------------

    def apply(self, batch: WriteBatch) -> Applied:
        if self.read_only:
            raise ValidationError("this store is open read-only")
        for index in (*batch.add_membership, *batch.remove_membership, *batch.drop_indexes):
            if not isinstance(index, str) or not index or "|" in index:
                raise ValidationError(f"index names are non-empty strings without '|', got {index!r}")
        with self._mutex:
            cur = self.db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            probe, self._probe = self._probe, None
            try:
                applied = self._apply(cur, batch, probe)
                cur.execute("COMMIT")
                self._seq = applied.seq
                return applied
            except BaseException:
                self._seq = None  # read again
                cur.execute("ROLLBACK")
                self._spaces.forget()  # a space created by the failed batch is gone again
                raise

    def _stored_rows(
        self, cur: sqlite3.Cursor, ids: Sequence[str], probe: tuple[int, dict[str, tuple[int, str] | None]] | None = None
    ) -> dict[str, tuple[int, str]]:
        """``id -> (rowid, member_of)`` of the stored ones among ``ids``.

        ``probe``: what the writer's last :meth:`get` read. While the sequence number has
        not moved since (only this process writes, every write moves it) it is still true,
        and only the ids it did not cover are looked up: ``Collection.insert`` reads its
        ids to compare contents just before writing them, the store does not read them twice."""
        out: dict[str, tuple[int, str]] = {}
        if probe is not None and probe[0] == self._seq:
            known = probe[1]
            unknown = []
            for rid in ids:
                if rid in known:
                    row = known[rid]
                    if row is not None:
                        out[rid] = row
                else:
                    unknown.append(rid)
            ids = unknown
        for chunk in _chunks(ids):
            for rid, rowid, member_of in cur.execute(f"SELECT id, rowid, member_of FROM records WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                out[rid] = (rowid, member_of)
        return out

    def _apply(self, cur: sqlite3.Cursor, batch: WriteBatch, probe: tuple[int, dict[str, tuple[int, str] | None]] | None = None) -> Applied:
        seq = self.last_seq() + 1
        deletes = list(dict.fromkeys(batch.deletes))
        link_sources: set[str] = set()
        for chunk in _chunks(deletes):
            link_sources.update(r[0] for r in cur.execute(f"SELECT source FROM links WHERE target IN ({','.join('?' * len(chunk))})", chunk))
        involved = involved_ids(batch) | link_sources
        # the cached rows this batch can change (before anything is written; the mutex keeps
        # readers of this store from caching a row again until the batch is committed):
        # the records it writes or deletes, those that lose a link to a deleted record, and,
        # to keep it simple, those whose membership changes (not part of a cached row)
        if batch.drop_indexes:
            self._rows.clear()
        else:
            self._rows.forget(involved)
        stored = self._stored_rows(cur, list(involved), probe)
        if not stored and not deletes and not batch.remove_membership and not batch.drop_indexes:
            inserted = self._insert_new(cur, batch, seq)
            if inserted is not None:
                return inserted
        before = {rid: _members(m) for rid, (_, m) in stored.items()}
        ops = plan_ops(batch, before, link_sources)
        upserts = {r.id: r for r in batch.upserts}  # a repeated id ends as its last occurrence
        self._check_references(cur, batch, stored, upserts)

        # membership after the batch, for the records it involves (deletes first, as in plan_ops)
        after = {rid: set(names) for rid, names in before.items()}
        for rid in deletes:
            after[rid] = set()
        for index, rids in batch.remove_membership.items():
            for rid in rids:
                after.get(rid, set()).discard(index)
        for index, rids in batch.add_membership.items():
            for rid in rids:
                after.setdefault(rid, set()).add(index)
        dropped = set(batch.drop_indexes)
        if dropped:
            for names in after.values():
                names -= dropped

        if deletes:
            gone = [stored.pop(rid)[0] for rid in deletes if rid in stored]
            self._delete_vectors(cur, gone)
            for chunk in _chunks(deletes):
                marks = ",".join("?" * len(chunk))
                cur.execute(f"DELETE FROM links WHERE source IN ({marks}) OR target IN ({marks})", [*chunk, *chunk])
            for chunk in _chunks(gone):
                cur.execute(f"DELETE FROM records WHERE rowid IN ({','.join('?' * len(chunk))})", chunk)
        if upserts:
            member = {rid: _member_text(after[rid]) for rid in upserts if after.get(rid)}
            self._write_records(cur, batch.upserts, upserts, stored, member)
        changed = [(_member_text(after[rid]), rowid) for rid, (rowid, m) in stored.items() if rid not in upserts and _members(m) != after[rid]]
        cur.executemany("UPDATE records SET member_of=? WHERE rowid=?", changed)
        for index in dropped:
            cur.execute("UPDATE records SET member_of = replace(member_of, ?, '|') WHERE instr(member_of, ?) > 0", (f"|{index}|", f"|{index}|"))
            cur.execute("DELETE FROM oplog WHERE index_name=?", (index,))
        by_index: dict[str, list[tuple[str, str]]] = {}
        for index, rid, op in ops:
            by_index.setdefault(index, []).append((rid, op))
        self._finish(cur, batch, seq, [(index, pack_ops(entries)) for index, entries in by_index.items()])
        return Applied(seq, make_ops(seq, ops))

    def _finish(self, cur: sqlite3.Cursor, batch: WriteBatch, seq: int, logged: list[tuple[str, str]]) -> None:
        """The end of every batch: its state changes, one oplog row per index (``(index, packed ops)``), the new sequence number."""
        for (namespace, key), value in batch.state.items():
            if value is None:
                cur.execute("DELETE FROM state WHERE namespace=? AND key=?", (namespace, key))
            else:
                cur.execute("INSERT OR REPLACE INTO state VALUES (?, ?, ?)", (namespace, key, json.dumps(value)))
        cur.executemany("INSERT INTO oplog (seq, index_name, ops) VALUES (?, ?, ?)", [(seq, index, ops) for index, ops in logged])
        cur.execute("UPDATE meta SET value=? WHERE key='seq'", (str(seq),))

    def _insert_new(self, cur: sqlite3.Cursor, batch: WriteBatch, seq: int) -> Applied | None:
        """:meth:`_apply` for the common batch: records none of which is stored, each added
        to indexes (membership only for records of the batch), nothing deleted or removed.
        What it logs is what :func:`~memcore.stores._store.plan_ops` plans for such a batch -- per
        index, an ``add`` for the first occurrence of each id -- without its general
        bookkeeping. None when some id given membership is not in the batch (the general
        path then raises the error that names it)."""
        upserts = {r.id: r for r in batch.upserts}  # a repeated id ends as its last occurrence
        adds = {index: list(dict.fromkeys(rids)) for index, rids in batch.add_membership.items() if rids}
        if any(not upserts.keys() >= set(rids) for rids in adds.values()):
            return None
        self._check_link_targets(cur, set(), upserts)
        if len(adds) == 1:
            ((index, rids),) = adds.items()
            member = dict.fromkeys(rids, member_text_of(index))
        else:
            names: dict[str, set[str]] = {}
            for index, rids in adds.items():
                for rid in rids:
                    names.setdefault(rid, set()).add(index)
            member = {rid: _member_text(indexes) for rid, indexes in names.items()}
        if upserts:
            self._write_records(cur, batch.upserts, upserts, {}, member)
        self._finish(cur, batch, seq, [(index, pack_adds(rids)) for index, rids in adds.items()])
        return Applied(seq, make_ops(seq, ((index, rid, "add") for index, rids in adds.items() for rid in rids)))

    def _check_references(self, cur: sqlite3.Cursor, batch: WriteBatch, stored: dict[str, tuple[int, str]], upserts: dict[str, Record]) -> None:
        """Ids given membership and link targets must exist after the batch (before anything is written)."""
        deleted = set(batch.deletes)

        def alive(rid: str) -> bool:
            return rid in upserts or (rid in stored and rid not in deleted)

        for rids in batch.add_membership.values():
            for rid in rids:
                if not alive(rid):
                    raise NotFoundError(f"record {rid!r} does not exist")
        self._check_link_targets(cur, deleted, upserts)

    def _check_link_targets(self, cur: sqlite3.Cursor, deleted: set[str], upserts: dict[str, Record]) -> None:
        """The records ``upserts`` link to exist after the batch (``deleted``: ids it deletes)."""
        targets = sorted({l.target for r in upserts.values() for l in r.links} - upserts.keys())
        for rid in targets:
            if rid in deleted:
                raise NotFoundError(f"link target {rid!r} does not exist")
        for chunk in _chunks(targets):
            found = {row[0] for row in cur.execute(f"SELECT id FROM records WHERE id IN ({','.join('?' * len(chunk))})", chunk)}
            missing = [rid for rid in chunk if rid not in found]
            if missing:
                raise NotFoundError(f"link target {missing[0]!r} does not exist")

    def _write_records(
        self, cur: sqlite3.Cursor, records: Sequence[Record], last: dict[str, Record], stored: dict[str, tuple[int, str]], member: dict[str, str]
    ) -> None:
        """Insert new records and rewrite stored ones, with one ``executemany`` per table.

        ``last`` maps each id to its last occurrence in ``records`` (its content wins; a new
        record keeps its first occurrence's ``created_at`` and position); ``member`` holds
        the ``member_of`` text of each record after the batch (absent: none). New rows get
        consecutive rowids from the table's sequence (checked after the insert)."""
        fresh = [r for r in last.values() if r.id not in stored]
        old = [r for r in last.values() if r.id in stored]
        created: dict[str, float] = {}
        if len(last) != len(records):
            for r in reversed(records):
                created[r.id] = r.created_at
        rowids: dict[str, int] = {rid: rowid for rid, (rowid, _) in stored.items() if rid in last}
        if old:
            self._delete_vectors(cur, [rowids[r.id] for r in old])
            cur.executemany("DELETE FROM links WHERE source=?", [(r.id,) for r in old])
            cur.executemany(
                "UPDATE records SET text=?, metadata=?, user_id=?, agent_id=?, run_id=?, updated_at=?, member_of=? WHERE rowid=?",
                [(r.text, _json_text(r.metadata), *_scope_row(r.scope), r.updated_at, member.get(r.id, "|"), rowids[r.id]) for r in old],
            )
        if fresh:
            row = cur.execute("SELECT seq FROM sqlite_sequence WHERE name='records'").fetchone()
            base = int(row[0]) if row else 0
            cur.executemany(
                "INSERT INTO records (id, text, metadata, user_id, agent_id, run_id, created_at, updated_at, member_of) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                _record_rows(fresh, created, member),
            )
            row = cur.execute("SELECT seq FROM sqlite_sequence WHERE name='records'").fetchone()
            if row is not None and int(row[0]) == base + len(fresh):
                rowids.update(zip([r.id for r in fresh], range(base + 1, base + 1 + len(fresh))))
            else:  # someone else's rowids in the sequence: look them up
                rowids.update((rid, rowid) for rid, (rowid, _) in self._stored_rows(cur, [r.id for r in fresh]).items())
        by_space: dict[str, tuple[list[int], list[Any]]] = {}
        for r in last.values():
            rowid = rowids[r.id]
            for space, v in r.vectors.items():
                column = by_space.get(space)
                if column is None:
                    column = by_space[space] = ([], [])
                column[0].append(rowid)
                column[1].append(v)
        for space, (vector_rids, vectors) in by_space.items():
            table = self._spaces.table(space, create=cur)
            cur.executemany(f"INSERT OR REPLACE INTO {table} (rid, data) VALUES (?, ?)", zip(vector_rids, _blobs(vectors)))
        links = [(r.id, l.target, l.relation, l.weight) for r in last.values() for l in r.links]
        if links:
            cur.executemany("INSERT OR REPLACE INTO links VALUES (?, ?, ?, ?)", links)

    def _delete_vectors(self, cur: sqlite3.Cursor, rowids: Sequence[int]) -> None:
        if not rowids:
            return
        for table in self._spaces.tables():
            for chunk in _chunks(rowids):
                cur.execute(f"DELETE FROM {table} WHERE rid IN ({','.join('?' * len(chunk))})", chunk)

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
                for space, table in self._spaces.items(refresh=self.read_only):
                    for rowid, data in self.db.execute(f"SELECT rid, data FROM {table} WHERE rid IN ({','.join('?' * len(rowids))})", rowids):
                        record = by_rowid[rowid]
                        record.vectors[space] = self._stored_vector(record.id, space, data).copy()
            if self._seq is not None:  # the writer, its sequence number known: remembered for the next apply
                self._probe = (self._seq, dict.fromkeys(ids, None) | seen) if len(seen) < len(ids) else (self._seq, seen)
            return [found.get(i) for i in ids]

    def _get_cached(self, ids: Sequence[str]) -> list[Record | None]:
        """Records without vectors, from rows cached until the next write (see :mod:`.sqlite_rows`)."""
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
        with self._mutex, self._snapshot():
            # a reader reads the sequence number and the rows in one snapshot, so rows are
            # never cached under an older sequence number than the version they hold
            cache = self._rows
            if self.read_only:  # rows are valid for one sequence number
                cache.valid_for(self.last_seq())
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
            return [found.get(i) for i in ids]

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
        sql, params = self._where(where, scope, index)
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        with self._mutex:
            return [row[0] for row in self.db.execute(f"SELECT r.id FROM records r WHERE {sql} ORDER BY r.rowid{tail}", params)]

    def count(self, *, where: Filter | None = None, scope: Scope | None = None, index: str | None = None) -> int:
        sql, params = self._where(where, scope, index)
        with self._mutex:
            return int(self.db.execute(f"SELECT COUNT(*) FROM records r WHERE {sql}", params).fetchone()[0])

    def memberships(self, ids: Sequence[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        with self._mutex:
            for chunk in _chunks(list(ids)):
                for rid, member_of in self.db.execute(f"SELECT id, member_of FROM records WHERE id IN ({','.join('?' * len(chunk))})", list(chunk)):
                    out[rid] = _members(member_of)
        return out

    def vectors(self, ids: Sequence[str], space: str) -> tuple[np.ndarray, np.ndarray]:
        """Stored vectors of ``ids``: chunked lookups for a few ids, one scan of the space's
        table in record order for many (an index refilling its vectors on load); see
        :func:`.sqlite_vectors.read_vectors`."""
        with self._mutex:
            table = self._spaces.table(space)
            if table is None:
                return np.zeros((len(ids), 0), dtype=np.float32), np.zeros(len(ids), dtype=bool)
            return read_vectors(self.db, table, list(ids), space, lambda rid, data: self._stored_vector(rid, space, data), self.file, _SCAN_FROM)

    def vectors_into(self, ids: Sequence[str], space: str, out: np.ndarray) -> np.ndarray:
        """:meth:`vectors` with each blob copied straight into its row of ``out``."""
        with self._mutex:
            table = self._spaces.table(space)
            if table is None:
                out[:] = 0.0
                return np.zeros(len(ids), dtype=bool)
            _, present = read_vectors(self.db, table, list(ids), space, lambda rid, data: self._stored_vector(rid, space, data), self.file, _SCAN_FROM, out=out)
            return present

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
                self.db.execute("ROLLBACK")
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
        """SQLite's ``PRAGMA integrity_check``: the problems found (empty when the file is sound)."""
        with self._mutex:
            rows = [row[0] for row in self.db.execute("PRAGMA integrity_check").fetchall()]
        return [] if rows == ["ok"] else rows

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.dir.glob(self.config.filename + "*") if p.is_file())

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
                    self._checkpoint(db)
                db.close()
                self.db = None  # type: ignore[assignment]
            lock = getattr(self, "_lock", None)
            if lock is not None:
                lock.release()
                self._lock = None

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
