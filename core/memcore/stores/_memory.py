"""The in-memory store: same semantics as SQLite, nothing on disk (tests, ephemeral memories)."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any, Mapping, Sequence

import numpy as np
from pydantic import Field

from ..errors import NotFoundError
from ..model._document import DocumentFilter, document_matches
from ..model._filters import Filter, matches
from ..model._record import Record, Scope
from .._plugins._registry import ComponentConfig
from ._store import Applied, LogTail, Op, Store, Version, VersionOp, WriteBatch, involved_ids, plan_ops

__all__ = ["MemoryStore", "MemoryStoreConfig"]


class MemoryStoreConfig(ComponentConfig):
    """Settings of the ``memory`` store (none besides ``kind``)."""

    kind: str = "memory"
    history: bool = Field(
        True,
        description="Keep every version of each record for Memory.history (replaced texts stay until the record is deleted or its scope forgotten); false: keep none.",
    )


class MemoryStore(Store):
    """Dicts in one process; a batch is validated completely before anything changes."""

    def __init__(self, *, history: bool = True) -> None:
        self.keeps_history = history
        self._records: dict[str, Record] = {}  # insertion order = dict order
        self._members: dict[str, dict[str, None]] = {}  # index -> ordered ids
        self._log: list[Op] = []
        self._history: dict[str, list[Version]] = {}
        self._state: dict[str, dict[str, Any]] = {}
        self._seq = 0
        self._log_start = 0
        self._definitions = 0
        """The sequence number of the last batch that changed an index definition (:attr:`LogTail.definitions`)."""
        self._mutex = threading.RLock()

    def apply(self, batch: WriteBatch) -> Applied:
        with self._mutex:
            deleted = set(batch.deletes)
            upserted = {r.id for r in batch.upserts}

            def alive(rid: str) -> bool:
                return rid in upserted or (rid in self._records and rid not in deleted)

            for rids in batch.add_membership.values():
                for rid in rids:
                    if not alive(rid):
                        raise NotFoundError(f"record {rid!r} does not exist")
            for r in batch.upserts:
                for link in r.links:
                    if not alive(link.target):
                        raise NotFoundError(f"link target {link.target!r} does not exist")
            link_sources = {rid for rid, rec in self._records.items() if any(l.target in deleted for l in rec.links)} if deleted else set()
            memberships = self.memberships(sorted(involved_ids(batch) | link_sources))
            ops = plan_ops(batch, memberships, link_sources)
            # -- mutate (nothing below raises on valid input)
            seq = self._seq + 1
            self._log_versions(batch, seq)
            for rid in batch.deletes:
                self._records.pop(rid, None)
                for members in self._members.values():
                    members.pop(rid, None)
            for rid in link_sources - deleted:
                rec = self._records[rid]
                rec.links = tuple(l for l in rec.links if l.target not in deleted)
            for r in batch.upserts:
                old = self._records.get(r.id)
                stored = _copy(r)
                if old is not None:
                    stored.created_at = old.created_at
                self._records[r.id] = stored
            for index, rids in batch.remove_membership.items():
                for rid in rids:
                    self._members.get(index, {}).pop(rid, None)
            for index, rids in batch.add_membership.items():
                members = self._members.setdefault(index, {})
                for rid in rids:
                    members[rid] = None
            for index in batch.drop_indexes:
                self._members.pop(index, None)
                self._log = [op for op in self._log if op.index != index]
            for (namespace, key), value in batch.state.items():
                if value is None:
                    self._state.get(namespace, {}).pop(key, None)
                else:
                    self._state.setdefault(namespace, {})[key] = copy.deepcopy(value)
            new_ops = tuple(Op(seq, i, r, o) for i, r, o in ops)
            self._log.extend(new_ops)
            if batch.changes_definitions():
                self._definitions = seq
            self._seq = seq
            return Applied(seq, new_ops)

    def read_tail(self, since: Mapping[str, int]) -> LogTail:
        """Each index's log (:meth:`read_log`) and the last change of an index definition, under one lock."""
        with self._mutex:
            return LogTail({name: self.read_log(seq, name) for name, seq in since.items()}, definitions=self._definitions)

    def _log_versions(self, batch: WriteBatch, seq: int) -> None:
        """The versions a batch makes (before it changes the records), then its forgotten scopes' erased."""
        now = time.time()
        current: dict[str, Record | None] = {}
        for rid in batch.deletes:
            old = current.get(rid, self._records.get(rid))
            if old is not None:
                kept = self._history.get(rid)
                if kept:  # a deleted record's texts and metadata go
                    self._history[rid] = [Version(v.seq, rid, v.op, None, None, v.scope, v.at) for v in kept]
                if self.keeps_history:
                    self._history.setdefault(rid, []).append(Version(seq, rid, "delete", None, None, old.scope, now))
            current[rid] = None
        for r in batch.upserts if self.keeps_history else ():
            old = current[r.id] if r.id in current else self._records.get(r.id)
            if old is None or old.text != r.text or old.metadata != r.metadata or old.scope != r.scope:
                op: VersionOp = "insert" if old is None else "update"
                self._history.setdefault(r.id, []).append(Version(seq, r.id, op, r.text, _json_copy(r.metadata), r.scope, r.updated_at))
            current[r.id] = r
        for scope in batch.forget_scopes:
            for rid in list(self._history):
                kept = [v for v in self._history[rid] if not scope.covers(v.scope)]
                if kept:
                    self._history[rid] = kept
                else:
                    del self._history[rid]

    def history(self, record_id: str) -> list[Version]:
        if not self.keeps_history:
            return super().history(record_id)
        with self._mutex:
            return [Version(v.seq, v.record_id, v.op, v.text, _json_copy(v.metadata), v.scope, v.at) for v in self._history.get(record_id, ())]

    def history_ids(self) -> list[str]:
        if not self.keeps_history:
            return super().history_ids()
        with self._mutex:
            return list(self._history)

    def import_history(self, versions: Sequence[Version]) -> None:
        if not self.keeps_history:
            super().import_history(versions)
        grouped: dict[str, list[Version]] = {}
        for v in versions:
            grouped.setdefault(v.record_id, []).append(Version(v.seq, v.record_id, v.op, v.text, _json_copy(v.metadata), v.scope, v.at))
        with self._mutex:
            self._history.update(grouped)

    def get(self, ids: Sequence[str], *, with_vectors: bool = True) -> list[Record | None]:
        with self._mutex:
            out = []
            for rid in ids:
                rec = self._records.get(rid)
                out.append(None if rec is None else _copy(rec, with_vectors))
            return out

    def texts(self, ids: Sequence[str]) -> list[str | None]:
        """Texts straight from the stored records (strings are immutable: no copy)."""
        with self._mutex:
            records = self._records
            return [None if (rec := records.get(rid)) is None else rec.text for rid in ids]

    def _select(self, where: Filter | None, scope: Scope | None, index: str | None, where_document: DocumentFilter | None = None) -> list[str]:
        with self._mutex:
            records = self._records
            candidates = list(records) if index is None else [r for r in records if r in self._members.get(index, {})]
            return [
                rid
                for rid in candidates
                if matches(where, records[rid].metadata)
                and (scope is None or scope.covers(records[rid].scope))
                and (where_document is None or document_matches(where_document, records[rid].text))
            ]

    def ids(self, *, where: Filter | None = None, scope: Scope | None = None, index: str | None = None, limit: int | None = None) -> list[str]:
        found = self._select(where, scope, index)
        return found if limit is None else found[:limit]

    def find_ids(
        self,
        *,
        where: Filter | None = None,
        where_document: DocumentFilter | None = None,
        scope: Scope | None = None,
        index: str | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[str]:
        """The text filter evaluated with the metadata filter, in one pass."""
        found = self._select(where, scope, index, where_document)
        return found[offset:] if limit is None else found[offset : offset + limit]

    def count(self, *, where: Filter | None = None, scope: Scope | None = None, index: str | None = None) -> int:
        if where is None and scope is None:
            with self._mutex:
                return len(self._records) if index is None else len(self._members.get(index, {}))
        return len(self._select(where, scope, index))

    def find_count(
        self, *, where: Filter | None = None, where_document: DocumentFilter | None = None, scope: Scope | None = None, index: str | None = None
    ) -> int:
        if where_document is None:
            return self.count(where=where, scope=scope, index=index)
        return len(self._select(where, scope, index, where_document))

    def memberships(self, ids: Sequence[str]) -> dict[str, set[str]]:
        with self._mutex:
            return {rid: {ix for ix, m in self._members.items() if rid in m} for rid in ids if rid in self._records}

    def vectors(self, ids: Sequence[str], space: str) -> tuple[np.ndarray, np.ndarray]:
        with self._mutex:
            found = [self._records.get(rid) for rid in ids]
            vecs = [r.vectors.get(space) if r is not None else None for r in found]
        dim = next((v.shape[0] for v in vecs if v is not None), 0)
        matrix = np.zeros((len(ids), dim), dtype=np.float32)
        present = np.array([v is not None for v in vecs], dtype=bool)
        for i, v in enumerate(vecs):
            if v is not None:
                matrix[i] = v
        return matrix, present

    def last_seq(self) -> int:
        return self._seq

    def ops_since(self, seq: int, index: str) -> list[Op]:
        with self._mutex:
            return [op for op in self._log if op.index == index and op.seq > seq]

    def prune_log(self, upto: int) -> None:
        with self._mutex:
            self._log = [op for op in self._log if op.seq > upto]
            self._log_start = max(self._log_start, upto)

    def log_start(self) -> int:
        return self._log_start

    def get_state(self, namespace: str, key: str, default: Any = None) -> Any:
        with self._mutex:
            return copy.deepcopy(self._state.get(namespace, {}).get(key, default))

    def state_items(self, namespace: str) -> dict[str, Any]:
        with self._mutex:
            return copy.deepcopy(dict(sorted(self._state.get(namespace, {}).items())))

    def state_namespaces(self) -> list[str]:
        with self._mutex:
            return sorted(ns for ns, items in self._state.items() if items)

    def close(self) -> None:
        """Nothing to release."""


def _json_copy(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars): what record metadata is."""
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_json_copy(v) for v in value)
    return value


def _copy(r: Record, with_vectors: bool = True) -> Record:
    """A copy the caller may change without touching the store (vectors only when asked)."""
    return Record(
        id=r.id,
        text=r.text,
        metadata=_json_copy(r.metadata),
        vectors={k: v.copy() for k, v in r.vectors.items()} if with_vectors else {},
        links=tuple(r.links),
        scope=r.scope,
        created_at=r.created_at,
        updated_at=r.updated_at,
    )


def memory_store_factory(config: MemoryStoreConfig, path: Any = None) -> MemoryStore:
    """Build an in-memory store (``path`` is ignored)."""
    return MemoryStore(history=config.history)
