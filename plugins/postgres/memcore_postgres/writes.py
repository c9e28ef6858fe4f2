"""The write path of the ``postgres`` store: one transaction per batch, its sequence number last.

A batch runs in three round trips (psycopg pipelines), its parameters built before the
transaction opens (:class:`~.prepared.PreparedBatch`):

1. **Lock and read.** The stored rows of every record the batch touches are locked
   (``SELECT ... ORDER BY id FOR UPDATE``: one order for every writer), the link targets
   it names ``FOR KEY SHARE`` (they cannot be deleted under it), and the records linking
   to a deleted record ``FOR SHARE`` (their membership cannot change). What the batch
   plans (:func:`memcore.plugin.plan_ops`, the insert/rewrite split, the reference checks)
   is read under these locks, so it is exactly what the rows hold when the batch commits.
2. **Write.** Records, vectors, links, membership and state; then, as the **last step**,
   the ``meta.seq`` row lock (``UPDATE ... RETURNING``): the batch gets the next sequence
   number and writes its op log rows with it.
3. **Commit.**

Batches of any number of processes therefore run at once, row locks keeping apart only
those that touch the same records; they queue only on the sequence row, which each holds
from its number to its commit, so numbers stay dense and follow the commit order (a reader
that has seen ``seq`` has seen every batch up to it, and none after). Two batches inserting
the same new id: the second waits on the unique index until the first commits, fails
with a unique violation and runs again (then it finds the record and rewrites it);
deadlocks and lock timeouts are retried the same way (:mod:`.connections`), and are
:class:`~memcore.LockedError` once the retries run out. Any error rolls the whole batch
back: nothing of it, not even its sequence number, remains.

A batch dropping an index takes ``records`` in ``EXCLUSIVE`` mode first (readers go on):
it rewrites every member, so it runs alone among writers.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable

from psycopg import Connection, Cursor, sql

from memcore.plugin import Applied, NotFoundError, Op, ValidationError, WriteBatch, plan_ops

from .prepared import PreparedBatch
from .schema import OP_CODES, vector_table

__all__ = ["PostgresWrites", "SpaceTables"]

Stored = dict[str, tuple[int, set[str]]]
"""id -> (n, indexes it belongs to) of the stored records a batch read under its locks."""


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

    def table(self, conn: Connection[Any], space: str) -> sql.Identifier | None:
        """The table of ``space``; None when it has none."""
        slot = self.slots(conn).get(space)
        return None if slot is None else vector_table(slot)

    def create(self, conn: Connection[Any], spaces: Iterable[str], known: dict[str, int]) -> dict[str, int]:
        """``known`` with a table for each of ``spaces`` it lacks, created in the writer's
        transaction (between writers, an advisory lock serialises the creation; the map is
        read again under it)."""
        missing = [space for space in spaces if space not in known]
        if not missing:
            return known
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"memcore:{self.schema}:vector_spaces",))
        known = self.slots(conn)
        for space in missing:
            if space in known:
                continue  # another writer created it and committed
            slot = max(known.values(), default=-1) + 1
            conn.execute("INSERT INTO vector_spaces VALUES (%s, %s)", (space, slot))
            conn.execute(
                sql.SQL("CREATE TABLE {} (n bigint PRIMARY KEY REFERENCES records (n) ON DELETE CASCADE, v vector NOT NULL)").format(vector_table(slot))
            )
            known[space] = slot
        return known


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
        prepared = PreparedBatch(batch)
        with self._mutex:
            applied: Applied = self.pool.write("applying a batch", lambda conn: self._apply(conn, prepared), begin=False)
            return applied

    def _apply(self, conn: Connection[Any], p: PreparedBatch) -> Applied:
        batch = p.batch
        stored, found_targets, link_sources, slots = self._lock_and_read(conn, p)
        ops = plan_ops(batch, {rid: members for rid, (_, members) in stored.items()}, link_sources)
        _check_references(p, stored, found_targets)
        for rid in p.deletes:
            stored.pop(rid, None)  # an id deleted and upserted by the batch is inserted anew
        if p.vectors:
            slots = self._spaces.create(conn, p.vectors, slots)
        with conn.pipeline():
            self._write(conn, p, stored, slots)
            seq_cursor = conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'seq' RETURNING value")
            by_index: dict[str, tuple[list[str], list[str]]] = {}
            for index, rid, op in ops:
                entry = by_index.setdefault(index, ([], []))
                entry[0].append(rid)
                entry[1].append(OP_CODES[op])
            if by_index:
                conn.cursor().executemany(
                    "INSERT INTO oplog (seq, index_name, ids, ops) VALUES ((SELECT value FROM meta WHERE key = 'seq'), %s, %s, %s)",
                    [(index, ids, "".join(codes)) for index, (ids, codes) in by_index.items()],
                )
            if batch.forget_scopes:  # the op log keeps no forgotten id past the next prune (log retention aside)
                conn.execute(FORGOTTEN_THROUGH)
            if batch.changes_definitions():  # what the other processes' catch-up compares (LogTail.definitions)
                conn.execute(DEFINITIONS_CHANGED)
        row = seq_cursor.fetchone()
        assert row is not None
        seq = int(row[0])
        return Applied(seq, tuple(Op(seq, index, rid, op) for index, rid, op in ops))

    def _lock_and_read(self, conn: Connection[Any], p: PreparedBatch) -> tuple[Stored, set[str], set[str], dict[str, int]]:
        """Open the transaction, lock the rows the batch depends on and read them (one round
        trip; one more when the batch deletes records that others link to)."""
        with conn.pipeline():
            conn.execute("BEGIN")
            if p.batch.drop_indexes:
                conn.execute("LOCK TABLE records IN EXCLUSIVE MODE")
            xid = conn.execute("SELECT pg_current_xact_id()::text")
            locked = _maybe(conn, "SELECT id, n, member_of FROM records WHERE id = ANY(%b::text[]) ORDER BY id FOR UPDATE", p.involved)
            targets = _maybe(conn, "SELECT id FROM records WHERE id = ANY(%b::text[]) ORDER BY id FOR KEY SHARE", p.targets)
            sources = _maybe(conn, "SELECT DISTINCT source FROM links WHERE target = ANY(%b::text[])", p.deletes)
            spaces = conn.execute("SELECT name, slot FROM vector_spaces") if p.upserts else None
        got = xid.fetchone()
        assert got is not None
        self.pool.note_xid(conn, str(got[0]))  # what Pool.write asks about when its COMMIT is cut
        stored: Stored = {rid: (int(n), set(members)) for rid, n, members in (locked.fetchall() if locked else ())}
        found_targets = {row[0] for row in targets.fetchall()} if targets else set()
        link_sources = {row[0] for row in sources.fetchall()} if sources else set()
        slots = {str(name): int(slot) for name, slot in spaces.fetchall()} if spaces else {}
        # records linking to a deleted one get an "update": hold them still, then read the
        # links again (a source may have dropped its link meanwhile; none can be added: the
        # target is locked)
        tried: set[str] = set()
        while unread := sorted(link_sources - stored.keys() - tried):
            tried.update(unread)
            with conn.pipeline():
                held = conn.execute("SELECT id, n, member_of FROM records WHERE id = ANY(%b::text[]) ORDER BY id FOR SHARE", (unread,))
                again = conn.execute("SELECT DISTINCT source FROM links WHERE target = ANY(%b::text[])", (p.deletes,))
            stored.update((rid, (int(n), set(members))) for rid, n, members in held.fetchall())
            link_sources = {row[0] for row in again.fetchall()}
        return stored, found_targets, link_sources, slots

    def _write(self, conn: Connection[Any], p: PreparedBatch, stored: Stored, slots: dict[str, int]) -> None:
        """Queue the batch's writes on ``conn`` (inside a pipeline): deletes, records rewritten
        in place (their ``n`` and ``created_at`` stay) and inserted in batch order, vectors,
        links, membership, dropped indexes, state."""
        batch = p.batch
        if p.deletes:
            conn.execute("DELETE FROM links WHERE source = ANY(%b::text[]) OR target = ANY(%b::text[])", (p.deletes, p.deletes))
            conn.execute("DELETE FROM records WHERE id = ANY(%b::text[])", (p.deletes,))  # vectors go with them (ON DELETE CASCADE)
        old, fresh = p.split(stored)
        dropped = set(batch.drop_indexes)
        fresh_ids = {p.upserts[i].id for i in fresh}
        if old:
            old_ids = [p.upserts[i].id for i in old]
            old_numbers = [stored[rid][0] for rid in old_ids]
            for slot in slots.values():
                conn.execute(sql.SQL("DELETE FROM {} WHERE n = ANY(%b::int8[])").format(vector_table(slot)), (old_numbers,))
            conn.execute("DELETE FROM links WHERE source = ANY(%b::text[])", (old_ids,))
            conn.execute(
                "UPDATE records r SET text = u.text, metadata = u.metadata::jsonb, user_id = u.user_id, agent_id = u.agent_id, run_id = u.run_id, "
                "updated_at = u.updated_at FROM unnest(%b::int8[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::float8[]) "
                "AS u(n, text, metadata, user_id, agent_id, run_id, updated_at) WHERE r.n = u.n",
                (old_numbers, *p.column_rows(old, ("text", "metadata", "user_id", "agent_id", "run_id", "updated_at"))),
            )
        if fresh:
            # a new record is inserted with the memberships the batch gives it (no second row version)
            members: dict[str, list[str]] = {}
            for index, rids in batch.add_membership.items():
                if index not in dropped:
                    for rid in rids:
                        if rid in fresh_ids and index not in members.setdefault(rid, []):
                            members[rid].append(index)
            member_of = [_array_literal(members.get(p.upserts[i].id, ())) for i in fresh]
            conn.execute(
                "INSERT INTO records (id, text, metadata, user_id, agent_id, run_id, created_at, updated_at, member_of) "
                "SELECT u.id, u.text, u.metadata::jsonb, u.user_id, u.agent_id, u.run_id, u.created_at, u.updated_at, u.member_of::text[] "
                "FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::float8[], %b::float8[], %b::text[]) "
                "WITH ORDINALITY AS u(id, text, metadata, user_id, agent_id, run_id, created_at, updated_at, member_of, k) ORDER BY u.k",
                (*p.column_rows(fresh, ("id", "text", "metadata", "user_id", "agent_id", "run_id", "created_at", "updated_at")), member_of),
            )
        for space, (ids, vectors) in p.vectors.items():
            conn.execute(
                sql.SQL("INSERT INTO {} (n, v) SELECT r.n, u.v FROM unnest(%b::text[], %b::vector[]) AS u(id, v) JOIN records r ON r.id = u.id").format(
                    vector_table(slots[space])
                ),
                (ids, vectors),
            )
        if p.links:
            conn.execute(
                "INSERT INTO links SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::float8[]) "
                "ON CONFLICT (source, target, relation) DO UPDATE SET weight = EXCLUDED.weight",
                p.links,
            )
        for index, rids in batch.remove_membership.items():
            held = [rid for rid in rids if rid not in fresh_ids]  # a new record has only the batch's adds
            if held:
                conn.execute(
                    "UPDATE records SET member_of = array_remove(member_of, %s) WHERE id = ANY(%b::text[]) AND member_of @> ARRAY[%s::text]",
                    (index, held, index),
                )
        for index, rids in batch.add_membership.items():
            rest = [rid for rid in dict.fromkeys(rids) if rid not in fresh_ids]
            if rest:
                conn.execute(
                    "UPDATE records SET member_of = array_append(member_of, %s) WHERE id = ANY(%b::text[]) AND NOT member_of @> ARRAY[%s::text]",
                    (index, rest, index),
                )
        for index in batch.drop_indexes:
            conn.execute("UPDATE records SET member_of = array_remove(member_of, %s) WHERE member_of @> ARRAY[%s::text]", (index, index))
            conn.execute("DELETE FROM oplog WHERE index_name = %s", (index,))
        for namespace, key, value in p.state:
            if value is None:
                conn.execute("DELETE FROM state WHERE namespace = %s AND key = %s", (namespace, key))
            else:
                conn.execute("INSERT INTO state VALUES (%s, %s, %s) ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value", (namespace, key, value))


def _maybe(conn: Connection[Any], query: str, ids: list[str]) -> Cursor[Any] | None:
    """``query`` over ``ids`` (queued in the pipeline); None, and nothing sent, without ids."""
    return conn.execute(query, (ids,)) if ids else None


def _array_literal(items: Iterable[str]) -> str:
    """A PostgreSQL ``text[]`` literal of ``items`` (each quoted, ``"`` and ``\\`` escaped)."""
    return "{" + ",".join('"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"' for item in items) + "}"


FORGOTTEN_THROUGH = (
    "INSERT INTO meta VALUES ('forgotten_through', (SELECT value FROM meta WHERE key = 'seq')) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
)
"""Note the batch's sequence number as the last one that forgot a scope (``meta``)."""

DEFINITIONS_CHANGED = (
    "INSERT INTO meta VALUES ('definitions_seq', (SELECT value FROM meta WHERE key = 'seq')) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
)
"""Note the batch's sequence number as the last one that changed an index definition
(``meta``; absent until one did: read as 0)."""


def _check_references(p: PreparedBatch, stored: Stored, found_targets: set[str]) -> None:
    """Ids given membership and link targets must exist after the batch (checked before anything is written)."""
    deleted = set(p.deletes)
    upserted = {r.id for r in p.upserts}

    def alive(rid: str) -> bool:
        return rid in upserted or (rid in stored and rid not in deleted)

    for rids in p.batch.add_membership.values():
        for rid in rids:
            if not alive(rid):
                raise NotFoundError(f"record {rid!r} does not exist")
    for rid in p.targets:
        if rid in deleted:
            raise NotFoundError(f"link target {rid!r} does not exist")
    missing = [rid for rid in p.targets if rid not in found_targets]
    if missing:
        raise NotFoundError(f"link target {missing[0]!r} does not exist")
