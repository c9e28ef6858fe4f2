"""The write path of a collection: insert, upsert, update, delete, move, forget, state.

Every write is validated completely (records, vectors, target indexes), embedded, then
committed to the store as one atomic batch, then applied to the live indexes from the ops
the store logged (:meth:`Writes._commit`). A write made while a scope is bound stamps it on
new records and keeps component state in the scope's own namespace.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Iterable, Mapping, Sequence

from .._util.log import get_logger
from ..embedders._embedder import fill_vectors
from ..errors import DuplicateIdError, IndexUpdateError, NotFoundError, ValidationError
from ..indexes._handle import IndexHandle
from ..model._binding import ScopeBinding, namespace_scope
from ..model._checks import check_json_value
from ..model._record import Link, Record, Scope
from ..stores._store import WriteBatch
from ._base import CollectionBase
from ..model._record_rows import RecordRows
from ._columns import coerce_columns
from ._input import RecordInput, coerce_ids, coerce_records

__all__ = ["Writes", "StateChanges", "RESERVED_STATE"]

log = get_logger("memcore.collection")
_id_of = attrgetter("id")

RESERVED_STATE = frozenset({"indexes", "spaces"})
StateChanges = Mapping[tuple[str, str], Any]
"""Component state written with a change: ``{(namespace, key): JSON value, or None to delete}``."""


def _state(changes: StateChanges | None, binding: ScopeBinding | None = None) -> dict[tuple[str, str], Any]:
    """Validated state changes, each namespace placed under the bound scope's own."""
    out = {}
    for key, value in (changes or {}).items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(p, str) and p for p in key)):
            raise ValidationError(f"state keys are (namespace, key) pairs of non-empty strings, got {key!r}")
        if key[0] in RESERVED_STATE:
            raise ValidationError(f"state namespace {key[0]!r} is memcore's own")
        if value is not None:
            check_json_value(value, f"state value {key!r}")
        out[(binding.namespace(key[0]), key[1]) if binding is not None else key] = value
    return out


class Writes(CollectionBase):
    """The write path part of :class:`memcore.Collection`."""

    def insert(
        self,
        items: RecordInput | Sequence[RecordInput],
        *,
        indexes: str | Iterable[str] | None = None,
        scope: Scope | Mapping[str, Any] | None = None,
        state: StateChanges | None = None,
        remove_from: Mapping[str, Iterable[str]] | None = None,
    ) -> list[str]:
        """Insert records into the store and the chosen indexes (all when ``indexes`` is None).

        Items are :class:`Record`, dicts (``text``, ``id``, ``metadata``, ``vectors``,
        ``links``, ``scope``) or plain strings. Re-inserting identical content is a no-op
        (besides index membership); a different record under an existing id raises
        :class:`DuplicateIdError` (use :meth:`upsert`). Returns the ids, in order.

        ``remove_from`` (``{index: ids}``) takes other records out of indexes in the SAME
        commit (every id must be a member, else :class:`NotFoundError` and nothing is
        written): e.g. a summary record inserted while the records it summarises leave a
        tier, so that a crash never leaves both or neither.

        The texts of new records that need a vector are embedded outside the collection's
        lock (:meth:`_to_embed`), so that the embedding does not hold up searches; the
        records are then checked and committed under the lock as before.
        """
        with self._lock:
            self._check_open()
            records = self._coerce(items, scope)
            todo = self._to_embed(records, indexes)
            if not todo:  # nothing to embed (vectors given, or no index needs one): one pass
                return self._insert(records, indexes, state, remove_from)
        for space, pending in todo.items():  # outside the lock; what changed meanwhile is checked again below
            fill_vectors(self._spaces, pending, [space])
        with self._lock:
            self._check_open()
            return self._insert(records, indexes, state, remove_from)

    def _to_embed(self, records: list[Record], indexes: str | Iterable[str] | None) -> dict[str, list[Record]]:
        """The records of an insert to embed, by space: those not stored yet (a record stored
        already is not embedded again) that lack a vector of a space the target indexes
        search. Under the lock; an unknown index raises here, as the insert would."""
        spaces = [space for space in self._spaces_of(self._targets(indexes)) if space in self._spaces]
        if not spaces or all(space in r.vectors for r in records for space in spaces):
            return {}
        stored = self._existing(records)
        todo = {space: [r for r in records if space not in r.vectors and r.id not in stored] for space in spaces}
        return {space: pending for space, pending in todo.items() if pending}

    def insert_columns(
        self,
        texts: Sequence[str],
        *,
        ids: Sequence[str] | None = None,
        metadata: Mapping[str, Sequence[Any]] | None = None,
        vectors: Mapping[str, Any] | None = None,
        indexes: str | Iterable[str] | None = None,
        scope: Scope | Mapping[str, Any] | None = None,
        state: StateChanges | None = None,
    ) -> list[str]:
        """Insert a batch given as columns, one value per record in each: what :meth:`insert`
        does with the same records given as dicts, without a dict per record.

        ``texts``: the records' texts; ``ids``: their ids (None: derived from the content,
        as ``insert`` derives them); ``metadata``: ``{field: values}``, a list (or a 1-d
        numpy array) per field (None values are stored as JSON null, as in a dict);
        ``vectors``: ``{space: an (n, dim) matrix}`` (a numpy array, e.g. rows of a
        memory-mapped ``.npy``, copied as float32). The records pass the same checks as in
        ``insert`` (a column of another length, a wrong dimension, NaN, a bad id or text:
        the typed error ``insert`` raises, and nothing is written), and the batch is one
        atomic commit. Returns the ids, in order.
        """
        with self._lock:
            self._check_open()
            records = coerce_columns(texts, ids, metadata, vectors, self._binding.effective(scope), self._spaces)
            self._binding.stamp(records)
            return self._insert(records, indexes, state, None)

    def _insert(
        self,
        records: list[Record],
        indexes: str | Iterable[str] | None,
        state: StateChanges | None,
        remove_from: Mapping[str, Iterable[str]] | None,
    ) -> list[str]:
        """:meth:`insert` of validated records."""
        targets = self._targets(indexes)
        leave = self._leaving(remove_from)
        ids = records.ids if type(records) is RecordRows else list(map(_id_of, records))
        existing = self._existing(records, ids)
        if existing:
            for r in records:
                old = existing.get(r.id)
                if old is not None and not r.same_content(old):
                    raise DuplicateIdError(f"record {r.id!r} already exists with different content; use upsert() or update()")
            self._check_visible(existing.values())
            fresh = [r for r in records if r.id not in existing]
            kept = [existing[r.id] for r in records if r.id in existing]
        else:  # the common case: every record is new
            fresh, kept = records, []
        self._check_links(fresh, set(ids))
        spaces = self._spaces_of(targets)
        fill_vectors(self._spaces, fresh, spaces)
        changed_old = fill_vectors(self._spaces, kept, spaces)
        self._validate_for(targets, fresh + kept if kept else fresh)
        if kept:
            members = self._store.memberships([r.id for r in kept])
            add = {h.name: [i for i in ids if h.name not in members.get(i, ())] for h in targets}
        else:
            add = {h.name: ids for h in targets}
        batch = WriteBatch(
            upserts=fresh + changed_old if changed_old else fresh,  # the list itself: a RecordRows keeps its matrices
            add_membership={n: v for n, v in add.items() if v},
            remove_membership=leave,
            state=_state(state, self._binding),
        )
        if not batch.is_empty():  # re-inserting what is already there changes nothing
            if kept:
                self._commit(batch, {r.id: r for r in fresh + kept})
            else:
                self._commit(batch, dict(zip(ids, records)), records if isinstance(records, RecordRows) else None)
        return ids

    def upsert(
        self,
        items: RecordInput | Sequence[RecordInput],
        *,
        indexes: str | Iterable[str] | None = None,
        scope: Scope | Mapping[str, Any] | None = None,
        state: StateChanges | None = None,
    ) -> list[str]:
        """Insert new records (into ``indexes``, all by default) and replace existing ones.

        A replaced record keeps its index memberships (plus ``indexes`` when given); its
        vectors are recomputed when its text changed and no vectors were given.
        """
        with self._lock:
            self._check_open()
            records, add = self._prepare_upserts(items, indexes, scope)
            self._commit(WriteBatch(upserts=records, add_membership=add, state=_state(state, self._binding)), {r.id: r for r in records})
            return [r.id for r in records]

    def _prepare_upserts(
        self, items: RecordInput | Sequence[RecordInput], indexes: str | Iterable[str] | None, scope: Scope | Mapping[str, Any] | None
    ) -> tuple[list[Record], dict[str, list[str]]]:
        """The records of an upsert, their vectors filled and validated, and the memberships to add."""
        records = self._coerce(items, scope)
        existing = self._existing(records)
        self._check_visible(existing.values())
        self._check_links(records, {r.id for r in records})
        new_targets = self._targets(indexes)
        explicit = indexes is not None
        member_of = self._store.memberships([r.id for r in records if r.id in existing])
        for r in records:
            old = existing.get(r.id)
            if old is not None:
                r.created_at = old.created_at
                if r.text == old.text:
                    for space, vec in old.vectors.items():
                        r.vectors.setdefault(space, vec)
            handles = [self._indexes[n] for n in member_of.get(r.id, ()) if n in self._indexes]
            if old is None or explicit:
                handles += new_targets
            fill_vectors(self._spaces, [r], self._spaces_of(handles))
            self._validate_for(handles, [r])
        add = {h.name: [r.id for r in records if r.id not in existing or explicit] for h in new_targets}
        return records, {k: v for k, v in add.items() if v}

    def update(
        self,
        id: str,
        *,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        merge_metadata: bool = False,
        vectors: Mapping[str, Any] | None = None,
        links: Any = None,
    ) -> Record:
        """Change fields of an existing record (NotFoundError when absent); returns the new record."""
        with self._lock:
            old = self._get_many([id])[0]
            if metadata is not None and not isinstance(metadata, Mapping):
                raise ValidationError(f"metadata must be a dict, got {type(metadata).__name__}")
            meta = {**old.metadata, **(metadata or {})} if merge_metadata else (old.metadata if metadata is None else metadata)
            new = Record.create(
                old.text if text is None else text,
                id=old.id,
                metadata=meta,
                vectors=vectors,
                links=old.links if links is None else links,
                scope=old.scope,
            )
            self.upsert([new], indexes=[])
            return self._get_many([id])[0]

    def delete(
        self,
        ids: str | Iterable[str],
        *,
        scope: Scope | Mapping[str, Any] | None = None,
        state: StateChanges | None = None,
        replace: Sequence[RecordInput] | None = None,
    ) -> int:
        """Delete records from the store and every index, with every link to or from them.

        Unknown ids (or ids outside ``scope``) raise NotFoundError and nothing is deleted.
        ``replace``: existing records rewritten in the same atomic batch (keeping their index
        memberships), e.g. what a service derived from the deleted ones, rebuilt without them;
        a record named both ways is a ValidationError, one that does not exist a NotFoundError.
        """
        with self._lock:
            self._check_open()
            ids = list(dict.fromkeys(coerce_ids(ids)))
            scope = self._binding.effective(scope)
            found = {r.id: r for r in self._store.get(ids, with_vectors=False) if r is not None}
            missing = [i for i in ids if i not in found or (scope is not None and not scope.covers(found[i].scope))]
            if missing:
                raise NotFoundError(f"no record(s) {missing[:5]}{' in this scope' if scope else ''}; nothing was deleted")
            records, add = self._prepare_upserts(list(replace), None, None) if replace else ([], {})
            clash = sorted({r.id for r in records} & set(ids))
            if clash:
                raise ValidationError(f"record(s) {clash[:5]} are both deleted and replaced; nothing was deleted")
            known = self._existing(records) if records else {}
            absent = [r.id for r in records if r.id not in known]
            if absent:
                raise NotFoundError(f"replace names no existing record(s) {absent[:5]}; nothing was deleted")
            if ids or records:
                self._commit(WriteBatch(upserts=records, deletes=ids, add_membership=add, state=_state(state, self._binding)), {r.id: r for r in records})
            return len(ids)

    def insert_to_index(self, index: str, ids: str | Iterable[str], *, state: StateChanges | None = None) -> None:
        """Add existing records to one more index (already-members are left as they are)."""
        with self._lock:
            handle = self._handle(index)
            ids = list(dict.fromkeys(coerce_ids(ids)))
            records = self._get_many(ids)
            members = self._store.memberships(ids)
            todo = [r for r in records if index not in members.get(r.id, ())]
            changed = fill_vectors(self._spaces, todo, self._spaces_of([handle]))
            self._validate_for([handle], todo)
            batch = WriteBatch(upserts=changed, add_membership={index: [r.id for r in todo]} if todo else {}, state=_state(state, self._binding))
            if not batch.is_empty():
                self._commit(batch, {r.id: r for r in todo})

    def remove_from_index(self, index: str, ids: str | Iterable[str], *, state: StateChanges | None = None) -> None:
        """Take records out of one index; they stay in the store and other indexes."""
        with self._lock:
            self._handle(index)
            ids = list(dict.fromkeys(coerce_ids(ids)))
            members = self._store.memberships(ids)
            missing = [i for i in ids if index not in members.get(i, ())] + self._invisible(ids)
            if missing:
                raise NotFoundError(f"record(s) {missing[:5]} are not in index {index!r}; nothing was removed")
            if ids or state:
                self._commit(WriteBatch(remove_membership={index: ids} if ids else {}, state=_state(state, self._binding)), {})

    def move(self, ids: str | Iterable[str], from_index: str, to_index: str, *, state: StateChanges | None = None) -> None:
        """Move records from one index to another in ONE commit (with ``state``): after a
        crash each is in exactly one of the two, never both, never neither.

        Every id must be a member of ``from_index`` (else :class:`NotFoundError` and nothing
        moves); one already in ``to_index`` just leaves ``from_index``.
        """
        with self._lock:
            self._check_open()
            source, target = self._handle(from_index), self._handle(to_index)
            if source is target:
                raise ValidationError(f"move needs two different indexes, got {from_index!r} twice")
            ids = list(dict.fromkeys(coerce_ids(ids)))
            if not ids:
                if state:
                    self.set_state(state)
                return
            records = self._get_many(ids)
            members = self._store.memberships(ids)
            missing = [i for i in ids if from_index not in members.get(i, ())]
            if missing:
                raise NotFoundError(f"record(s) {missing[:5]} are not in index {from_index!r}; nothing was moved")
            todo = [r for r in records if to_index not in members.get(r.id, ())]
            changed = fill_vectors(self._spaces, todo, self._spaces_of([target]))
            self._validate_for([target], todo)
            batch = WriteBatch(
                upserts=changed,
                add_membership={to_index: [r.id for r in todo]} if todo else {},
                remove_membership={from_index: ids},
                state=_state(state, self._binding),
            )
            self._commit(batch, {r.id: r for r in todo})

    def forget(self, scope: Scope | Mapping[str, Any]) -> dict[str, Any]:
        """Delete everything of ``scope`` in ONE atomic batch: its records (with what services
        derived from them, which carry their scope), their entries in every index and links,
        and the component state kept for the scope (or a narrower one).

        Returns what went, by kind: ``{"records": n, "indexes": {index: n}, "state_keys": n}``.
        """
        with self._lock:
            self._check_open()
            target = self._binding.effective(scope)
            if target is None:
                raise ValidationError("forget needs a non-empty scope, e.g. {'user_id': 'bob'} (to empty the memory: delete(where={}))")
            ids = self._store.ids(where=None, scope=target)
            by_index: dict[str, int] = {}
            for names in self._store.memberships(ids).values():
                for name in names:
                    by_index[name] = by_index.get(name, 0) + 1
            state: dict[tuple[str, str], Any] = {}
            for namespace in self._store.state_namespaces():
                owner = namespace_scope(namespace)
                if owner is not None and target.covers(owner):
                    state.update(((namespace, key), None) for key in self._store.state_items(namespace))
            if ids or state or self._store.keeps_history:  # the scope's history goes too, deleted records' included
                self._commit(WriteBatch(deletes=ids, state=state, forget_scopes=[target]), {})
            log.info("scope.forgotten", records=len(ids), state_keys=len(state))
            return {"records": len(ids), "indexes": dict(sorted(by_index.items())), "state_keys": len(state)}

    def evict(self, index: str, *, state: StateChanges | None = None) -> list[str]:
        """Take out of ``index`` the ids it reports over its capacity (:meth:`Index.overflow`).

        Returns the evicted ids, oldest first; the records stay in the store so the caller
        (a service) decides where they go: nothing is silently dropped.
        """
        with self._lock:
            ids = list(self._handle(index).index.overflow())
            hidden = set(self._invisible(ids))
            ids = [i for i in ids if i not in hidden]  # a scoped caller evicts only its own records
            if ids or state:
                self.remove_from_index(index, ids, state=state)
            return ids

    def set_state(self, changes: StateChanges) -> None:
        """Write component state atomically: ``{(namespace, key): JSON value or None to delete}``."""
        with self._lock:
            self._check_open()
            self._commit(WriteBatch(state=_state(changes, self._binding)), {})

    def get_state(self, namespace: str, key: str, default: Any = None) -> Any:
        """One value of component state (services keep theirs under their own namespace)."""
        return self._store.get_state(self._binding.namespace(namespace), key, default)

    def state_items(self, namespace: str) -> dict[str, Any]:
        """All values of a state namespace (the bound scope's own)."""
        return self._store.state_items(self._binding.namespace(namespace))

    def link(self, source: str, target: str, relation: str = "related", weight: float = 1.0) -> None:
        """Add (or re-weight) the edge ``source -relation-> target``."""
        with self._lock:
            old = self._get_many([source])[0]
            self._get_many([target])[0]
            links = [l for l in old.links if (l.target, l.relation) != (target, relation)]
            self.update(source, links=[*links, Link(target, relation, weight)])

    def unlink(self, source: str, target: str, relation: str | None = None) -> int:
        """Remove edges from ``source`` to ``target`` (of one relation, or all); returns how many."""
        with self._lock:
            old = self._get_many([source])[0]
            keep = [l for l in old.links if not (l.target == target and (relation is None or l.relation == relation))]
            if len(keep) != len(old.links):
                self.update(source, links=keep)
            return len(old.links) - len(keep)

    def _coerce(self, items: RecordInput | Sequence[RecordInput], scope: Scope | Mapping[str, Any] | None) -> list[Record]:
        """A batch's records, scoped: the bound scope is the default and the limit."""
        records = coerce_records(items, self._binding.effective(scope), self._spaces)
        self._binding.stamp(records)
        return records

    def _check_visible(self, records: Iterable[Record]) -> None:
        """Existing records a scoped write names must be the caller's (else: unknown)."""
        if self._scope.get() is None:
            return
        hidden = [r.id for r in records if not self._binding.covers(r)]
        if hidden:
            raise NotFoundError(f"no record(s) {hidden[:5]} in this scope; nothing was written")

    def _existing(self, records: Sequence[Record], ids: list[str] | None = None) -> dict[str, Record]:
        """The stored records among ``records`` (``ids``: their ids, when at hand), by id."""
        return {r.id: r for r in self._store.get(list(map(_id_of, records)) if ids is None else ids) if r is not None}

    def _check_links(self, records: Sequence[Record], batch_ids: set[str]) -> None:
        targets = sorted({l.target for r in records for l in r.links} - batch_ids)
        if targets:
            present = self._store.memberships(targets)
            missing = [t for t in targets if t not in present] + self._invisible([t for t in targets if t in present])
            if missing:
                raise NotFoundError(f"link target(s) {missing[:5]} do not exist")

    def _validate_for(self, handles: Iterable[IndexHandle], records: Sequence[Record]) -> None:
        for h in handles:
            if records:
                h.index.validate(records)

    def _commit(self, batch: WriteBatch, cache: dict[str, Record], rows: RecordRows | None = None) -> None:
        """Apply ``batch`` to the store, then to every live index (``cache``: the records
        at hand by id; ``rows``: the batch's new records inserted as columns, in order)."""
        applied = self._store.apply(batch)
        added = applied.adds  # a write that only added: no Op per record and index is built
        changed: dict[str, Record | None] = dict.fromkeys(batch.deletes)
        changed.update(zip(map(_id_of, batch.upserts), batch.upserts))  # deletes run first: an id in both ends upserted
        self._allowed_sets.advance(applied.seq - 1, applied.seq, changed)
        failures = []
        for handle in list(self._indexes.values()):  # a catch-up below may follow another process's index definitions
            if handle.error is not None or self._indexes.get(handle.name) is not handle:
                continue  # broken: the store keeps its membership, a rebuild applies it; replaced: opened after this write
            try:
                if not self._store.shared or handle.applied_seq == applied.seq - 1 or handle.index.reads_store:  # no other process wrote in between
                    handle.apply(() if added is not None else applied.ops, self._store, cache, rows=rows, added=added)
                    handle.applied_seq = applied.seq
                else:  # a shared store: what other processes committed first, then this batch, from the log
                    self._catch_up(handle)
            except Exception as exc:  # the store has the data; the index is rebuilt on next use
                handle.stale = True
                failures.append(f"{handle.name}: {type(exc).__name__}: {exc}")
                log.error("index.update_failed", name=handle.name, error=str(exc))
        if failures:
            raise IndexUpdateError("stored, but index update failed (rebuilt on next use): " + "; ".join(failures))
