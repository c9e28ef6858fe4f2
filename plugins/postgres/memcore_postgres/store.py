"""The ``postgres`` store: one memory in one PostgreSQL schema, shared by many processes.

Reads are single statements (or one ``REPEATABLE READ`` snapshot where several must agree:
:meth:`PostgresStore.read_log`); writes are one transaction per batch
(:class:`~.writes.PostgresWrites`). There is no process lock: any number of processes on
any number of machines open the same memory and write; their batches run at once (row locks
keep apart those touching the same records) and queue only to take their sequence number
and commit (the ``meta.seq`` row lock, see :mod:`.writes`), and ``shared = True`` tells the
collection to catch its in-process indexes up from the op log before each search. See
:mod:`.schema` for the tables.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from psycopg import Connection, sql

from memcore.plugin import ConfigError, CorruptError, Filter, LogRead, LogTail, Op, Record, Scope, Store, get_logger

from .config import PostgresStoreConfig
from .connections import EmbeddedServer, Pool
from .filters import compile_filter
from .log_retention import prune_log as prune_retained
from .reads import SpaceCache, read_records, read_tail, vector_value
from .schema import OP_NAMES, SCHEMA_VERSION, create_schema
from .writes import PostgresWrites, SpaceTables

__all__ = ["PostgresStore"]

log = get_logger("memcore.postgres")

EMBEDDED_DIR = "pgdata"
"""Where the embedded server keeps its data, inside the memory directory."""


class PostgresStore(PostgresWrites, Store):
    """Records, vectors, links, membership, state and the op log of one memory in a PostgreSQL schema."""

    shared = True

    def __init__(self, config: PostgresStoreConfig, path: str | os.PathLike[str] | None = None):
        self.config = config
        self.read_only = config.read_only
        self.schema = config.schema_name
        self.dir = Path(path) if path is not None else None
        self._embedded: EmbeddedServer | None = None
        self._mutex = threading.RLock()
        conninfo = config.conninfo()
        if conninfo is None:
            if self.dir is None:
                raise ConfigError("the postgres store without url needs a memory directory (path=...) for its embedded server", location="store")
            self._embedded = EmbeddedServer(self.dir / EMBEDDED_DIR)
            conninfo = self._embedded.uri()
        self.pool = Pool(conninfo, self.schema, config.pool_size, config.connect_timeout, config.retries, config.lock_timeout)
        try:
            version = self.pool.read("opening the schema", lambda conn: self._open_schema(conn))
            if version > SCHEMA_VERSION:
                raise CorruptError(f"schema {self.schema!r} has memcore schema version {version}, this memcore-postgres reads {SCHEMA_VERSION}")
        except BaseException:
            self.close()
            raise
        self._spaces = SpaceTables(self.schema)
        self._space_cache = SpaceCache()

    def _open_schema(self, conn: Connection[Any]) -> int:
        if self.read_only:
            row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)).fetchone()
            if row is None:
                raise ConfigError(f"no memcore schema {self.schema!r} in the database (a reader cannot create it)", location="store.schema")
            got = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            return int(got[0]) if got else SCHEMA_VERSION
        return create_schema(conn, self.schema)

    # -- reads ---------------------------------------------------------------------------

    def get(self, ids: Sequence[str], *, with_vectors: bool = True) -> list[Record | None]:
        """Records with their links (and vectors) from one statement (:mod:`.reads`)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return [None] * len(ids)

        with self._mutex:
            found = self.pool.read("reading records", lambda conn: read_records(conn, wanted, self._space_cache, with_vectors))
        # one Record per occurrence: repeated ids get copies
        out: list[Record | None] = []
        seen: set[str] = set()
        for rid in ids:
            record = found.get(rid)
            if record is not None and rid in seen:
                record = Record(
                    record.id,
                    record.text,
                    json.loads(json.dumps(record.metadata)),
                    {k: v.copy() for k, v in record.vectors.items()},
                    record.links,
                    record.scope,
                    record.created_at,
                    record.updated_at,
                )
            seen.add(rid)
            out.append(record)
        return out

    def texts(self, ids: Sequence[str]) -> list[str | None]:
        """One ``SELECT id, text``: no metadata, links or vectors."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return []
        with self._mutex:
            found = dict(self.pool.read("reading texts", lambda conn: conn.execute("SELECT id, text FROM records WHERE id = ANY(%s)", (wanted,)).fetchall()))
        return [found.get(i) for i in ids]

    def where_sql(self, where: Filter | None, scope: Scope | None, index: str | None, alias: str = "r") -> tuple[str, list[Any]]:
        """The SQL condition (over ``records`` as ``alias``) of a parsed filter, a scope and
        an index's membership, with its parameters. Used by the store's reads and by the
        ``pgvector`` index's filtered searches (one statement)."""
        params: list[Any] = []
        parts = [compile_filter(where, f"{alias}.metadata", params)] if where is not None else []
        if index is not None:
            parts.append(f"{alias}.member_of @> ARRAY[%s::text]")
            params.append(index)
        for key, value in (scope.as_dict() if scope else {}).items():
            parts.append(f"{alias}.{key} = %s")
            params.append(value)
        return (" AND ".join(parts) or "TRUE"), params

    def ids(self, *, where: Filter | None = None, scope: Scope | None = None, index: str | None = None, limit: int | None = None) -> list[str]:
        condition, params = self.where_sql(where, scope, index)
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        query = f"SELECT r.id FROM records r WHERE {condition} ORDER BY r.n{tail}"
        with self._mutex:
            rows = self.pool.read("listing ids", lambda conn: conn.execute(query, params).fetchall())
        return [row[0] for row in rows]

    def count(self, *, where: Filter | None = None, scope: Scope | None = None, index: str | None = None) -> int:
        condition, params = self.where_sql(where, scope, index)
        query = f"SELECT count(*) FROM records r WHERE {condition}"
        with self._mutex:
            row = self.pool.read("counting", lambda conn: conn.execute(query, params).fetchone())
        return int(row[0]) if row else 0

    def memberships(self, ids: Sequence[str]) -> dict[str, set[str]]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        with self._mutex:
            rows = self.pool.read(
                "reading memberships", lambda conn: conn.execute("SELECT id, member_of FROM records WHERE id = ANY(%s)", (wanted,)).fetchall()
            )
        return {rid: set(members) for rid, members in rows}

    def vectors(self, ids: Sequence[str], space: str) -> tuple[np.ndarray, np.ndarray]:
        wanted = list(dict.fromkeys(ids))

        def read(conn: Connection[Any]) -> dict[str, np.ndarray]:
            table = self._spaces.table(conn, space)
            if table is None or not wanted:
                return {}
            query = sql.SQL("SELECT r.id, v.v FROM records r JOIN {} v ON v.n = r.n WHERE r.id = ANY(%s)").format(table)
            return {rid: vector_value(vector) for rid, vector in conn.execute(query, (wanted,))}

        with self._mutex:
            found = self.pool.read("reading vectors", read)
        dims = {v.shape[0] for v in found.values()}
        if len(dims) > 1:
            raise CorruptError(f"the store keeps vectors of several dimensions {sorted(dims)} in space {space!r}")
        dim = dims.pop() if dims else 0
        matrix = np.zeros((len(ids), dim), dtype=np.float32)
        present = np.zeros(len(ids), dtype=bool)
        for i, rid in enumerate(ids):
            vector = found.get(rid)
            if vector is not None:
                matrix[i] = vector
                present[i] = True
        return matrix, present

    def missing_vectors(self, ids: Sequence[str], space: str) -> list[str]:
        """The ids among ``ids`` without a vector in ``space`` (unknown ids included), found
        in SQL: no vector is sent (what populating a ``pgvector`` index asks)."""
        wanted = list(dict.fromkeys(ids))

        def read(conn: Connection[Any]) -> set[str]:
            table = self._spaces.table(conn, space)
            if table is None or not wanted:
                return set()
            query = sql.SQL("SELECT r.id FROM records r WHERE r.id = ANY(%b::text[]) AND EXISTS (SELECT 1 FROM {} v WHERE v.n = r.n)").format(table)
            return {row[0] for row in conn.execute(query, (wanted,))}

        with self._mutex:
            present = self.pool.read("finding records without vectors", read)
        return [rid for rid in ids if rid not in present]

    # -- log and state -------------------------------------------------------------------

    def last_seq(self) -> int:
        with self._mutex:
            seq: int = self.pool.read("reading the sequence number", _meta("seq"))
        return seq

    def log_start(self) -> int:
        with self._mutex:
            start: int = self.pool.read("reading the log start", _meta("log_start"))
        return start

    def ops_since(self, seq: int, index: str) -> list[Op]:
        with self._mutex:
            ops: list[Op] = self.pool.read("reading the op log", lambda conn: _ops(conn, seq, index))
        return ops

    def read_tail(self, since: Mapping[str, int]) -> LogTail:
        """The log of every asked index and the last change of an index definition from one
        statement, and the records its ops add or update from one more (:func:`.reads.read_tail`)."""
        with self._mutex:
            tail: LogTail = self.pool.read("reading the op log", lambda conn: read_tail(conn, since, self._space_cache))
        return tail

    def read_log(self, seq: int, index: str) -> LogRead:
        """Log start, last sequence number and ops from one snapshot: a concurrent prune
        (or write) cannot open a gap."""

        def read(conn: Connection[Any]) -> LogRead:
            # one statement sees one snapshot: no transaction round trips around it
            rows = conn.execute(
                "SELECT m.log_start, m.seq, o.seq, o.ids, o.ops FROM (SELECT (SELECT value FROM meta WHERE key = 'log_start') AS log_start, "
                "(SELECT value FROM meta WHERE key = 'seq') AS seq) m LEFT JOIN LATERAL (SELECT n, seq, ids, ops FROM oplog "
                "WHERE index_name = %s AND seq > %s) o ON TRUE ORDER BY o.n",
                (index, seq),
            ).fetchall()
            start, last = int(rows[0][0] or 0), int(rows[0][1] or 0)
            return LogRead(start, last, _unpack(index, [(r[2], r[3], r[4]) for r in rows if r[2] is not None]))

        with self._mutex:
            got: LogRead = self.pool.read("reading the op log", read)
        return got

    def prune_log(self, upto: int) -> None:
        if self.read_only:
            return

        def prune(conn: Connection[Any]) -> None:
            prune_retained(conn, upto, self.config.log_retention_s)

        with self._mutex:
            self.pool.write("pruning the op log", prune)

    def get_state(self, namespace: str, key: str, default: Any = None) -> Any:
        with self._mutex:
            row = self.pool.read(
                "reading state", lambda conn: conn.execute("SELECT value FROM state WHERE namespace = %s AND key = %s", (namespace, key)).fetchone()
            )
        return json.loads(row[0]) if row else default

    def state_items(self, namespace: str) -> dict[str, Any]:
        with self._mutex:
            rows = self.pool.read(
                "reading state", lambda conn: conn.execute("SELECT key, value FROM state WHERE namespace = %s ORDER BY key", (namespace,)).fetchall()
            )
        return {k: json.loads(v) for k, v in rows}

    def state_namespaces(self) -> list[str]:
        with self._mutex:
            rows = self.pool.read("reading state", lambda conn: conn.execute("SELECT DISTINCT namespace FROM state ORDER BY namespace").fetchall())
        return [row[0] for row in rows]

    # -- lifecycle -----------------------------------------------------------------------

    def size_bytes(self) -> int:
        """The size of the memory's tables and indexes in the database."""
        query = "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'"
        try:
            with self._mutex:
                row = self.pool.read("measuring", lambda conn: conn.execute(query, (self.schema,)).fetchone())
        except Exception:  # noqa: BLE001 - a size is informative
            return 0
        return int(row[0]) if row else 0

    def close(self) -> None:
        """Close the connections; stop the embedded server when this was its last user. Idempotent."""
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.close()
        embedded, self._embedded = getattr(self, "_embedded", None), None
        if embedded is not None:
            embedded.close()


def _meta(key: str) -> Callable[[Connection[Any]], int]:
    def read(conn: Connection[Any]) -> int:
        row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return int(row[0]) if row else 0

    return read


def _ops(conn: Connection[Any], seq: int, index: str) -> list[Op]:
    rows = conn.execute("SELECT seq, ids, ops FROM oplog WHERE index_name = %s AND seq > %s ORDER BY n", (index, seq)).fetchall()
    return _unpack(index, rows)


def _unpack(index: str, rows: Sequence[tuple[Any, Any, Any]]) -> list[Op]:
    """The ops of oplog rows ``(seq, ids, ops)``, in order."""
    out: list[Op] = []
    for row_seq, ids, ops in rows:
        if len(ids) != len(ops):
            raise CorruptError("an oplog row of the postgres store is malformed")
        out.extend(Op(int(row_seq), index, rid, OP_NAMES[code]) for rid, code in zip(ids, ops))  # type: ignore[arg-type]
    return out
