"""How far a process prunes the shared op log: never past what is younger than the retention.

Every process of a postgres memory keeps its own in-process indexes and catches them up from
the op log before a search. A process that prunes the log as far as its own indexes have
applied would leave every other process behind it with a gap, and a gap means rebuilding
those indexes from the store. So each prune first notes the time and the log's last sequence
number (a ``oplog_mark:<epoch seconds>`` row of ``meta``), then prunes only through the
newest mark older than ``log_retention_s``: what was written within the retention stays.

Forgetting a scope is the exception: a batch that forgets one notes its sequence number as
``forgotten_through``, and the next prune goes at least that far, so no forgotten id stays in
the log (processes behind it rebuild their indexes, without the forgotten records).
No column is added: an existing memory's tables are used as they are.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

__all__ = ["prune_log"]

_MARK = (
    "INSERT INTO meta SELECT 'oplog_mark:' || floor(extract(epoch FROM clock_timestamp()))::bigint, value FROM meta WHERE key = 'seq' "
    "ON CONFLICT (key) DO UPDATE SET value = greatest(meta.value, EXCLUDED.value)"
)
_TARGET = (
    "SELECT least(%(upto)s, greatest("
    "coalesce((SELECT max(value) FROM meta WHERE starts_with(key, 'oplog_mark:') "
    "AND substr(key, 12)::bigint <= extract(epoch FROM clock_timestamp()) - %(keep)s), 0), "
    "coalesce((SELECT value FROM meta WHERE key = 'forgotten_through'), 0)))"
)


def prune_log(conn: Connection[Any], upto: int, retention_s: float) -> int:
    """Prune the op log (in the caller's transaction) through ``upto`` at most, keeping what
    was written within ``retention_s`` seconds unless a scope was forgotten after it; returns
    the new log start."""
    conn.execute(_MARK)
    row = conn.execute(_TARGET, {"upto": int(upto), "keep": float(retention_s)}).fetchone()
    target = int(row[0]) if row and row[0] is not None else 0
    if target > 0:
        conn.execute("DELETE FROM oplog WHERE seq <= %s", (target,))
        conn.execute("UPDATE meta SET value = greatest(value, %s) WHERE key = 'log_start'", (target,))
    start_row = conn.execute("SELECT value FROM meta WHERE key = 'log_start'").fetchone()
    start = int(start_row[0]) if start_row else 0
    conn.execute("DELETE FROM meta WHERE starts_with(key, 'oplog_mark:') AND value <= %s", (start,))  # nothing left to keep for them
    return start
