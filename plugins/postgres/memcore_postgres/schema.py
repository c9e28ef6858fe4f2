"""The tables of one memory in its PostgreSQL schema (schema version 1).

- ``meta``: ``seq`` (the last batch's sequence number: each batch takes its row lock as
  its last step and holds it to its commit, so sequence numbers are dense and follow commit
  order; see :mod:`.writes`), ``log_start``, ``schema_version``, and once written
  ``forgotten_through`` and ``definitions_seq`` (the last batch that changed an index
  definition: what other processes' catch-up compares; absent until then, read as 0);
- ``records``: one row per record; ``n`` (an identity) is the insertion order, ``metadata``
  is ``jsonb`` (filters compile to SQL over it), ``member_of`` the names of the indexes the
  record belongs to (``text[]``);
- ``vector_spaces`` + one ``vectors_<slot>`` table per space: ``n`` (the record's) ->
  pgvector ``vector``, deleted with the record (``ON DELETE CASCADE``);
- ``links`` (source, target, relation) -> weight, with an index on ``target``;
- ``oplog``: one row per batch and index, the index's ops of the batch in order
  (``ids text[]``, ``ops`` one letter per id: ``a``dd, ``r``emove, ``u``pdate);
- ``state``: JSON text per (namespace, key).
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection, sql

__all__ = ["SCHEMA_VERSION", "create_schema", "vector_table", "OP_CODES", "OP_NAMES"]

SCHEMA_VERSION = 1

OP_CODES = {"add": "a", "remove": "r", "update": "u"}
OP_NAMES = {code: name for name, code in OP_CODES.items()}

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value bigint NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    n bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id text NOT NULL UNIQUE,
    text text NOT NULL,
    metadata jsonb NOT NULL,
    user_id text, agent_id text, run_id text,
    created_at double precision NOT NULL, updated_at double precision NOT NULL,
    member_of text[] NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS records_user ON records (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_member_of ON records USING gin (member_of);
CREATE TABLE IF NOT EXISTS vector_spaces (name text PRIMARY KEY, slot integer NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS links (
    source text NOT NULL, target text NOT NULL, relation text NOT NULL, weight double precision NOT NULL,
    PRIMARY KEY (source, target, relation)
);
CREATE INDEX IF NOT EXISTS links_target ON links (target);
CREATE TABLE IF NOT EXISTS oplog (
    n bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    seq bigint NOT NULL, index_name text NOT NULL, ids text[] NOT NULL, ops text NOT NULL
);
CREATE INDEX IF NOT EXISTS oplog_index_seq ON oplog (index_name, seq);
CREATE TABLE IF NOT EXISTS state (namespace text NOT NULL, key text NOT NULL, value text NOT NULL, PRIMARY KEY (namespace, key));
INSERT INTO meta VALUES ('seq', 0), ('log_start', 0), ('schema_version', 1) ON CONFLICT (key) DO NOTHING;
"""


def vector_table(slot: int) -> sql.Identifier:
    """The table of the space with this slot number."""
    return sql.Identifier(f"vectors_{int(slot)}")


def stored_version(conn: Connection[Any], schema: str) -> int | None:
    """The schema version of an existing memory schema; None when it has no tables yet.
    Takes no lock (a writer at work is never waited for)."""
    meta = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".meta',)).fetchone()
    if meta is None or meta[0] is None:
        return None
    row = conn.execute(sql.SQL("SELECT value FROM {}.meta WHERE key = 'schema_version'").format(sql.Identifier(schema))).fetchone()
    return None if row is None else int(row[0])


def create_schema(conn: Connection[Any], schema: str) -> int:
    """Create the schema and its tables when missing (one transaction, serialised with any
    other process doing the same by an advisory lock); returns the stored schema version.

    An existing memory is only read: no DDL runs against it (``CREATE INDEX IF NOT EXISTS``
    would lock ``records`` and could deadlock with a writer at work)."""
    version = stored_version(conn, schema)
    if version is not None:
        return version
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"memcore:{schema}",))
        # a schema an administrator created (and gave the store's role) is used as it is:
        # CREATE SCHEMA would need the CREATE privilege on the database even when it exists
        if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET LOCAL search_path = {}, public").format(sql.Identifier(schema)))
        for statement in filter(str.strip, _TABLES.split(";")):
            conn.execute(statement)  # fixed text, no parameters
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else SCHEMA_VERSION
