"""Record reads of the ``postgres`` store in one statement, and the catch-up read.

A record is its ``records`` row, its links (aggregated into arrays) and one vector per
space (a ``LEFT JOIN`` of each space's table): one statement reads all of it, so it is one
snapshot and one round trip without a transaction around it. The space tables to join
are known from the last read (:class:`SpaceCache`); the statement also counts the spaces,
and a read that finds more than it joined reads the map and is made again (a space is
created once, by the first batch writing to it: rare; slots are never reused).

The catch-up of a process (:meth:`memcore.Store.read_tail`) reads the log of every asked
index with the log start and the last sequence number in one statement (what a search
with nothing new costs), then, when the ops add or update records, those records in one
more. Measured here, one plain statement costs the client ~0.15 ms of CPU and a
pipelined transaction of several ~0.9 ms: fewer statements, not a pipeline, is what
saves.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

import numpy as np
from psycopg import Connection, sql

from memcore.plugin import TAIL_RECORDS_MAX, CorruptError, Link, LogRead, LogTail, Op, Record, Scope

from .schema import OP_NAMES, vector_table

__all__ = ["SpaceCache", "read_records", "read_tail", "vector_value"]

_LINKS = (
    "LEFT JOIN LATERAL (SELECT array_agg(k.target ORDER BY k.target, k.relation) AS targets, "
    "array_agg(k.relation ORDER BY k.target, k.relation) AS relations, array_agg(k.weight ORDER BY k.target, k.relation) AS weights "
    "FROM links k WHERE k.source = r.id) l ON TRUE"
)
_LOG = (
    "SELECT m.log_start, m.seq, m.definitions, o.index_name, o.seq, o.ids, o.ops FROM (SELECT (SELECT value FROM meta WHERE key = 'log_start') AS log_start, "
    "(SELECT value FROM meta WHERE key = 'seq') AS seq, (SELECT value FROM meta WHERE key = 'definitions_seq') AS definitions) m "
    "LEFT JOIN LATERAL (SELECT n, index_name, seq, ids, ops FROM oplog WHERE index_name = ANY(%s::text[]) AND seq > %s) o ON TRUE ORDER BY o.n"
)


class SpaceCache:
    """The space -> slot map as last read (slots are never reused and spaces never removed:
    a known table stays its space's, and a count of the spaces tells whether one is new)."""

    def __init__(self) -> None:
        self._slots: dict[str, int] = {}
        self._lock = threading.Lock()

    def known(self) -> dict[str, int]:
        """The map as last read."""
        with self._lock:
            return dict(self._slots)

    def refresh(self, conn: Connection[Any]) -> None:
        """Read the map again."""
        slots = {str(name): int(slot) for name, slot in conn.execute("SELECT name, slot FROM vector_spaces")}
        with self._lock:
            self._slots = slots


def _records_query(known: Mapping[str, int]) -> sql.Composed:
    joins = [
        sql.SQL("LEFT JOIN {} {} ON {}.n = r.n").format(vector_table(slot), sql.Identifier(f"v{i}"), sql.Identifier(f"v{i}"))
        for i, slot in enumerate(known.values())
    ]
    vectors = [sql.SQL(", {}.v").format(sql.Identifier(f"v{i}")) for i in range(len(known))]
    return sql.SQL(
        "SELECT r.id, r.text, r.metadata, r.user_id, r.agent_id, r.run_id, r.created_at, r.updated_at, l.targets, l.relations, l.weights, "
        "(SELECT count(*) FROM vector_spaces){} FROM records r {} {} WHERE r.id = ANY(%s::text[])"
    ).format(sql.SQL("").join(vectors), sql.SQL(_LINKS), sql.SQL(" ").join(joins))


def read_records(conn: Connection[Any], ids: Sequence[str], cache: SpaceCache, with_vectors: bool = True) -> dict[str, Record]:
    """The stored records of ``ids`` by id, with their links and (``with_vectors``) their
    vectors, from one statement (one snapshot); once more after reading the space map when
    the store has a space the cache did not know."""
    while True:
        known = cache.known() if with_vectors else {}
        spaces = list(known)
        found: dict[str, Record] = {}
        count = len(known)
        for row in conn.execute(_records_query(known), (list(ids),)):
            rid, text, metadata, user_id, agent_id, run_id, created, updated, targets, relations, weights, count = row[:12]
            scope = None if user_id is None and agent_id is None and run_id is None else Scope(user_id, agent_id, run_id)
            links = () if targets is None else tuple(Link(t, r, w) for t, r, w in zip(targets, relations, weights))
            vectors = {space: vector_value(value) for space, value in zip(spaces, row[12:]) if value is not None}
            found[rid] = Record(rid, text, metadata, vectors, links, scope, created, updated)
        if not with_vectors or count == len(known):
            return found
        cache.refresh(conn)


def read_tail(conn: Connection[Any], since: Mapping[str, int], cache: SpaceCache) -> LogTail:
    """The log of every index of ``since`` above its sequence number, the log start, the
    last sequence number and that of the last change of an index definition
    (:attr:`memcore.plugin.LogTail.definitions`; ``meta`` key ``definitions_seq``) from one
    statement (one snapshot); then, when the ops add or
    update records (at most ``TAIL_RECORDS_MAX``, and no index must be rebuilt), those
    records from one more (:func:`read_records`)."""
    names = list(since)
    rows = conn.execute(_LOG, (names, min(since.values(), default=0))).fetchall()
    start, last, definitions = int(rows[0][0] or 0), int(rows[0][1] or 0), int(rows[0][2] or 0)
    ops: dict[str, list[Op]] = {name: [] for name in names}
    wanted: dict[str, None] = {}
    for _, _, _, index, seq, ids, codes in rows:
        if index is None or seq <= since[index]:
            continue
        if len(ids) != len(codes):
            raise CorruptError("an oplog row of the postgres store is malformed")
        for rid, code in zip(ids, codes):
            ops[index].append(Op(int(seq), index, rid, OP_NAMES[code]))  # type: ignore[arg-type]
            if code != "r":
                wanted[rid] = None
    records: dict[str, Record] = {}
    if wanted and len(wanted) <= TAIL_RECORDS_MAX and all(since[name] >= start for name in names):
        records = read_records(conn, list(wanted), cache)
    return LogTail({name: LogRead(start, last, ops[name]) for name in names}, records, definitions)


def vector_value(value: Any) -> np.ndarray:
    """A stored pgvector value as a float32 array of its own (writable)."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.array(value, dtype=np.float32)
