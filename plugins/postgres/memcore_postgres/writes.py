"""The write path of the ``postgres`` store: one transaction per batch.

A batch first takes the ``meta.seq`` row lock (``UPDATE ... RETURNING``): batches of every
process are serialised there, each gets the next sequence number, and numbers follow the
commit order (a reader that has seen ``seq`` has seen every batch up to it). Everything
the batch plans is then read under that lock, so the logged ops
(:func:`memcore.plugin.plan_ops`) describe exactly the rows as the batch finds them. Any
error rolls the whole batch back: nothing of it, not even its sequence number, remains.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from psycopg import Connection, sql

from memcore.plugin import Applied, NotFoundError, Op, Record, ValidationError, WriteBatch, involved_ids, plan_ops

from .filters import metadata_json
from .schema import OP_CODES, vector_table

__all__ = ["PostgresWrites", "SpaceTables"]


class SpaceTables:
    """The space -> table map, read from ``vector_spaces`` each time (another process may
    have added a space); a space's table is created by the first batch writing to it."""

    def __init__(self, schema: str):
        self.schema = schema

    def slots(self, conn: Connection[Any]) -> dict[str, int]:
        """Every space and its slot."""
        return {str(name): int(slot) for name, slot in conn.execute("SELECT name, slot FROM vector_spaces")}

    def items(self, conn: Connection[Any]) -> list[tuple[str, sql.Identifier]]:
        """``(space, table)`` of every space."""
        return [(name, vector_table(slot)) for name, slot in self.slots(conn).items()]

    def table(self, conn: Connection[Any], space: str, create: bool = False) -> sql.Identifier | None:
        """The table of ``space``; None when it has none, unless ``create`` (inside the
        writer's transaction, under the sequence lock): then it is created with the batch."""
        slots = self.slots(conn)
        slot = slots.get(space)
        if slot is None:
            if not create:
                return None
            slot = max(slots.values(), default=-1) + 1
            conn.execute("INSERT INTO vector_spaces VALUES (%s, %s)", (space, slot))
            conn.execute(
                sql.SQL("CREATE TABLE {} (n bigint PRIMARY KEY REFERENCES records (n) ON DELETE CASCADE, v vector NOT NULL)").format(vector_table(slot))
            )
        return vector_table(slot)


class PostgresWrites:
    """The write method of :class:`memcore_postgres.store.PostgresStore` (a part of it)."""

    read_only: bool
    _mutex: threading.RLock
    _spaces: SpaceTables
    pool: Any

    def apply(self, batch: WriteBatch) -> Applied:
        """Apply ``batch`` in one transaction (retried when that is safe; see :mod:`.connections`)."""
        if self.read_only:
            raise ValidationError("this store is open read-only")
        for index in (*batch.add_membership, *batch.remove_membership, *batch.drop_indexes):
            if not isinstance(index, str) or not index or "|" in index:
                raise ValidationError(f"index names are non-empty strings without '|', got {index!r}")
        for record in batch.upserts:
            if "\x00" in record.text or "\x00" in record.id:
                raise ValidationError(f"record {record.id!r}: PostgreSQL text cannot hold NUL characters")
        with self._mutex:
            applied: Applied = self.pool.write("applying a batch", lambda conn: self._apply(conn, batch))
            return applied

    def _apply(self, conn: Connection[Any], batch: WriteBatch) -> Applied:
        row = conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'seq' RETURNING value, pg_current_xact_id()::text").fetchone()
        assert row is not None
        seq = int(row[0])
        self.pool.note_xid(conn, str(row[1]))  # what Pool.write asks about when its COMMIT is cut
        deletes = list(dict.fromkeys(batch.deletes))
        link_sources: set[str] = set()
        if deletes:
            link_sources = {r[0] for r in conn.execute("SELECT DISTINCT source FROM links WHERE target = ANY(%s)", (deletes,))}
        involved = involved_ids(batch) | link_sources
        stored: dict[str, tuple[int, set[str]]] = {
            rid: (int(n), set(members))
            for rid, n, members in conn.execute("SELECT id, n, member_of FROM records WHERE id = ANY(%b::text[])", (list(involved),))
        }
        ops = plan_ops(batch, {rid: m for rid, (_, m) in stored.items()}, link_sources)
        upserts = {r.id: r for r in batch.upserts}  # a repeated id ends as its last occurrence
        self._check_references(conn, batch, stored, upserts)

        if deletes:
            conn.execute("DELETE FROM links WHERE source = ANY(%s) OR target = ANY(%s)", (deletes, deletes))
            conn.execute("DELETE FROM records WHERE id = ANY(%s)", (deletes,))  # vectors go with them (ON DELETE CASCADE)
            for rid in deletes:
                stored.pop(rid, None)
        if upserts:
            self._write_records(conn, batch.upserts, upserts, stored)
        for index, rids in batch.remove_membership.items():
            if rids:
                conn.execute(
                    "UPDATE records SET member_of = array_remove(member_of, %s) WHERE id = ANY(%b::text[]) AND member_of @> ARRAY[%s::text]",
                    (index, list(rids), index),
                )
        for index, rids in batch.add_membership.items():
            if rids:
                conn.execute(
                    "UPDATE records SET member_of = array_append(member_of, %s) WHERE id = ANY(%b::text[]) AND NOT member_of @> ARRAY[%s::text]",
                    (index, list(dict.fromkeys(rids)), index),
                )
        for index in batch.drop_indexes:
            conn.execute("UPDATE records SET member_of = array_remove(member_of, %s) WHERE member_of @> ARRAY[%s::text]", (index, index))
            conn.execute("DELETE FROM oplog WHERE index_name = %s", (index,))
        for (namespace, key), value in batch.state.items():
            if value is None:
                conn.execute("DELETE FROM state WHERE namespace = %s AND key = %s", (namespace, key))
            else:
                conn.execute(
                    "INSERT INTO state VALUES (%s, %s, %s) ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value", (namespace, key, _json(value))
                )
        by_index: dict[str, tuple[list[str], list[str]]] = {}
        for index, rid, op in ops:
            entry = by_index.setdefault(index, ([], []))
            entry[0].append(rid)
            entry[1].append(OP_CODES[op])
        if by_index:
            cur = conn.cursor()
            cur.executemany(
                "INSERT INTO oplog (seq, index_name, ids, ops) VALUES (%s, %s, %s, %s)",
                [(seq, index, ids, "".join(codes)) for index, (ids, codes) in by_index.items()],
            )
        return Applied(seq, tuple(Op(seq, index, rid, op) for index, rid, op in ops))

    def _check_references(self, conn: Connection[Any], batch: WriteBatch, stored: dict[str, tuple[int, set[str]]], upserts: dict[str, Record]) -> None:
        """Ids given membership and link targets must exist after the batch (checked before anything is written)."""
        deleted = set(batch.deletes)

        def alive(rid: str) -> bool:
            return rid in upserts or (rid in stored and rid not in deleted)

        for rids in batch.add_membership.values():
            for rid in rids:
                if not alive(rid):
                    raise NotFoundError(f"record {rid!r} does not exist")
        targets = sorted({link.target for r in upserts.values() for link in r.links} - upserts.keys())
        for rid in targets:
            if rid in deleted:
                raise NotFoundError(f"link target {rid!r} does not exist")
        if targets:
            found = {r[0] for r in conn.execute("SELECT id FROM records WHERE id = ANY(%s)", (targets,))}
            missing = [rid for rid in targets if rid not in found]
            if missing:
                raise NotFoundError(f"link target {missing[0]!r} does not exist")

    def _write_records(self, conn: Connection[Any], records: Sequence[Record], last: dict[str, Record], stored: dict[str, tuple[int, set[str]]]) -> None:
        """Rewrite stored records in place (their position and ``created_at`` stay), insert
        new ones in batch order (a repeated id keeps its first occurrence's ``created_at``),
        then their vectors and links."""
        fresh = [r for r in last.values() if r.id not in stored]
        old = [r for r in last.values() if r.id in stored]
        numbers = {rid: n for rid, (n, _) in stored.items() if rid in last}
        created: dict[str, float] = {}
        if len(last) != len(records):
            for r in reversed(records):
                created[r.id] = r.created_at
        if old:
            old_numbers = [numbers[r.id] for r in old]
            for _, table in self._spaces.items(conn):
                conn.execute(sql.SQL("DELETE FROM {} WHERE n = ANY(%s)").format(table), (old_numbers,))
            conn.execute("DELETE FROM links WHERE source = ANY(%s)", ([r.id for r in old],))
            conn.execute(
                "UPDATE records r SET text = u.text, metadata = u.metadata::jsonb, user_id = u.user_id, agent_id = u.agent_id, run_id = u.run_id, "
                "updated_at = u.updated_at FROM unnest(%b::bigint[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::float8[]) "
                "AS u(n, text, metadata, user_id, agent_id, run_id, updated_at) WHERE r.n = u.n",
                (old_numbers, *_columns(old, ("text", "metadata", "user_id", "agent_id", "run_id", "updated_at"))),
            )
        if fresh:
            cols = _columns(fresh, ("id", "text", "metadata", "user_id", "agent_id", "run_id", "created_at", "updated_at"), created)
            rows = conn.execute(
                "INSERT INTO records (id, text, metadata, user_id, agent_id, run_id, created_at, updated_at) "
                "SELECT u.id, u.text, u.metadata::jsonb, u.user_id, u.agent_id, u.run_id, u.created_at, u.updated_at "
                "FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::float8[], %b::float8[]) "
                "WITH ORDINALITY AS u(id, text, metadata, user_id, agent_id, run_id, created_at, updated_at, k) ORDER BY u.k RETURNING id, n",
                cols,
            ).fetchall()
            numbers.update((rid, int(n)) for rid, n in rows)
        by_space: dict[str, list[tuple[int, Any]]] = {}
        for r in last.values():
            for space, vector in r.vectors.items():
                by_space.setdefault(space, []).append((numbers[r.id], vector))
        for space, rows_of_space in by_space.items():
            target = self._spaces.table(conn, space, create=True)
            assert target is not None
            with conn.cursor().copy(sql.SQL("COPY {} (n, v) FROM STDIN WITH (FORMAT BINARY)").format(target)) as copy:
                copy.set_types(["int8", "vector"])
                for n, vector in rows_of_space:
                    copy.write_row((n, vector))
        links = [(r.id, link.target, link.relation, float(link.weight)) for r in last.values() for link in r.links]
        if links:
            conn.execute(
                "INSERT INTO links SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::float8[]) "
                "ON CONFLICT (source, target, relation) DO UPDATE SET weight = EXCLUDED.weight",
                tuple(list(column) for column in zip(*links)),
            )


def _scope_part(name: str) -> Callable[[Record], Any]:
    def get(r: Record) -> Any:
        return None if r.scope is None else getattr(r.scope, name)

    return get


_COLUMN: dict[str, Callable[[Record], Any]] = {
    "id": lambda r: r.id,
    "text": lambda r: r.text,
    "metadata": lambda r: metadata_json(r.metadata),
    "user_id": _scope_part("user_id"),
    "agent_id": _scope_part("agent_id"),
    "run_id": _scope_part("run_id"),
    "created_at": lambda r: r.created_at,
    "updated_at": lambda r: r.updated_at,
}
"""How each column of ``records`` is read from a :class:`Record`."""


def _columns(records: Sequence[Record], names: Sequence[str], created: dict[str, float] | None = None) -> tuple[list[Any], ...]:
    """One list per column name, in record order (what ``unnest`` takes); ``created``
    overrides ``created_at`` per id."""
    out: list[list[Any]] = []
    for name in names:
        if name == "created_at" and created:
            out.append([created[r.id] for r in records])
        else:
            out.append(list(map(_COLUMN[name], records)))
    return tuple(out)


def _json(value: Any) -> str:
    import json

    return json.dumps(value)
