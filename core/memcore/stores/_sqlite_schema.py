"""The tables of the SQLite store (schema version 4) and the migration of older files.

Version 2 wrote one row and two B-trees per record and space where version 1 wrote four
rows into eight B-trees (records, vectors, membership, oplog, each with a second index);
version 3 moves the vectors out of the database into one fixed-width float32 file per
space (:mod:`._sqlite_vector_files`), so that they are on disk once and an index can
memory-map them; version 4 writes no ``history`` row for an insert (``records.hseq``):


- ``records``: one row per record, its insertion order is the rowid (``AUTOINCREMENT``:
  a rowid is never reused). ``member_of`` holds the names of the indexes the record
  belongs to, as ``'|a|b|'`` (``'|'`` for none): membership is read with the record's row
  and written with it, not in a table of its own. ``hseq`` is the sequence number of the
  record's insert while that insert is its only version and is not written in ``history``
  (the version is the row itself: its text, metadata, scope and ``created_at``); the first
  change or delete of the record writes that version into ``history`` and sets ``hseq``
  to NULL (NULL too for a record whose versions are all rows: written before version 4,
  copied in with its history, or inserted while no history was kept);
- ``vector_spaces`` (name, slot, ``dim``, ``rows``: the committed length of the space's
  file) + per space ``vectors_<slot>`` (``rid`` the record's rowid -> ``row`` in the file)
  and ``free_<slot>`` (rows freed by committed writes, zeroed, reused before appending);
- ``oplog``: one row per batch and index, with that index's ops of the batch in order
  (``{"ids": [...], "ops": "aru"}``: add / remove / update). ``Store.ops_since`` returns
  exactly what version 1 returned (one op per record and index, in the order logged);
- ``links``, ``state`` and ``meta`` (schema version, last sequence number, log start) as
  in version 1; ``meta`` also holds ``definitions_seq`` once a batch changed an index
  definition (the number a reader's catch-up compares; absent: 0, no migration);
- ``vectors`` is a read-only view (``record_id, space, dim, row``) for people and tools
  reading the file with ``sqlite3``: row ``row`` of ``vectors/<slot>.f32`` holds the values.

A writer opening an older file migrates it in one transaction (all or nothing: a crash
leaves the old file as it was; the space files it was writing are rewritten by the next
attempt). A reader (``read_only``) cannot migrate and says so.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ..errors import CorruptError
from ._sqlite_vector_files import SpaceFile, space_file_path

__all__ = [
    "CHUNK",
    "chunks",
    "SCHEMA_VERSION",
    "SCHEMA",
    "HISTORY_SCHEMA",
    "ensure_vectors_view",
    "free_table",
    "vector_table",
    "create_vector_table",
    "json_text",
    "member_text",
    "members",
    "migrate",
    "open_schema",
    "member_text_of",
    "pack_adds",
    "pack_ops",
    "unpack_ops",
    "OP_CODES",
]

CHUNK = 500
"""How many ids one statement binds (SQLite host parameters)."""

SCHEMA_VERSION = 4

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    rowid INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    user_id TEXT, agent_id TEXT, run_id TEXT,
    created_at REAL NOT NULL, updated_at REAL NOT NULL,
    member_of TEXT NOT NULL DEFAULT '|',
    hseq INTEGER
);
CREATE TABLE IF NOT EXISTS vector_spaces (
    name TEXT PRIMARY KEY, slot INTEGER NOT NULL UNIQUE, dim INTEGER NOT NULL DEFAULT 0, rows INTEGER NOT NULL DEFAULT 0
);
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

HISTORY_SCHEMA = """
CREATE TABLE IF NOT EXISTS history (
    n INTEGER PRIMARY KEY, seq INTEGER NOT NULL, record_id TEXT NOT NULL, op TEXT NOT NULL,
    text TEXT, metadata TEXT, user_id TEXT, agent_id TEXT, run_id TEXT, at REAL NOT NULL, rid INTEGER
);
CREATE INDEX IF NOT EXISTS history_record ON history (record_id);
"""
"""The versions of every record (``Store.history``): one row per change of text, metadata or
scope, and delete, in write order, after the record's insert (a row once the record changed
or was deleted; until then ``records.hseq``). The latest version of a live record holds no
text or metadata (NULL: they are the record's row); a change copies the replaced ones into
it, a delete erases them all. ``rid`` is set on an insert kept in its row until then, written
at the record's first change or delete: the record's rowid (its place among the inserts of its
batch, which ``Store.history_ids`` orders by). Created with the file, or when a writer
first opens a file of the same schema version made before it existed (a reader of such a
file finds no history)."""

OP_CODES = {"add": "a", "remove": "r", "update": "u"}
_OP_NAMES = {code: name for name, code in OP_CODES.items()}


def chunks(seq: Sequence[Any]) -> list[Sequence[Any]]:
    """``seq`` in slices of :data:`CHUNK` ids (what one statement binds)."""
    return [seq[i : i + CHUNK] for i in range(0, len(seq), CHUNK)]


def members(text: str) -> set[str]:
    """The index names of a ``member_of`` value (``'|a|b|'``)."""
    return set(text[1:-1].split("|")) if len(text) > 1 else set()


def member_text_of(name: str) -> str:
    """The ``member_of`` value of a record in exactly one index."""
    return f"|{name}|"


def member_text(names: set[str]) -> str:
    """The ``member_of`` value of a set of index names (``'|'`` for none)."""
    if len(names) == 1:
        for name in names:
            return f"|{name}|"
    return "|" + "|".join(sorted(names)) + "|" if names else "|"


def _json_encoder() -> Any:
    """``json.dumps`` with its defaults, without building an encoder per call (the C encoder
    of the standard library, reused; None where it is missing)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    base = json.JSONEncoder()
    return make(None, base.default, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True)


_ENCODE = _json_encoder()


def json_text(value: Any) -> str:
    """``json.dumps(value)``: the same text, a third of the cost for small dicts."""
    if _ENCODE is not None and type(value) is dict:
        try:
            return "".join(_ENCODE(value, 0))
        except Exception:  # a circular or unencodable value: json.dumps raises the usual error
            pass
    return json.dumps(value)


def vector_table(slot: int) -> str:
    """The table of the space with this slot number."""
    return f"vectors_{int(slot)}"


def create_vector_table(db: sqlite3.Connection | sqlite3.Cursor, slot: int) -> None:
    """The tables of one space: ``vectors_<slot>`` (record rowid -> file row) and ``free_<slot>`` (freed rows)."""
    db.execute(f"CREATE TABLE IF NOT EXISTS {vector_table(slot)} (rid INTEGER PRIMARY KEY, row INTEGER NOT NULL)")
    db.execute(f"CREATE TABLE IF NOT EXISTS {free_table(slot)} (row INTEGER PRIMARY KEY)")


def free_table(slot: int) -> str:
    """The table of the free rows of the space with this slot number."""
    return f"free_{int(slot)}"


def ensure_vectors_view(db: sqlite3.Connection | sqlite3.Cursor, slots: Iterable[int]) -> None:
    """(Re)create the read-only ``vectors`` view over the space tables: which record has a
    vector in which space, of what dimension, at which row of the space's file."""
    slots = sorted(slots)
    db.execute("DROP TRIGGER IF EXISTS vectors_update")
    db.execute("DROP TRIGGER IF EXISTS vectors_delete")
    db.execute("DROP VIEW IF EXISTS vectors")
    parts = [
        f"SELECT r.id AS record_id, s.name AS space, s.dim AS dim, v.row AS row "
        f"FROM {vector_table(k)} v JOIN records r ON r.rowid = v.rid JOIN vector_spaces s ON s.slot = {k}"
        for k in slots
    ]
    body = " UNION ALL ".join(parts) or "SELECT NULL AS record_id, NULL AS space, NULL AS dim, NULL AS row WHERE 0"
    db.execute(f"CREATE VIEW vectors AS {body}")


def pack_ops(entries: list[tuple[str, str]]) -> str:
    """One oplog row's ``ops`` text from ``(record_id, op)`` pairs, in order."""
    return json.dumps({"ids": [rid for rid, _ in entries], "ops": "".join(OP_CODES[op] for _, op in entries)}, separators=(",", ":"))


def pack_adds(ids: list[str]) -> str:
    """:func:`pack_ops` of an ``add`` for each of ``ids`` (the same text)."""
    return json.dumps({"ids": ids, "ops": OP_CODES["add"] * len(ids)}, separators=(",", ":"))


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


def stored_version(db: sqlite3.Connection) -> int | None:
    """The file's schema version; None for a file without memcore's tables."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone() is None:
        return None
    row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return None if row is None else int(row[0])


def open_schema(db: sqlite3.Connection, read_only: bool, file: Path) -> int | None:
    """Create the tables of a new file, or migrate an older one in one transaction (writers
    only; the space files beside ``file``); refuse a newer one. Returns the version migrated
    from (None: nothing migrated)."""
    version = stored_version(db)
    if version == SCHEMA_VERSION:
        if not read_only:
            db.executescript(HISTORY_SCHEMA)
        return None
    if version is not None and version > SCHEMA_VERSION:
        raise CorruptError(f"store {file} has schema version {version}, this memcore reads {SCHEMA_VERSION}")
    if read_only:
        if version is None:
            raise CorruptError(f"{file} is not an initialised memcore store")
        raise CorruptError(f"store {file} has schema version {version}: open it once for writing (not read-only) to migrate it to {SCHEMA_VERSION}")
    if version is None:
        db.executescript(SCHEMA + HISTORY_SCHEMA)
    cur = db.cursor()
    cur.execute("BEGIN IMMEDIATE")
    try:
        if version is None:
            ensure_vectors_view(cur, [])
            cur.execute("INSERT OR IGNORE INTO meta VALUES ('seq', '0')")
        else:
            migrate(cur, version, file.parent)
            for statement in HISTORY_SCHEMA.split(";"):
                if statement.strip():
                    cur.execute(statement)
        cur.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        cur.execute("COMMIT")
    except BaseException:
        cur.execute("ROLLBACK")
        raise
    return version


def migrate(cur: sqlite3.Cursor, version: int, directory: Path) -> None:
    """Bring a store file from ``version`` to :data:`SCHEMA_VERSION` inside the caller's
    write transaction (the caller commits, or rolls back on any error); the space files are
    written in ``directory`` and synced before the caller commits."""
    if version not in (1, 2, 3):
        raise CorruptError(f"no migration from schema version {version}")
    if version == 1:
        _migrate_1_to_2(cur)
    if version <= 2:
        _migrate_2_to_3(cur, directory)
    _migrate_3_to_4(cur)


def _migrate_3_to_4(cur: sqlite3.Cursor) -> None:
    """``records.hseq`` (NULL: every version of the records already written stays a row of
    ``history``, as version 3 wrote it) and ``history.rid``; no table is rewritten."""
    cur.execute("ALTER TABLE records ADD COLUMN hseq INTEGER")
    if "history" in _tables(cur):  # else created by the caller, as a file made before it existed
        cur.execute("ALTER TABLE history ADD COLUMN rid INTEGER")


def _migrate_2_to_3(cur: sqlite3.Cursor, directory: Path) -> None:
    """Each space's blobs -> its file (in rowid order), the blob table -> ``rid -> row``.
    A blob that is not a vector of the space's width becomes a row of NaN: reading it is the
    CorruptError naming the record that version 2 raised."""
    cur.execute("DROP TRIGGER IF EXISTS vectors_update")
    cur.execute("DROP TRIGGER IF EXISTS vectors_delete")
    cur.execute("DROP VIEW IF EXISTS vectors")
    cur.execute("ALTER TABLE vector_spaces ADD COLUMN dim INTEGER NOT NULL DEFAULT 0")
    cur.execute("ALTER TABLE vector_spaces ADD COLUMN rows INTEGER NOT NULL DEFAULT 0")
    slots = [int(slot) for (slot,) in cur.execute("SELECT slot FROM vector_spaces ORDER BY slot").fetchall()]
    for slot in slots:
        table = vector_table(slot)
        old = f"v2_{table}"
        cur.execute(f"ALTER TABLE {table} RENAME TO {old}")
        create_vector_table(cur, slot)
        width = cur.execute(f"SELECT length(data) FROM {old} WHERE length(data) > 0 AND length(data) % 4 = 0 ORDER BY rid LIMIT 1").fetchone()
        if width is None:  # no readable vector: the space keeps no rows
            cur.execute(f"DROP TABLE {old}")
            continue
        dim = int(width[0]) // 4
        space = SpaceFile(space_file_path(directory, slot), dim, writable=True)
        try:
            space.truncate(0)  # what an earlier, interrupted migration wrote
            count = 0
            select = cur.connection.execute(f"SELECT rid, data FROM {old} ORDER BY rid")
            while True:
                chunk = select.fetchmany(4096)
                if not chunk:
                    break
                block = np.full((len(chunk), dim), np.nan, dtype=np.float32)
                for i, (_, data) in enumerate(chunk):
                    if isinstance(data, bytes) and len(data) == 4 * dim:
                        block[i] = np.frombuffer(data, dtype=np.float32)
                space.write(np.arange(count, count + len(chunk)), block)
                cur.executemany(f"INSERT INTO {table} (rid, row) VALUES (?, ?)", [(rid, count + i) for i, (rid, _) in enumerate(chunk)])
                count += len(chunk)
            space.sync()
        finally:
            space.close()
        cur.execute("UPDATE vector_spaces SET dim = ?, rows = ? WHERE slot = ?", (dim, count, slot))
        cur.execute(f"DROP TABLE {old}")
    ensure_vectors_view(cur, slots)


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
        cur.execute(f"CREATE TABLE {vector_table(slot)} (rid INTEGER PRIMARY KEY, data BLOB NOT NULL)")  # version 2's blobs
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
