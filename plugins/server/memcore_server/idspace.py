"""A tenant's own id namespace: the ids a scoped caller gives are stored under its prefix.

Record ids are global in a collection, so a tenant choosing an id another tenant already
uses would otherwise be refused (a 409 on insert, a 404 on upsert) and learn that the id
exists. Instead, every id a scoped caller gives is stored as ``prefix + id``, the prefix
derived from the caller's scope (:func:`id_prefix`: the same scope always gives the same
prefix, so two keys of one user share their ids; two scopes never share one), and every id
the caller gets back has the prefix stripped. Two tenants can then both use ``"a1"``: they
are two records, and nothing either does tells whether the other's exists.

A tenant also sees records of its scope that carry no prefix of its own: those written
without an id (content ids derive from the text, metadata and scope, so they never collide
across scopes), written in process or with an admin key, or by a key with a narrower scope
(whose prefix differs). Such an id is shown as stored, and an id a caller gives is looked up
as ``prefix + id`` first, then as given: both lookups run inside the caller's scope, so
another scope's records are never found either way. An id that matches neither is stored
(written) or reported unknown (read, update, delete) as ``prefix + id``, and the prefix is
stripped from error messages: the caller reads its own id back, exactly as it wrote it.

Admin keys and servers without keys are unrestricted: they use and see stored ids
(``~<16 hex digits>~a1`` for a tenant's ``a1``).
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence, TypeVar

import memcore
from memcore import Hit, MemcoreError, NotFoundError, Record, ValidationError
from memcore.plugin import Link

__all__ = ["id_prefix", "TenantMemory", "MAX_ID_CHARS"]

T = TypeVar("T")

MAX_ID_CHARS = 512
"""The longest stored record id (the core's limit); a tenant's ids are shorter by its prefix."""


def id_prefix(scope: Mapping[str, str]) -> str:
    """The prefix of the ids written in ``scope``: ``~`` + 16 hex digits of the SHA-256 of the
    scope as canonical JSON + ``~`` (fixed length, so no prefix starts another)."""
    return _prefix(tuple(sorted(scope.items())))


@lru_cache(maxsize=4096)
def _prefix(fields: tuple[tuple[str, str], ...]) -> str:
    canonical = json.dumps(dict(fields), separators=(",", ":"), ensure_ascii=False)
    return "~" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16] + "~"


def _rebuilt(exc: MemcoreError, message: str) -> MemcoreError:
    """``exc``'s class carrying ``message`` (a class whose constructor takes more than a
    message gets it as its only argument)."""
    try:
        return type(exc)(message)
    except TypeError:
        error = type(exc).__new__(type(exc))
        Exception.__init__(error, message)
        return error


class TenantMemory:
    """The verbs of :class:`memcore.Memory` the server calls, for one scoped caller, with ids
    translated (in: the caller's id to the stored one; out: back). Used inside the caller's
    scope binding (:func:`memcore_server.tenancy.imposed`)."""

    def __init__(self, memory: memcore.Memory, scope: Mapping[str, str]):
        self.memory = memory
        self.prefix = id_prefix(scope)
        self.max_id_chars = MAX_ID_CHARS - len(self.prefix)

    # -- translation ----------------------------------------------------------------------

    def client_id(self, stored: str) -> str:
        """The id the caller knows a stored id by."""
        return stored[len(self.prefix) :] if stored.startswith(self.prefix) else stored

    def _checked(self, ids: Sequence[Any]) -> list[str]:
        for i in ids:
            if not isinstance(i, str) or not i or len(i) > self.max_id_chars:
                shown = repr(i)[:80]
                raise ValidationError(f"record id must be a non-empty string of at most {self.max_id_chars} characters on this server, got {shown}")
        return list(ids)

    def stored_ids(self, ids: Sequence[Any]) -> list[str]:
        """The stored id of each id the caller gives: ``prefix + id`` when that record is in
        the scope, else ``id`` when that record is, else ``prefix + id`` (a new or unknown id)."""
        wanted = self._checked(ids)
        if not wanted:
            return []
        prefixed = [self.prefix + i for i in wanted]
        records = self.memory.collection.records
        found = records(prefixed)
        absent = [i for i, r in zip(wanted, found) if r is None]
        raw = {i for i, r in zip(absent, records(absent)) if r is not None} if absent else set()
        return [i if i in raw else p for i, p in zip(wanted, prefixed)]

    def _stored_one(self, id: Any) -> str:
        return self.stored_ids([id])[0]

    def _items(self, items: Sequence[Any]) -> list[Any]:
        """Items with their ids and link targets as stored (one lookup for all of them)."""
        wanted: list[str] = []
        for item in items:
            if isinstance(item, Mapping):
                if item.get("id") is not None:
                    wanted.append(item["id"])
                wanted.extend(self._link_targets(item.get("links")))
            elif isinstance(item, Record):
                raise ValidationError("a Record carries a stored id: give the item as a dict")
        stored = dict(zip(wanted, self.stored_ids(wanted))) if wanted else {}
        out: list[Any] = []
        for item in items:
            if isinstance(item, Mapping):
                item = dict(item)
                if item.get("id") is not None:
                    item["id"] = stored[item["id"]]
                if item.get("links"):
                    item["links"] = self._links(item["links"], stored)
            out.append(item)
        return out

    @staticmethod
    def _link_targets(links: Any) -> list[str]:
        if not isinstance(links, (list, tuple)):
            return []
        targets = []
        for link in links:
            target = link if isinstance(link, str) else link.get("target") if isinstance(link, Mapping) else getattr(link, "target", None)
            if isinstance(target, str):
                targets.append(target)
        return targets

    @staticmethod
    def _links(links: Any, stored: Mapping[str, str]) -> Any:
        if not isinstance(links, (list, tuple)):
            return links  # the core refuses it
        out: list[Any] = []
        for link in links:
            if isinstance(link, str):
                out.append(stored[link])
            elif isinstance(link, Mapping) and isinstance(link.get("target"), str):
                out.append({**link, "target": stored[link["target"]]})
            elif isinstance(link, Link):
                out.append(Link(stored[link.target], link.relation, link.weight))
            else:
                out.append(link)
        return out

    def record_out(self, record: Record) -> Record:
        """``record`` with its id and link targets as the caller knows them."""
        links = tuple(Link(self.client_id(l.target), l.relation, l.weight) for l in record.links)
        return record.evolve(id=self.client_id(record.id), links=links)

    def _hit_out(self, hit: Hit) -> Hit:
        record = None if hit.record is None else self.record_out(hit.record)
        return Hit(self.client_id(hit.id), hit.score, hit.raw, hit.source, hit.provenance, record)

    def _result_out(self, result: dict[str, Any]) -> dict[str, Any]:
        if isinstance(result.get("id"), str) and result["id"].startswith(self.prefix):
            result = {**result, "id": self.client_id(result["id"])}
        return result

    def _run(self, fn: Callable[[], T]) -> T:
        """Run ``fn``; the prefix never reaches the caller in an error message."""
        try:
            return fn()
        except MemcoreError as exc:
            message = str(exc)
            if self.prefix not in message:
                raise
            raise _rebuilt(exc, message.replace(self.prefix, "")) from None

    # -- the verbs ------------------------------------------------------------------------

    def insert(self, items: Any, vector: Any = None, metadata: Mapping[str, Any] | None = None, **options: Any) -> str | list[str]:
        """:meth:`memcore.Memory.insert` (one text, a dict, or a list of dicts)."""

        def run() -> str | list[str]:
            if isinstance(items, str):
                item = self._items([{"text": items, **options}])[0]
                text = item.pop("text")
                return self.client_id(str(self.memory.insert(text, vector=vector, metadata=metadata, **item)))
            if isinstance(items, Mapping):
                return self.client_id(str(self.memory.insert(self._items([items])[0], vector=vector, metadata=metadata, **options)))
            if isinstance(items, (list, tuple)):
                ids = self.memory.insert(self._items(items), vector=vector, metadata=metadata, **options)
                return [self.client_id(i) for i in ids]
            return self.memory.insert(items, vector=vector, metadata=metadata, **options)  # the core refuses it

        return self._run(run)

    def upsert(self, items: Any, *, scope: Any = None) -> str | list[str]:
        """:meth:`memcore.Memory.upsert`."""

        def run() -> str | list[str]:
            if isinstance(items, str):
                return self.client_id(str(self.memory.upsert(items, scope=scope)))
            if isinstance(items, Mapping):
                return self.client_id(str(self.memory.upsert(self._items([items])[0], scope=scope)))
            ids = self.memory.upsert(self._items(list(items)), scope=scope)
            return [self.client_id(i) for i in ids]

        return self._run(run)

    def update(self, id: str, **fields: Any) -> Record:
        """:meth:`memcore.Memory.update`."""
        return self._run(lambda: self.record_out(self.memory.update(self._stored_one(id), **fields)))

    def get(self, ids: str | Sequence[str] | None = None, **options: Any) -> Record | list[Record]:
        """:meth:`memcore.Memory.get`."""

        def run() -> Record | list[Record]:
            if isinstance(ids, str):
                found = self.memory.get(self._stored_one(ids), **options)
                return self.record_out(found) if isinstance(found, Record) else [self.record_out(r) for r in found]
            wanted = None if ids is None else self.stored_ids(list(ids))
            found = self.memory.get(wanted, **options)
            return self.record_out(found) if isinstance(found, Record) else [self.record_out(r) for r in found]

        return self._run(run)

    def delete(self, ids: str | Sequence[str] | None = None, **options: Any) -> int:
        """:meth:`memcore.Memory.delete`."""

        def run() -> int:
            if ids is None:
                return self.memory.delete(None, **options)
            return self.memory.delete(self.stored_ids([ids] if isinstance(ids, str) else list(ids)), **options)

        return self._run(run)

    def forget(self, scope: Any) -> dict[str, Any]:
        """:meth:`memcore.Memory.forget`."""
        return self.memory.forget(scope)

    def count(self, **options: Any) -> int:
        """:meth:`memcore.Memory.count`."""
        return self.memory.count(**options)

    def history(self, id: str, *, scope: Any = None) -> list[dict[str, Any]]:
        """:meth:`memcore.Memory.history`: of ``prefix + id``, else of ``id`` (a deleted record
        keeps its history, so this looks at the versions, not at the records)."""

        def run() -> list[dict[str, Any]]:
            self._checked([id])
            try:
                versions = self.memory.history(self.prefix + id, scope=scope)
            except NotFoundError:
                versions = self.memory.history(id, scope=scope)
            return [{**v, "id": self.client_id(v["id"])} for v in versions]

        return self._run(run)

    def retrieve(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """:meth:`memcore.Memory.retrieve`."""
        return self._run(lambda: [self._result_out(r) for r in self.memory.retrieve(*args, **kwargs)])

    def retrieve_many(self, *args: Any, **kwargs: Any) -> list[list[dict[str, Any]]]:
        """:meth:`memcore.Memory.retrieve_many`."""
        return self._run(lambda: [[self._result_out(r) for r in found] for found in self.memory.retrieve_many(*args, **kwargs)])

    def query(self, *args: Any, **kwargs: Any) -> list[Hit]:
        """:meth:`memcore.Memory.query`."""
        return self._run(lambda: [self._hit_out(h) for h in self.memory.query(*args, **kwargs)])
