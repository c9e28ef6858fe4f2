"""The tables of the SQLite store (schema version 2) and the migration of older files.

Version 2 writes one row and two B-trees per record and space where version 1 wrote four
rows into eight B-trees (records, vectors, membership, oplog, each with a second index):

- ``records``: one row per record, its insertion order is the rowid (``AUTOINCREMENT``:
  a rowid is never reused). ``member_of`` holds the names of the indexes the record
  belongs to, as ``'|a|b|'`` (``'|'`` for none): membership is read with the record's row
  and written with it, not in a table of its own;
- ``vector_spaces`` + one ``vectors_<slot>`` table per space: ``rid`` (the record's rowid)
  -> float32 blob. A rowid table keyed by the record's integer id: a vector write appends
  to one B-tree, and an index refilling its vectors scans one table in record order;
- ``oplog``: one row per batch and index, with that index's ops of the batch in order
  (``{"ids": [...], "ops": "aru"}``: add / remove / update). ``Store.ops_since`` returns
  exactly what version 1 returned (one op per record and index, in the order logged);
- ``links``, ``state`` and ``meta`` (schema version, last sequence number, log start) as
  in version 1;
- ``vectors`` is a view with version 1's columns (``record_id, space, dim, data``) for
  people and tools reading the file with ``sqlite3``; updating or deleting through it
  reaches the space tables.

A writer opening a version 1 file migrates it in one transaction (all or nothing: a crash
leaves the version 1 file as it was). A reader (``read_only``) cannot migrate and says so.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Iterable

from ..errors import CorruptError

__all__ = ["SCHEMA_VERSION", "SCHEMA", "ensure_vectors_view", "migrate", "pack_ops", "unpack_ops", "OP_CODES"]

SCHEMA_VERSION = 2

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    rowid INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    user_id TEXT, agent_id TEXT, run_id TEXT,
    created_at REAL NOT NULL, updated_at REAL NOT NULL,
    member_of TEXT NOT NULL DEFAULT '|'
);
CREATE TABLE IF NOT EXISTS vector_spaces (name TEXT PRIMARY KEY, slot INTEGER NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS links (
    source TEXT NOT NULL, target TEXT NOT NULL, relation TEXT NOT NULL, weight REAL NOT NULL,
    PRIMARY KEY (source, target, relation)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS links_target ON links (target);
CREATE TABLE IF NOT EXISTS oplog (
    n INTEGER PRIMARY KEY AUTOINCREMENT, seq INTEGER NOT NULL, index_name TEXT NOT NULL, ops TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS oplog_index_seq ON oplog (index_name, seq);
CREATE TABLE IF NOT EXISTS state (
    namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (namespace, key)
) WITHOUT ROWID;
"""

OP_CODES = {"add": "a", "remove": "r", "update": "u"}
_OP_NAMES = {code: name for name, code in OP_CODES.items()}


def vector_table(slot: int) -> str:
    """The table of the space with this slot number."""
    return f"vectors_{int(slot)}"


def create_vector_table(db: sqlite3.Connection | sqlite3.Cursor, slot: int) -> None:
    """The rowid table of one space (a rowid table: WITHOUT ROWID would spill each blob to an overflow page)."""
    db.execute(f"CREATE TABLE IF NOT EXISTS {vector_table(slot)} (rid INTEGER PRIMARY KEY, data BLOB NOT NULL)")


def ensure_vectors_view(db: sqlite3.Connection | sqlite3.Cursor, slots: Iterable[int]) -> None:
    """(Re)create the ``vectors`` view over the space tables, with triggers that route
    ``UPDATE ... SET data`` and ``DELETE`` through it to the right space table."""
    slots = sorted(slots)
    db.execute("DROP VIEW IF EXISTS vectors")
    parts = [
        f"SELECT r.id AS record_id, s.name AS space, length(v.data) / 4 AS dim, v.data AS data "
        f"FROM {vector_table(k)} v JOIN records r ON r.rowid = v.rid JOIN vector_spaces s ON s.slot = {k}"
        for k in slots
    ]
    body = " UNION ALL ".join(parts) or "SELECT NULL AS record_id, NULL AS space, NULL AS dim, NULL AS data WHERE 0"
    db.execute(f"CREATE VIEW vectors AS {body}")
    if not slots:
        return
    target = "(SELECT rowid FROM records WHERE id = OLD.record_id)"
    space = "(SELECT name FROM vector_spaces WHERE slot = {k})"
    updates = " ".join(f"UPDATE {vector_table(k)} SET data = NEW.data WHERE OLD.space = {space.format(k=k)} AND rid = {target};" for k in slots)
    deletes = " ".join(f"DELETE FROM {vector_table(k)} WHERE OLD.space = {space.format(k=k)} AND rid = {target};" for k in slots)
    db.execute(f"CREATE TRIGGER vectors_update INSTEAD OF UPDATE OF data ON vectors BEGIN {updates} END")
    db.execute(f"CREATE TRIGGER vectors_delete INSTEAD OF DELETE ON vectors BEGIN {deletes} END")


def pack_ops(entries: list[tuple[str, str]]) -> str:
    """One oplog row's ``ops`` text from ``(record_id, op)`` pairs, in order."""
    return json.dumps({"ids": [rid for rid, _ in entries], "ops": "".join(OP_CODES[op] for _, op in entries)}, separators=(",", ":"))


def unpack_ops(text: str) -> list[tuple[str, str]]:
    """The ``(record_id, op)`` pairs of one oplog row (``CorruptError`` when malformed)."""
    value = json.loads(text)
    ids, ops = value["ids"], value["ops"]
    if not isinstance(ids, list) or not isinstance(ops, str) or len(ids) != len(ops) or not all(isinstance(i, str) for i in ids):
        raise CorruptError("an oplog row is malformed")
    try:
        return [(rid, _OP_NAMES[code]) for rid, code in zip(ids, ops)]
    except KeyError as exc:
        raise CorruptError(f"an oplog row holds an unknown op code {exc}") from None


def _tables(db: sqlite3.Connection | sqlite3.Cursor) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def migrate(cur: sqlite3.Cursor, version: int) -> None:
    """Bring a store file from ``version`` to :data:`SCHEMA_VERSION` inside the caller's
    write transaction (the caller commits, or rolls back on any error)."""
    if version == 1:
        _migrate_1_to_2(cur)
        return
    raise CorruptError(f"no migration from schema version {version}")


def _migrate_1_to_2(cur: sqlite3.Cursor) -> None:
    tables = _tables(cur)
    missing = {"records", "vectors", "membership", "oplog"} - tables
    if missing:
        raise CorruptError(f"a schema version 1 store without the table(s) {sorted(missing)}")
    # membership -> records.member_of (names sorted: the order does not matter, only presence)
    cur.execute("ALTER TABLE records ADD COLUMN member_of TEXT NOT NULL DEFAULT '|'")
    cur.execute(
        "UPDATE records SET member_of = '|' || (SELECT group_concat(index_name, '|') FROM "
        "(SELECT index_name FROM membership m WHERE m.record_id = records.id ORDER BY index_name)) || '|' "
        "WHERE id IN (SELECT record_id FROM membership)"
    )
    # vectors (record_id, space) -> one rowid table per space keyed by the record's rowid
    cur.execute("CREATE TABLE IF NOT EXISTS vector_spaces (name TEXT PRIMARY KEY, slot INTEGER NOT NULL UNIQUE)")
    spaces = [row[0] for row in cur.execute("SELECT DISTINCT space FROM vectors ORDER BY space").fetchall()]
    for slot, space in enumerate(spaces):
        cur.execute("INSERT INTO vector_spaces VALUES (?, ?)", (space, slot))
        create_vector_table(cur, slot)
        # a version 1 row may carry a blob longer than its dim (only dim values were read): keep those
        cur.execute(
            f"INSERT INTO {vector_table(slot)} (rid, data) SELECT r.rowid, CASE WHEN length(v.data) > 4 * v.dim "
            "THEN substr(v.data, 1, 4 * v.dim) ELSE v.data END FROM vectors v JOIN records r ON r.id = v.record_id "
            "WHERE v.space = ? ORDER BY r.rowid",
            (space,),
        )
    cur.execute("DROP TABLE vectors")
    cur.execute("DROP TABLE membership")  # drops membership_record with it
    # oplog: one row per op -> one row per (batch, index), the index's ops in logged order
    rows = cur.execute("SELECT seq, index_name, record_id, op FROM oplog ORDER BY n").fetchall()
    groups: dict[tuple[int, str], list[tuple[str, str]]] = {}
    for seq, index, rid, op in rows:
        if op not in OP_CODES:
            raise CorruptError(f"the oplog holds an unknown op {op!r}")
        groups.setdefault((int(seq), index), []).append((rid, op))
    cur.execute("DROP TABLE oplog")  # drops oplog_index_seq with it
    cur.execute("CREATE TABLE oplog (n INTEGER PRIMARY KEY AUTOINCREMENT, seq INTEGER NOT NULL, index_name TEXT NOT NULL, ops TEXT NOT NULL)")
    cur.execute("CREATE INDEX oplog_index_seq ON oplog (index_name, seq)")
    cur.executemany("INSERT INTO oplog (seq, index_name, ops) VALUES (?, ?, ?)", [(seq, index, pack_ops(e)) for (seq, index), e in sorted(groups.items())])
    ensure_vectors_view(cur, range(len(spaces)))
