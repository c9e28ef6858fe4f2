"""The SQLite store: one file per collection, WAL, atomic batches, one writer process.

Tables: ``records`` (insertion order is the rowid), ``vectors`` (float32 blobs per
space), ``links``, ``membership`` (index -> record), ``oplog`` (sequence-numbered index
ops), ``state`` (JSON per namespace/key) and ``meta`` (schema version, last sequence).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import AbstractSet, Any, Literal, Mapping, Sequence

import numpy as np
from pydantic import Field, field_validator

from ..errors import ConfigError, CorruptError, NotFoundError, ValidationError
from ..filters import Filter, filter_fields, to_sql
from ..record_batch import RecordBatch
from ..records import Link, Record, Scope, check_finite_vectors
from ..registry import ComponentConfig
from ..store import Applied, LogRead, Op, Store, WriteBatch, involved_ids, plan_ops
from .sqlite_safety import WriterLock, check_store_file, guard_methods
from .sqlite_fields import FieldIndexes
from .sqlite_rows import Row, RowCache, cached_row, row_record

__all__ = ["SQLiteStore", "SQLiteStoreConfig"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    rowid INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    user_id TEXT, agent_id TEXT, run_id TEXT,
    created_at REAL NOT NULL, updated_at REAL NOT NULL
);
-- a rowid table on purpose: WITHOUT ROWID tables spill every ~1.5 KB vector to its own overflow page
CREATE TABLE IF NOT EXISTS vectors (
    record_id TEXT NOT NULL, space TEXT NOT NULL, dim INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (record_id, space)
);
CREATE TABLE IF NOT EXISTS links (
    source TEXT NOT NULL, target TEXT NOT NULL, relation TEXT NOT NULL, weight REAL NOT NULL,
    PRIMARY KEY (source, target, relation)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS links_target ON links (target);
CREATE TABLE IF NOT EXISTS membership (
    index_name TEXT NOT NULL, record_id TEXT NOT NULL, PRIMARY KEY (index_name, record_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS membership_record ON membership (record_id);
CREATE TABLE IF NOT EXISTS oplog (
    n INTEGER PRIMARY KEY AUTOINCREMENT, seq INTEGER NOT NULL,
    index_name TEXT NOT NULL, record_id TEXT NOT NULL, op TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS oplog_index_seq ON oplog (index_name, seq);
CREATE TABLE IF NOT EXISTS state (
    namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (namespace, key)
) WITHOUT ROWID;
"""

_CHUNK = 500  # SQLite host-parameter batches
_SCAN_FROM = 5000
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


def _chunks(seq: Sequence[str]) -> list[Sequence[str]]:
    return [seq[i : i + _CHUNK] for i in range(0, len(seq), _CHUNK)]


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
            if not self.read_only:
                self.db.executescript(_SCHEMA)
            self._check_version()
            self._fields = FieldIndexes(self.db, self.config.filter_indexes, writable=not self.read_only)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise CorruptError(f"{self.file} is not a readable memcore store: {exc}") from None
        except CorruptError:
            self.close()
            raise

    def _check_version(self) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None and self.read_only:
            raise CorruptError(f"{self.file} is not an initialised memcore store")
        if row is None:
            self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('seq', '0')")
        elif int(row[0]) != SCHEMA_VERSION:
            raise CorruptError(f"store {self.file} has schema version {row[0]}, this memcore reads {SCHEMA_VERSION}")

    # -- writes --------------------------------------------------------------------------

    def apply(self, batch: WriteBatch) -> Applied:
        if self.read_only:
            raise ValidationError("this store is open read-only")
        with self._mutex:
            cur = self.db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            self._rows.clear()
            try:
                applied = self._apply(cur, batch)
                cur.execute("COMMIT")
                self._seq = applied.seq
                return applied
            except BaseException:
                self._seq = None  # read again
                cur.execute("ROLLBACK")
                raise

    def _apply(self, cur: sqlite3.Cursor, batch: WriteBatch) -> Applied:
        seq = self.last_seq() + 1
        ids = sorted(involved_ids(batch))
        link_sources: set[str] = set()
        for chunk in _chunks(batch.deletes):
            marks = ",".join("?" * len(chunk))
            link_sources.update(r[0] for r in cur.execute(f"SELECT source FROM links WHERE target IN ({marks})", list(chunk)))
        memberships = self.memberships(sorted(set(ids) | link_sources))
        ops = plan_ops(batch, memberships, link_sources)

        for chunk in _chunks(batch.deletes):
            marks = ",".join("?" * len(chunk))
            args = list(chunk)
            cur.execute(f"DELETE FROM records WHERE id IN ({marks})", args)
            cur.execute(f"DELETE FROM vectors WHERE record_id IN ({marks})", args)
            cur.execute(f"DELETE FROM links WHERE source IN ({marks}) OR target IN ({marks})", args + args)
            cur.execute(f"DELETE FROM membership WHERE record_id IN ({marks})", args)
        self._write_records(cur, batch.upserts, memberships.keys())
        for index, rids in batch.remove_membership.items():
            cur.executemany("DELETE FROM membership WHERE index_name=? AND record_id=?", [(index, r) for r in rids])
        for index, rids in batch.add_membership.items():
            cur.executemany("INSERT OR IGNORE INTO membership VALUES (?, ?)", [(index, r) for r in rids])
        for index in batch.drop_indexes:
            cur.execute("DELETE FROM membership WHERE index_name=?", (index,))
            cur.execute("DELETE FROM oplog WHERE index_name=?", (index,))
        self._check_references(cur, batch)
        for (namespace, key), value in batch.state.items():
            if value is None:
                cur.execute("DELETE FROM state WHERE namespace=? AND key=?", (namespace, key))
            else:
                cur.execute("INSERT OR REPLACE INTO state VALUES (?, ?, ?)", (namespace, key, json.dumps(value)))
        cur.executemany("INSERT INTO oplog (seq, index_name, record_id, op) VALUES (?, ?, ?, ?)", [(seq, i, r, o) for i, r, o in ops])
        cur.execute("UPDATE meta SET value=? WHERE key='seq'", (str(seq),))
        return Applied(seq, tuple(Op(seq, i, r, o) for i, r, o in ops))

    def _write_records(self, cur: sqlite3.Cursor, records: Sequence[Record], stored: AbstractSet[str]) -> None:
        """Upsert records with one ``executemany`` per table (not five statements per record).

        Rows are written in batch order, so a repeated id ends as its last occurrence, with
        that occurrence's vectors and links. ``stored``: the ids that existed before the
        batch (only their old vectors and links need deleting)."""
        if not records:
            return
        rows: list[tuple[str, str, str, str | None, str | None, str | None, float, float]] = []
        for r in records:
            scope = r.scope
            if scope is None:
                rows.append((r.id, r.text, json.dumps(r.metadata), None, None, None, r.created_at, r.updated_at))
            else:
                rows.append((r.id, r.text, json.dumps(r.metadata), scope.user_id, scope.agent_id, scope.run_id, r.created_at, r.updated_at))
        cur.executemany(
            "INSERT INTO records (id, text, metadata, user_id, agent_id, run_id, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET text=excluded.text, "
            "metadata=excluded.metadata, user_id=excluded.user_id, agent_id=excluded.agent_id, "
            "run_id=excluded.run_id, updated_at=excluded.updated_at",
            rows,
        )
        last = {r.id: r for r in records}
        keys = [(rid,) for rid in last if rid in stored]
        cur.executemany("DELETE FROM vectors WHERE record_id=?", keys)
        cur.executemany(
            "INSERT INTO vectors VALUES (?, ?, ?, ?)",
            [(r.id, space, int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes()) for r in last.values() for space, v in r.vectors.items()],
        )
        cur.executemany("DELETE FROM links WHERE source=?", keys)
        cur.executemany("INSERT OR REPLACE INTO links VALUES (?, ?, ?, ?)", [(r.id, l.target, l.relation, l.weight) for r in last.values() for l in r.links])

    def _check_references(self, cur: sqlite3.Cursor, batch: WriteBatch) -> None:
        written = {r.id for r in batch.upserts}  # exist: written by this batch (deletes ran before)
        members = sorted({rid for rids in batch.add_membership.values() for rid in rids} - written)
        targets = sorted({l.target for r in batch.upserts for l in r.links} - written)
        for wanted, what in ((members, "record {!r} does not exist"), (targets, "link target {!r} does not exist")):
            for chunk in _chunks(wanted):
                marks = ",".join("?" * len(chunk))
                found = {row[0] for row in cur.execute(f"SELECT id FROM records WHERE id IN ({marks})", list(chunk))}
                missing = [rid for rid in chunk if rid not in found]
                if missing:
                    raise NotFoundError(what.format(missing[0]))

    # -- reads ---------------------------------------------------------------------------

    def get(self, ids: Sequence[str], *, with_vectors: bool = True) -> list[Record | None]:
        if not with_vectors:
            return self._get_cached(ids)
        with self._mutex:
            found: dict[str, Record] = {}
            for chunk in _chunks(list(ids)):
                marks = ",".join("?" * len(chunk))
                for row in self.db.execute(
                    f"SELECT id, text, metadata, user_id, agent_id, run_id, created_at, updated_at FROM records WHERE id IN ({marks})", list(chunk)
                ):
                    # the common shapes cheaply: no scope, empty metadata (this runs for every hit of every query)
                    scope = None if row[3] is None and row[4] is None and row[5] is None else Scope(row[3], row[4], row[5])
                    found[row[0]] = Record(row[0], row[1], {} if row[2] == "{}" else json.loads(row[2]), {}, (), scope, row[6], row[7])
                links: dict[str, list[Link]] = {}
                for src, tgt, rel, w in self.db.execute(
                    f"SELECT source, target, relation, weight FROM links WHERE source IN ({marks}) ORDER BY source, target, relation", list(chunk)
                ):
                    links.setdefault(src, []).append(Link(tgt, rel, w))
                for rid, ls in links.items():
                    found[rid].links = tuple(ls)
                if with_vectors:
                    for rid, space, dim, data in self.db.execute(f"SELECT record_id, space, dim, data FROM vectors WHERE record_id IN ({marks})", list(chunk)):
                        found[rid].vectors[space] = self._stored_vector(rid, space, dim, data).copy()
            return [found.get(i) for i in ids]

    def _get_cached(self, ids: Sequence[str]) -> list[Record | None]:
        """Records without vectors, from rows cached until the next write (see :mod:`.sqlite_rows`)."""
        rows = self._cached_rows(ids)
        # this runs for every hit of every query: a cached row is all a Record needs
        return [None if (row := rows.get(i)) is None else row_record(row) for i in ids]

    def get_batch(self, ids: Sequence[str]) -> RecordBatch:
        """The cached rows of ``ids`` (a snapshot: the cache replaces its dict, never empties
        it), each record built on first access."""
        return RecordBatch(self._cached_rows(ids), row_record)

    def _cached_rows(self, ids: Sequence[str]) -> Mapping[str, Row]:
        """Rows holding at least every stored record of ``ids``, read now; never changed later."""
        if not self.read_only:  # the writer's cache changes only in its own writes: a cached read needs no lock
            rows = self._rows.rows
            if all(map(rows.__contains__, ids)):
                return rows
        with self._mutex:
            cache = self._rows
            if self.read_only:  # another process writes: rows are valid for one sequence number
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
            cache.put(found)
            if cache.rows is rows:  # added to the current rows
                return rows
            return {**{i: rows[i] for i in ids if i in rows}, **found}  # the cache started afresh (its limit)

    def _stored_vector(self, rid: str, space: str, dim: int, data: bytes) -> np.ndarray:
        """A stored vector, checked: a damaged blob is a CorruptError naming the record and file."""
        try:
            vector = np.frombuffer(data, dtype=np.float32, count=dim)
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

    def _where(self, where: Filter | None, scope: Scope | None, index: str | None) -> tuple[str, str, list[Any]]:
        if where is not None:
            with self._mutex:
                self._fields.ensure(filter_fields(where))
        sql, params = to_sql(where, "r.metadata")
        join = ""
        if index is not None:
            join = " JOIN membership m ON m.record_id = r.id AND m.index_name = ?"
            params = [index] + params
        for key, value in (scope.as_dict() if scope else {}).items():
            sql += f" AND r.{key} = ?"
            params.append(value)
        return join, sql, params

    def ids(self, *, where: Filter | None = None, scope: Scope | None = None, index: str | None = None, limit: int | None = None) -> list[str]:
        join, sql, params = self._where(where, scope, index)
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        with self._mutex:
            return [row[0] for row in self.db.execute(f"SELECT r.id FROM records r{join} WHERE {sql} ORDER BY r.rowid{tail}", params)]

    def count(self, *, where: Filter | None = None, scope: Scope | None = None, index: str | None = None) -> int:
        join, sql, params = self._where(where, scope, index)
        with self._mutex:
            return int(self.db.execute(f"SELECT COUNT(*) FROM records r{join} WHERE {sql}", params).fetchone()[0])

    def memberships(self, ids: Sequence[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        with self._mutex:
            for chunk in _chunks(list(ids)):
                marks = ",".join("?" * len(chunk))
                for (rid,) in self.db.execute(f"SELECT id FROM records WHERE id IN ({marks})", list(chunk)):
                    out[rid] = set()
                for index, rid in self.db.execute(f"SELECT index_name, record_id FROM membership WHERE record_id IN ({marks})", list(chunk)):
                    out.setdefault(rid, set()).add(index)
        return out

    def vectors(self, ids: Sequence[str], space: str) -> tuple[np.ndarray, np.ndarray]:
        """Stored vectors of ``ids``: chunked ``IN`` lookups for a few ids, one scan of the
        space for many (an index refilling its vectors on load). Each blob is copied once,
        straight into its row; one vectorised finite check per call."""
        position: dict[str, int] = {}
        for i, rid in enumerate(ids):
            position.setdefault(rid, i)
        present = np.zeros(len(ids), dtype=bool)
        matrix: np.ndarray | None = None
        view: memoryview | None = None
        width = 0
        with self._mutex:
            if len(position) >= _SCAN_FROM:
                cursors = [self.db.execute("SELECT record_id, dim, data FROM vectors WHERE space = ?", (space,))]
            else:
                cursors = [
                    self.db.execute(
                        f"SELECT record_id, dim, data FROM vectors WHERE space = ? AND record_id IN ({','.join('?' * len(chunk))})", [space, *chunk]
                    )
                    for chunk in _chunks(list(position))
                ]
            get = position.get
            for cursor in cursors:
                for rid, dim, data in cursor:
                    row = get(rid)
                    if row is None:
                        continue
                    if view is None:
                        matrix = np.zeros((len(ids), dim), dtype=np.float32)
                        view = memoryview(matrix.data).cast("B")
                        width = 4 * dim
                    if len(data) != width or dim * 4 != width:  # damaged or another dimension: named by the per-row check
                        self._stored_vector(rid, space, dim, data)
                        raise CorruptError(f"{self.file}: stored vector {space!r} of record {rid!r} has {len(data) // 4} values, others {width // 4}")
                    view[row * width : (row + 1) * width] = data
                    present[row] = True
        if matrix is None:
            return np.zeros((len(ids), 0), dtype=np.float32), present
        squares = np.einsum("ij,ij->i", matrix, matrix)
        if not np.isfinite(squares).all():  # NaN, inf or overflow: the per-row check names the record
            for i in np.flatnonzero(~np.isfinite(squares)).tolist():
                self._stored_vector(ids[i], space, matrix.shape[1], matrix[i].tobytes())
        if len(position) != len(ids):  # a repeated id: every occurrence gets the row
            for i, rid in enumerate(ids):
                j = position[rid]
                if j != i and present[j]:
                    matrix[i] = matrix[j]
                    present[i] = True
        return matrix, present

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
            rows = self.db.execute("SELECT seq, index_name, record_id, op FROM oplog WHERE index_name=? AND seq>? ORDER BY n", (index, seq)).fetchall()
        return [Op(*row) for row in rows]

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

    # -- lifecycle -----------------------------------------------------------------------

    def integrity_check(self) -> list[str]:
        """SQLite's ``PRAGMA integrity_check``: the problems found (empty when the file is sound)."""
        with self._mutex:
            rows = [row[0] for row in self.db.execute("PRAGMA integrity_check").fetchall()]
        return [] if rows == ["ok"] else rows

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.dir.glob(self.config.filename + "*") if p.is_file())

    def close(self) -> None:
        with self._mutex:
            db = getattr(self, "db", None)
            if db is not None:
                db.close()
                self.db = None  # type: ignore[assignment]
            lock = getattr(self, "_lock", None)
            if lock is not None:
                lock.release()
                self._lock = None


def sqlite_store_factory(config: SQLiteStoreConfig, path: str | os.PathLike[str] | None) -> SQLiteStore:
    """Build the SQLite store of the collection at ``path`` (a directory)."""
    if path is None:
        raise ConfigError('the sqlite store needs a collection directory (path=...); use kind = "memory" for no files', location="store")
    return SQLiteStore(path, config)
