"""The write path of the SQLite store: :class:`SQLiteWrites` (applying a
:class:`~memcore.stores._store.WriteBatch` atomically, the op log) and the writer lock.

:class:`SQLiteWrites` is a part of :class:`memcore.stores._sqlite.SQLiteStore` (its
connection, caches and locks are the store's; see that module for the tables). One process
writes a collection: :class:`WriterLock` is an exclusive ``flock`` on the collection
*directory* inode: it cannot be bypassed by deleting a file (``writer.lock`` only tells who
holds it).
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import Any, Collection, Iterator, Protocol, Sequence

import numpy as np

from .._util.log import get_logger
from ..errors import DimensionError, LockedError, NotFoundError, ValidationError
from ..model._record import Record, Scope
from ..model._record_rows import RecordRows, metadata_texts, stacked
from ._sqlite_schema import chunks as _chunks, json_text as _json_text, member_text as _member_text, member_text_of, members as _members, pack_adds, pack_ops
from ._sqlite_vectors import Space, SpaceSlots, check_dim
from ._sqlite_row_sets import RowSets
from ._store import AddedOps, Applied, WriteBatch, involved_ids, make_ops, plan_ops

log = get_logger("memcore.store")

__all__ = ["SQLiteWrites", "WriterLock", "LOCK_NOTE"]

_F32 = np.dtype(np.float32)
_dtype = attrgetter("dtype")
_vectors_of = attrgetter("vectors")
_ndim = attrgetter("ndim")
_id_of, _text_of, _metadata_of, _scope_of = attrgetter("id"), attrgetter("text"), attrgetter("metadata"), attrgetter("scope")
_created_of, _updated_of = attrgetter("created_at"), attrgetter("updated_at")


LOCK_NOTE = "writer.lock"
"""File that names the writer's pid (informative only: the lock is on the directory)."""


class WriterLock:
    """An exclusive, non-blocking ``flock`` on the collection directory itself.

    Deleting ``writer.lock`` (or any file) does not release it; the kernel drops it when
    the holder closes it or dies, so a crashed writer never leaves a stale lock.
    """

    def __init__(self, directory: Path):
        self.directory = directory
        self.fd: int | None = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            holder = ""
            try:
                holder = f" (pid {(directory / LOCK_NOTE).read_text().strip()})"
            except OSError:
                pass
            raise LockedError(
                f"collection at {directory} is open for writing by another process{holder}; open it read-only or close the other writer"
            ) from None
        try:
            (directory / LOCK_NOTE).write_text(str(os.getpid()))
        except OSError:
            pass  # informative only

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def _record_rows(fresh: list[Record], created: dict[str, float], member: dict[str, str], hseq: int | None) -> Iterator[tuple[Any, ...]]:
    """The ``records`` row of each new record, made as ``executemany`` binds it (one tuple
    per record, nothing else, and none of them kept alive: this runs for every record inserted).

    ``hseq``: the batch's sequence number when its inserts are versions kept in their rows
    (None: no history kept); a record whose ``created_at`` is not its ``updated_at`` (an id
    repeated in the batch, a copied record) gets NULL: its insert is written in ``history``."""
    for r in fresh:
        scope, rid = r.scope, r.id
        made = created[rid] if created else r.created_at
        yield (
            rid,
            r.text,
            _json_text(r.metadata),
            None if scope is None else scope.user_id,
            None if scope is None else scope.agent_id,
            None if scope is None else scope.run_id,
            made,
            r.updated_at,
            member.get(rid, "|"),
            hseq if made == r.updated_at else None,
        )


_INSERT_RECORD = (
    "INSERT INTO records (id, text, metadata, user_id, agent_id, run_id, created_at, updated_at, member_of, hseq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_PLAIN = (
    "INSERT INTO records (id, text, metadata, user_id, agent_id, run_id, created_at, updated_at, member_of, hseq) "
    "VALUES (?1, ?2, ?3, NULL, NULL, NULL, ?4, ?4, ?5, ?6)"
)
"""The insert of an unscoped record whose ``created_at`` is its ``updated_at``: six values
bound per record instead of ten (binding is most of what ``executemany`` spends in Python)."""
_INSERT_SCOPED = (
    "INSERT INTO records (id, text, metadata, user_id, agent_id, run_id, created_at, updated_at, member_of, hseq) "
    "VALUES (?1, ?2, ?3, ?7, ?8, ?9, ?4, ?4, ?5, ?6)"
)


def _plain_record_rows(fresh: list[Record], member: dict[str, str], hseq: int | None) -> tuple[str, Iterator[tuple[Any, ...]]] | None:
    """:func:`_record_rows` for the common batch -- every record of one scope (or none),
    each one's ``created_at`` its ``updated_at`` (no id repeated in the batch) -- zipped from
    columns with C-level passes, with the statement that takes them (the stamp bound once,
    no scope bound for unscoped records); None for any other batch."""
    scopes = {*map(_scope_of, fresh)}
    if len(scopes) != 1:
        return None
    scope = next(iter(scopes))
    created = list(map(_created_of, fresh))
    if created != list(map(_updated_of, fresh)):
        return None
    ids = list(map(_id_of, fresh))
    columns = (
        ids,
        map(_text_of, fresh),
        metadata_texts(fresh) or map(_json_text, map(_metadata_of, fresh)),
        created,
        map(member.get, ids, repeat("|")),
        repeat(hseq),
    )
    if scope is None:
        return _INSERT_PLAIN, zip(*columns)
    return _INSERT_SCOPED, zip(*columns, *map(repeat, _scope_row(scope)))


def _matrix(space: str, vectors: list[Any]) -> np.ndarray:
    """The vectors of one space as one ``(n, dim)`` float32 matrix (one copy); vectors of
    different lengths are a DimensionError (a space has one dimension)."""
    if (
        {*map(type, vectors)} == {np.ndarray}
        and {*map(id, map(_dtype, vectors))} == {id(_F32)}
        and {*map(_ndim, vectors)} == {1}
        and len({*map(len, vectors)}) == 1
    ):
        return np.concatenate(vectors).reshape(len(vectors), len(vectors[0]))  # np.stack's result, without its per-row Python
    column = [np.asarray(v, dtype=np.float32).reshape(-1) for v in vectors]
    widths = {len(v) for v in column}
    if len(widths) != 1:
        raise DimensionError(f"vectors of space {space!r} of different lengths {sorted(widths)[:5]} in one batch: a space has one dimension")
    return np.stack(column)


_INSERT_RUN = "INSERT INTO {table} (rid, row) WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?3) SELECT ?1 + i, ?2 + i FROM k"
"""The references of ``?3`` records of consecutive rowids from ``?1`` to consecutive rows from ``?2``."""


def _consecutive(rids: list[int], rows: np.ndarray) -> bool:
    """Both the rowids and the file rows are runs of consecutive numbers (a batch of new
    records appended to the space's file)."""
    n = len(rids)
    return (
        n > 1
        and rids[-1] - rids[0] == n - 1
        and int(rows[-1]) - int(rows[0]) == n - 1
        and rids == list(range(rids[0], rids[0] + n))
        and bool((np.diff(rows) == 1).all())
    )


class _Pending:
    """What one batch does to the space files, undone when it rolls back: the rows it
    wrote (``reused`` free rows, appended past ``before``), the rows it frees (zeroed once
    it committed) and per space the ids, rows and vectors it wrote (the writer's row memo)."""

    def __init__(self) -> None:
        self.before: dict[int, int] = {}
        self.reused: dict[int, list[int]] = {}
        self.freed: dict[int, list[int]] = {}
        self.spaces: dict[int, Space] = {}
        self.rows: dict[str, tuple[list[str], np.ndarray, np.ndarray]] = {}


def rollback(db: sqlite3.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already done so (it does by itself
    after some errors, a full disk among them: a second ROLLBACK would then hide the cause);
    a failing ROLLBACK is logged, never raised over the error that led to it."""
    if not db.in_transaction:
        return
    try:
        db.execute("ROLLBACK")
    except sqlite3.Error as exc:
        log.warning("store.rollback_failed", error=str(exc))


def _scope_row(scope: Scope | None) -> tuple[str | None, str | None, str | None]:
    return (None, None, None) if scope is None else (scope.user_id, scope.agent_id, scope.run_id)


class _ForgetsRows(Protocol):
    """What the write path needs of the store's row cache."""

    def forget(self, ids: Collection[str]) -> None:
        """Forget the cached rows of ``ids`` (a batch is about to change them)."""

    def clear(self) -> None:
        """Forget every cached row."""


class SQLiteWrites:
    """The write methods of :class:`memcore.stores._sqlite.SQLiteStore` (a part of it, not a
    store by itself: the attributes below are the store's)."""

    db: sqlite3.Connection
    read_only: bool
    keeps_history: bool
    _mutex: threading.RLock
    _seq: int | None
    _probe: tuple[int, dict[str, tuple[int, str] | None]] | None
    _rows: _ForgetsRows
    _spaces: SpaceSlots
    _sync_files: bool
    _pending: _Pending
    _row_memo: tuple[int, dict[str, tuple[list[str], np.ndarray, np.ndarray]]] | None
    _row_sets: RowSets

    def last_seq(self) -> int:
        """The store's last sequence number (the store answers it)."""
        raise NotImplementedError

    def apply(self, batch: WriteBatch) -> Applied:
        if self.read_only:
            raise ValidationError("this store is open read-only")
        for index in (*batch.add_membership, *batch.remove_membership, *batch.drop_indexes):
            if not isinstance(index, str) or not index or "|" in index:
                raise ValidationError(f"index names are non-empty strings without '|', got {index!r}")
        with self._mutex:
            cur = self.db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            self._row_sets.drop_file()  # stale from this write on (and a forget leaves none of its sets)
            probe, self._probe = self._probe, None
            pending = self._pending = _Pending()
            self._row_memo = None
            try:
                applied = self._apply(cur, batch, probe)
                if self._sync_files:  # the rows the transaction references are on disk before it commits
                    for slot in pending.before:
                        self._spaces.file(pending.spaces[slot]).sync()
                cur.execute("COMMIT")
                self._seq = applied.seq
            except BaseException:
                self._seq = None  # read again
                rollback(self.db)
                self._undo_files(pending)
                self._spaces.forget()  # a space created by the failed batch is gone again
                raise
            self._zero_freed(pending)
            if pending.rows:
                self._row_memo = (applied.seq, pending.rows)
            return applied

    def _undo_files(self, pending: _Pending) -> None:
        """After a rollback: cut each file back to its committed length and zero the free
        rows the batch wrote (they stay free); a failure here is logged (the next open does it)."""
        for slot, before in pending.before.items():
            try:
                handle = self._spaces.file(pending.spaces[slot])
                handle.zero(pending.reused.get(slot, []))
                handle.truncate(before)
            except OSError as exc:
                log.warning("store.vector_undo_failed", slot=slot, error=str(exc), action="done at the next open")

    def _zero_freed(self, pending: _Pending) -> None:
        """After a commit: zero the rows it freed (a crash before this is caught up at the next open)."""
        for slot, rows in pending.freed.items():
            if rows:
                try:
                    self._spaces.file(pending.spaces[slot]).zero(rows)
                except OSError as exc:
                    log.warning("store.vector_zero_failed", slot=slot, error=str(exc), action="done at the next open")

    def _stored_rows(
        self, cur: sqlite3.Cursor, ids: Sequence[str], probe: tuple[int, dict[str, tuple[int, str] | None]] | None = None
    ) -> dict[str, tuple[int, str]]:
        """``id -> (rowid, member_of)`` of the stored ones among ``ids``.

        ``probe``: what the writer's last :meth:`get` read. While the sequence number has
        not moved since (only this process writes, every write moves it) it is still true,
        and only the ids it did not cover are looked up: ``Collection.insert`` reads its
        ids to compare contents just before writing them, the store does not read them twice."""
        out: dict[str, tuple[int, str]] = {}
        if probe is not None and probe[0] == self._seq:
            known = probe[1]
            unknown = []
            for rid in ids:
                if rid in known:
                    row = known[rid]
                    if row is not None:
                        out[rid] = row
                else:
                    unknown.append(rid)
            ids = unknown
        for chunk in _chunks(ids):
            for rid, rowid, member_of in cur.execute(f"SELECT id, rowid, member_of FROM records WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                out[rid] = (rowid, member_of)
        return out

    def _apply(self, cur: sqlite3.Cursor, batch: WriteBatch, probe: tuple[int, dict[str, tuple[int, str] | None]] | None = None) -> Applied:
        seq = self.last_seq() + 1
        deletes = list(dict.fromkeys(batch.deletes))
        link_sources: set[str] = set()
        for chunk in _chunks(deletes):
            link_sources.update(r[0] for r in cur.execute(f"SELECT source FROM links WHERE target IN ({','.join('?' * len(chunk))})", chunk))
        involved = involved_ids(batch) | link_sources
        # the cached rows this batch can change (before anything is written; the mutex keeps
        # readers of this store from caching a row again until the batch is committed):
        # the records it writes or deletes, those that lose a link to a deleted record, and,
        # to keep it simple, those whose membership changes (not part of a cached row)
        if batch.drop_indexes:
            self._rows.clear()
        else:
            self._rows.forget(involved)
        stored = self._stored_rows(cur, list(involved), probe)
        if not stored and not deletes and not batch.remove_membership and not batch.drop_indexes:
            inserted = self._insert_new(cur, batch, seq)
            if inserted is not None:
                return inserted
        before = {rid: _members(m) for rid, (_, m) in stored.items()}
        ops = plan_ops(batch, before, link_sources)
        upserts = {r.id: r for r in batch.upserts}  # a repeated id ends as its last occurrence
        self._check_references(cur, batch, stored, upserts)

        # membership after the batch, for the records it involves (deletes first, as in plan_ops)
        after = {rid: set(names) for rid, names in before.items()}
        for rid in deletes:
            after[rid] = set()
        for index, rids in batch.remove_membership.items():
            for rid in rids:
                after.get(rid, set()).discard(index)
        for index, rids in batch.add_membership.items():
            for rid in rids:
                after.setdefault(rid, set()).add(index)
        dropped = set(batch.drop_indexes)
        if dropped:
            for names in after.values():
                names -= dropped

        if deletes:
            gone = [stored.pop(rid)[0] for rid in deletes if rid in stored]
            self._log_deletes(cur, seq, gone)
            self._delete_vectors(cur, gone)
            for chunk in _chunks(deletes):
                marks = ",".join("?" * len(chunk))
                cur.execute(f"DELETE FROM links WHERE source IN ({marks}) OR target IN ({marks})", [*chunk, *chunk])
            for chunk in _chunks(gone):
                cur.execute(f"DELETE FROM records WHERE rowid IN ({','.join('?' * len(chunk))})", chunk)
        if upserts:
            member = {rid: _member_text(after[rid]) for rid in upserts if after.get(rid)}
            self._write_records(cur, batch.upserts, upserts, stored, member, seq)
        changed = [(_member_text(after[rid]), rowid) for rid, (rowid, m) in stored.items() if rid not in upserts and _members(m) != after[rid]]
        cur.executemany("UPDATE records SET member_of=? WHERE rowid=?", changed)
        for index in dropped:
            cur.execute("UPDATE records SET member_of = replace(member_of, ?, '|') WHERE instr(member_of, ?) > 0", (f"|{index}|", f"|{index}|"))
            cur.execute("DELETE FROM oplog WHERE index_name=?", (index,))
        by_index: dict[str, list[tuple[str, str]]] = {}
        for index, rid, op in ops:
            by_index.setdefault(index, []).append((rid, op))
        self._finish(cur, batch, seq, [(index, pack_ops(entries)) for index, entries in by_index.items()])
        return Applied(seq, make_ops(seq, ops))

    def _finish(self, cur: sqlite3.Cursor, batch: WriteBatch, seq: int, logged: list[tuple[str, str]]) -> None:
        """The end of every batch: the rows it freed, its state changes, one oplog row per
        index (``(index, packed ops)``), the new sequence number."""
        for slot, rows in self._pending.freed.items():
            cur.executemany(f"INSERT INTO {self._pending.spaces[slot].free} (row) VALUES (?)", [(row,) for row in rows])
        for (namespace, key), value in batch.state.items():
            if value is None:
                cur.execute("DELETE FROM state WHERE namespace=? AND key=?", (namespace, key))
            else:
                cur.execute("INSERT OR REPLACE INTO state VALUES (?, ?, ?)", (namespace, key, json.dumps(value)))
        cur.executemany("INSERT INTO oplog (seq, index_name, ops) VALUES (?, ?, ?)", [(seq, index, ops) for index, ops in logged])
        for scope in batch.forget_scopes:
            fields = scope.as_dict()
            if fields:  # erase the versions of every record the scope covers (what forgetting leaves: nothing)
                covered = " AND ".join(f"{key} = ?" for key in fields)
                cur.execute(f"DELETE FROM history WHERE {covered}", list(fields.values()))
                cur.execute(f"UPDATE records SET hseq = NULL WHERE hseq IS NOT NULL AND {covered}", list(fields.values()))
        if batch.changes_definitions():  # what a reader's catch-up compares (LogTail.definitions)
            cur.execute("INSERT OR REPLACE INTO meta VALUES ('definitions_seq', ?)", (str(seq),))
        cur.execute("UPDATE meta SET value=? WHERE key='seq'", (str(seq),))

    def _insert_new(self, cur: sqlite3.Cursor, batch: WriteBatch, seq: int) -> Applied | None:
        """:meth:`_apply` for the common batch: records none of which is stored, each added
        to indexes (membership only for records of the batch), nothing deleted or removed.
        What it logs is what :func:`~memcore.stores._store.plan_ops` plans for such a batch -- per
        index, an ``add`` for the first occurrence of each id -- without its general
        bookkeeping. None when some id given membership is not in the batch (the general
        path then raises the error that names it)."""
        upserts = {r.id: r for r in batch.upserts}  # a repeated id ends as its last occurrence
        adds = {index: list(dict.fromkeys(rids)) for index, rids in batch.add_membership.items() if rids}
        if any(not upserts.keys() >= set(rids) for rids in adds.values()):
            return None
        self._check_link_targets(cur, set(), upserts)
        if len(adds) == 1:
            ((index, rids),) = adds.items()
            member = dict.fromkeys(rids, member_text_of(index))
        else:
            names: dict[str, set[str]] = {}
            for index, rids in adds.items():
                for rid in rids:
                    names.setdefault(rid, set()).add(index)
            member = {rid: _member_text(indexes) for rid, indexes in names.items()}
        if upserts:
            self._write_records(cur, batch.upserts, upserts, {}, member, seq)
        self._finish(cur, batch, seq, [(index, pack_adds(rids)) for index, rids in adds.items()])
        return AddedOps(seq, adds)

    def _check_references(self, cur: sqlite3.Cursor, batch: WriteBatch, stored: dict[str, tuple[int, str]], upserts: dict[str, Record]) -> None:
        """Ids given membership and link targets must exist after the batch (before anything is written)."""
        deleted = set(batch.deletes)

        def alive(rid: str) -> bool:
            return rid in upserts or (rid in stored and rid not in deleted)

        for rids in batch.add_membership.values():
            for rid in rids:
                if not alive(rid):
                    raise NotFoundError(f"record {rid!r} does not exist")
        self._check_link_targets(cur, deleted, upserts)

    def _check_link_targets(self, cur: sqlite3.Cursor, deleted: set[str], upserts: dict[str, Record]) -> None:
        """The records ``upserts`` link to exist after the batch (``deleted``: ids it deletes)."""
        targets = sorted({l.target for r in upserts.values() for l in r.links} - upserts.keys())
        for rid in targets:
            if rid in deleted:
                raise NotFoundError(f"link target {rid!r} does not exist")
        for chunk in _chunks(targets):
            found = {row[0] for row in cur.execute(f"SELECT id FROM records WHERE id IN ({','.join('?' * len(chunk))})", chunk)}
            missing = [rid for rid in chunk if rid not in found]
            if missing:
                raise NotFoundError(f"link target {missing[0]!r} does not exist")

    def _log_deletes(self, cur: sqlite3.Cursor, seq: int, rowids: Sequence[int]) -> None:
        """Erase the texts and metadata of the versions of the records of ``rowids`` (a
        deleted record's texts leave the file: ``secure_delete``), then log a ``delete``
        version for each (before they are deleted)."""
        now = time.time()
        for chunk in _chunks(rowids):
            rows = cur.execute(
                f"SELECT rowid, id, user_id, agent_id, run_id, hseq, created_at FROM records WHERE rowid IN ({','.join('?' * len(chunk))}) ORDER BY rowid",
                chunk,
            ).fetchall()
            marks = ",".join("?" * len(rows))
            cur.execute(f"UPDATE history SET text = NULL, metadata = NULL WHERE record_id IN ({marks}) AND text IS NOT NULL", [row[1] for row in rows])
            if not self.keeps_history:
                continue
            # an insert kept in its row becomes a history row (erased, as every version of a deleted record)
            cur.executemany(
                "INSERT INTO history (seq, record_id, op, text, metadata, user_id, agent_id, run_id, at, rid) VALUES (?, ?, 'insert', NULL, NULL, ?, ?, ?, ?, ?)",
                [(hseq, rid, user, agent, run, created_at, rowid) for rowid, rid, user, agent, run, hseq, created_at in rows if hseq is not None],
            )
            cur.executemany(
                "INSERT INTO history (seq, record_id, op, text, metadata, user_id, agent_id, run_id, at) VALUES (?, ?, 'delete', NULL, NULL, ?, ?, ?, ?)",
                [(seq, rid, user, agent, run, now) for _, rid, user, agent, run, _, _ in rows],
            )

    def _changed_versions(self, cur: sqlite3.Cursor, seq: int, old: list[Record], rowids: dict[str, int]) -> list[tuple[Any, ...]]:
        """The ``update`` history rows of the stored records ``old`` rewrites: one for each
        whose text, metadata or scope changes (not for vectors or links alone).

        The latest version of a live record keeps no copy of its text and metadata (they are
        the record's row: an insert writes a small history row); when the record changes, that
        version gets the replaced text and metadata, and the new version is the latest."""
        before: dict[int, tuple[Any, ...]] = {}
        inserted: dict[int, tuple[int, float]] = {}  # rowid -> (hseq, created_at) of an insert kept in its row
        for chunk in _chunks([rowids[r.id] for r in old]):
            for rowid, hseq, created_at, *row in cur.execute(
                f"SELECT rowid, hseq, created_at, text, metadata, user_id, agent_id, run_id FROM records WHERE rowid IN ({','.join('?' * len(chunk))})",
                chunk,
            ):
                before[rowid] = tuple(row)
                if hseq is not None:
                    inserted[rowid] = (hseq, created_at)
        versions = []
        replaced = []
        written = []  # the inserts kept in rows, now written as history rows with the replaced text
        for r in old:
            now = (r.text, _json_text(r.metadata), *_scope_row(r.scope))
            rowid = rowids[r.id]
            was = before.get(rowid)
            if was != now:
                versions.append((seq, r.id, "update", None, None, *now[2:], r.updated_at))
                kept = inserted.get(rowid)
                if kept is not None and was is not None:
                    written.append((kept[0], r.id, "insert", *was, kept[1], rowid))
                elif was is not None:
                    replaced.append((was[0], was[1], r.id))
        cur.executemany(
            "UPDATE history SET text = ?, metadata = ? WHERE n = (SELECT max(n) FROM history WHERE record_id = ?) AND text IS NULL AND op != 'delete'",
            replaced,
        )
        if written:
            cur.executemany(
                "INSERT INTO history (seq, record_id, op, text, metadata, user_id, agent_id, run_id, at, rid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", written
            )
            cur.executemany("UPDATE records SET hseq = NULL WHERE rowid = ?", [(row[-1],) for row in written])
        return versions

    def _write_records(
        self,
        cur: sqlite3.Cursor,
        records: Sequence[Record],
        last: dict[str, Record],
        stored: dict[str, tuple[int, str]],
        member: dict[str, str],
        seq: int,
    ) -> None:
        """Insert new records and rewrite stored ones, with one ``executemany`` per table.

        ``last`` maps each id to its last occurrence in ``records`` (its content wins; a new
        record keeps its first occurrence's ``created_at`` and position); ``member`` holds
        the ``member_of`` text of each record after the batch (absent: none). New rows get
        consecutive rowids from the table's sequence (checked after the insert)."""
        fresh: list[Record]
        if not stored and len(last) == len(records) and isinstance(records, RecordRows):
            fresh = records  # inserted as columns: the list that kept their matrices and metadata texts
        else:
            fresh = [r for r in last.values() if r.id not in stored]
        old = [r for r in last.values() if r.id in stored]
        created: dict[str, float] = {}
        if len(last) != len(records):
            for r in reversed(records):
                created[r.id] = r.created_at
        rowids: dict[str, int] = {rid: rowid for rid, (rowid, _) in stored.items() if rid in last}
        versions: list[tuple[Any, ...]] = []
        if old:
            if self.keeps_history:
                versions.extend(self._changed_versions(cur, seq, old, rowids))
            self._delete_vectors(cur, [rowids[r.id] for r in old])
            cur.executemany("DELETE FROM links WHERE source=?", [(r.id,) for r in old])
            cur.executemany(
                "UPDATE records SET text=?, metadata=?, user_id=?, agent_id=?, run_id=?, updated_at=?, member_of=? WHERE rowid=?",
                [(r.text, _json_text(r.metadata), *_scope_row(r.scope), r.updated_at, member.get(r.id, "|"), rowids[r.id]) for r in old],
            )
        if fresh:
            row = cur.execute("SELECT seq FROM sqlite_sequence WHERE name='records'").fetchone()
            base = int(row[0]) if row else 0
            plain = None if created else _plain_record_rows(fresh, member, seq if self.keeps_history else None)
            cur.executemany(*(plain or (_INSERT_RECORD, _record_rows(fresh, created, member, seq if self.keeps_history else None))))
            if self.keeps_history:  # an insert is a version kept in its row (hseq), unless its stamps differ
                versions.extend(
                    (seq, r.id, "insert", None, None, *_scope_row(r.scope), r.updated_at)
                    for r in fresh
                    if (created[r.id] if created else r.created_at) != r.updated_at
                )
            row = cur.execute("SELECT seq FROM sqlite_sequence WHERE name='records'").fetchone()
            if row is not None and int(row[0]) == base + len(fresh):
                rowids.update(zip([r.id for r in fresh], range(base + 1, base + 1 + len(fresh))))
            else:  # someone else's rowids in the sequence: look them up
                rowids.update((rid, rowid) for rid, (rowid, _) in self._stored_rows(cur, [r.id for r in fresh]).items())
        by_space: dict[str, tuple[list[str], list[int], list[Any]]] = {}
        written = list(last.values())
        shapes = {*map(tuple, map(_vectors_of, written))}
        kept: dict[str, np.ndarray] = {}  # per space, the matrix of a batch inserted as columns (its records, in order)
        if len(shapes) == 1:  # the common batch: every record has vectors in the same spaces
            written_ids = [r.id for r in written]
            written_rids = [rowids[rid] for rid in written_ids]
            for space in next(iter(shapes)):
                matrix = stacked(records, space) if len(written) == len(records) else None
                if matrix is not None:
                    kept[space] = matrix
                by_space[space] = (written_ids, written_rids, [] if matrix is not None else [r.vectors[space] for r in written])
        else:
            for r in written:
                rowid = rowids[r.id]
                for space, v in r.vectors.items():
                    column = by_space.get(space)
                    if column is None:
                        column = by_space[space] = ([], [], [])
                    column[0].append(r.id)
                    column[1].append(rowid)
                    column[2].append(v)
        for name, (vector_ids, vector_rids, vectors) in by_space.items():
            self._write_vectors(cur, name, vector_ids, vector_rids, kept[name] if name in kept else _matrix(name, vectors))
        if versions:
            cur.executemany(
                "INSERT INTO history (seq, record_id, op, text, metadata, user_id, agent_id, run_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", versions
            )
        links = [(r.id, l.target, l.relation, l.weight) for r in last.values() for l in r.links]
        if links:
            cur.executemany("INSERT OR REPLACE INTO links VALUES (?, ?, ?, ?)", links)

    def _write_vectors(self, cur: sqlite3.Cursor, name: str, ids: list[str], rids: list[int], matrix: np.ndarray) -> None:
        """Give each record a row of the space's file (free rows first, then appended), write
        the vectors there and reference them; the file is synced before the commit."""
        if matrix.shape[1] == 0:
            raise ValidationError(f"vectors of space {name!r} are empty")
        space = self._spaces.get(name, create=cur, dim=matrix.shape[1])
        assert space is not None
        check_dim(space, matrix)
        rows = self._allocate(cur, space, len(ids))
        self._spaces.file(space).write(rows, matrix)
        if _consecutive(rids, rows):  # new records appended: one statement, no row bound from Python
            cur.execute(_INSERT_RUN.format(table=space.table), (rids[0], int(rows[0]), len(rids)))
        else:
            cur.executemany(f"INSERT INTO {space.table} (rid, row) VALUES (?, ?)", zip(rids, rows.tolist()))
        self._pending.rows[name] = (ids, rows, matrix)

    def _allocate(self, cur: sqlite3.Cursor, space: Space, n: int) -> np.ndarray:
        """``n`` rows for new vectors: the lowest free rows (freed by earlier, committed
        batches), then rows appended past the committed length (moved in the transaction)."""
        pending = self._pending
        committed = self._spaces.committed(space)
        pending.spaces[space.slot] = space
        pending.before.setdefault(space.slot, committed)
        reused = [row for (row,) in cur.execute(f"SELECT row FROM {space.free} ORDER BY row LIMIT ?", (n,))]
        if reused:
            cur.execute(f"DELETE FROM {space.free} WHERE row <= ?", (reused[-1],))
            pending.reused.setdefault(space.slot, []).extend(reused)
        extra = n - len(reused)
        if extra:
            cur.execute("UPDATE vector_spaces SET rows = ? WHERE slot = ?", (committed + extra, space.slot))
        return np.concatenate([np.asarray(reused, dtype=np.int64), np.arange(committed, committed + extra, dtype=np.int64)])

    def _delete_vectors(self, cur: sqlite3.Cursor, rowids: Sequence[int]) -> None:
        """Unreference the vectors of ``rowids``; their rows are freed with the batch (zeroed after it commits)."""
        if not rowids:
            return
        pending = self._pending
        for space in self._spaces.items():
            freed: list[int] = []
            for chunk in _chunks(rowids):
                marks = ",".join("?" * len(chunk))
                freed.extend(row for (row,) in cur.execute(f"SELECT row FROM {space.table} WHERE rid IN ({marks})", chunk))
                cur.execute(f"DELETE FROM {space.table} WHERE rid IN ({marks})", chunk)
            if freed:
                pending.spaces[space.slot] = space
                pending.freed.setdefault(space.slot, []).extend(freed)
