"""``MemcoreStore``: LangGraph's long-term memory store (``BaseStore``) on a memcore memory.

Each item (``namespace``, ``key``, ``value``) is one memcore record:

- its id is derived from (namespace, key), so ``put`` replaces the item in place;
- its text is what LangGraph indexes (the ``fields`` of the index config, default the whole
  value as JSON), embedded and searched by the memory's own retrieval (its embedder,
  indexes and pipeline: ``hybrid`` works as well as ``basic``);
- its metadata holds the namespace levels (``lg_ns_0``, ``lg_ns_1``, ...), the key, the
  value as JSON, and each top-level scalar field of the value (``v_<field>``) so that
  LangGraph filters (``{"status": "active"}``, ``{"score": {"$gte": 3}}``) run as memcore
  ``where`` filters inside the search, before ``limit``;
- with ``scope_fields=("user_id",)`` the first namespace levels ARE the record's scope
  (``("alice", "memories")`` is stored with ``user_id = "alice"``): memcore's scope
  isolation then holds for the graph's memories and ``memcore forget`` of a user removes them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
)

import memcore
from memcore import Memory, Record, ValidationError

__all__ = ["MemcoreStore"]

NS, KEY, VALUE, DEPTH = "lg_ns_", "lg_key", "lg_value", "lg_depth"
SCOPE_FIELDS = ("user_id", "agent_id", "run_id")
_OPERATORS = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"}
_SCALAR = (str, int, float, bool)
FIELD_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
"""What memcore accepts as a metadata field name (value fields outside it are filtered in Python)."""


def _item_id(namespace: tuple[str, ...], key: str) -> str:
    return "lg-" + hashlib.sha256(json.dumps([list(namespace), key]).encode("utf-8")).hexdigest()[:40]


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def _namespace(record: Record) -> tuple[str, ...]:
    depth = int(record.metadata[DEPTH])
    return tuple(str(record.metadata[f"{NS}{i}"]) for i in range(depth))


def _compare(item_value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics for what memcore filters do not express (nested values)."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_apply(item_value, op, v) for op, v in wanted.items())
        return isinstance(item_value, dict) and all(_compare(item_value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return isinstance(item_value, (list, tuple)) and len(item_value) == len(wanted) and all(map(_compare, item_value, wanted))
    return bool(item_value == wanted)


def _apply(value: Any, op: str, wanted: Any) -> bool:
    if op == "$eq":
        return bool(value == wanted)
    if op == "$ne":
        return bool(value != wanted)
    if op not in _OPERATORS:
        raise ValidationError(f"unsupported filter operator {op!r}; use one of {sorted(_OPERATORS)}")
    try:
        a, b = float(value), float(wanted)
    except (TypeError, ValueError):
        return False
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


class MemcoreStore(BaseStore):
    """LangGraph's ``BaseStore`` whose items live in a memcore memory.

    ``MemcoreStore(memory=memory)`` around an open memory, or ``MemcoreStore(path=...,
    config=...)`` to open one (:meth:`close` closes it). ``index={"fields": ["text"]}``
    names the value fields whose text is indexed (default: the whole value as JSON);
    ``scope_fields`` maps the first namespace levels to memcore scope fields.
    """

    supports_ttl = False

    def __init__(
        self,
        *,
        memory: Memory | None = None,
        path: str | os.PathLike[str] | None = None,
        config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        index: Mapping[str, Any] | None = None,
        scope_fields: Sequence[str] = (),
    ):
        if memory is not None and (path is not None or config is not None):
            raise ValidationError("give either an open memory or path/config to open one, not both")
        unknown = [f for f in scope_fields if f not in SCOPE_FIELDS]
        if unknown or len(set(scope_fields)) != len(scope_fields):
            raise ValidationError(f"scope_fields must be distinct names among {list(SCOPE_FIELDS)}, not {list(scope_fields)}")
        self._owns_memory = memory is None
        self.memory: Memory = memory if memory is not None else memcore.open(config, path=path)
        self.scope_fields = tuple(scope_fields)
        fields = list((index or {}).get("fields") or ["$"])
        self._fields = [(f, tokenize_path(f) if f != "$" else f) for f in fields]

    # -- LangGraph's two entry points ------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations: reads see the memory as it was before the batch (as in
        LangGraph's own stores), then the batch's puts are written in one atomic upsert
        (the last put of a key in the batch wins; a ``None`` value deletes)."""
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = op
                results.append(None)
            else:
                results.append(self._read(op))
        if puts:
            self._write(list(puts.values()))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` on a worker thread (the event loop keeps running)."""
        return await asyncio.to_thread(self.batch, list(ops))

    # -- writes --------------------------------------------------------------------------

    def _scope(self, namespace: tuple[str, ...]) -> dict[str, str] | None:
        if not self.scope_fields:
            return None
        if len(namespace) < len(self.scope_fields):
            raise ValidationError(f"namespace {namespace} is shorter than scope_fields {self.scope_fields}")
        return dict(zip(self.scope_fields, namespace))

    def _text(self, value: Mapping[str, Any], index: Any) -> str:
        paths = self._fields if index is None or index is False else [(f, tokenize_path(f)) for f in index]
        texts: list[str] = []
        for path, tokens in paths:
            texts.extend([json.dumps(value, sort_keys=True, ensure_ascii=False)] if path == "$" else get_text_at_path(value, tokens))
        text = "\n".join(t for t in texts if t)
        return text or json.dumps(value, sort_keys=True, ensure_ascii=False)

    def _record(self, op: PutOp) -> dict[str, Any]:
        assert op.value is not None
        value = dict(op.value)
        metadata: dict[str, Any] = {KEY: op.key, VALUE: json.dumps(value, ensure_ascii=False), DEPTH: len(op.namespace)}
        metadata.update({f"{NS}{i}": level for i, level in enumerate(op.namespace)})
        metadata.update({f"v_{k}": v for k, v in value.items() if isinstance(v, _SCALAR) and FIELD_PATTERN.match(f"v_{k}")})
        item: dict[str, Any] = {"id": _item_id(op.namespace, op.key), "text": self._text(value, op.index), "metadata": metadata}
        scope = self._scope(op.namespace)
        if scope is not None:
            item["scope"] = scope
        return item

    def _write(self, puts: list[PutOp]) -> None:
        upserts = [self._record(op) for op in puts if op.value is not None]
        deletes = [_item_id(op.namespace, op.key) for op in puts if op.value is None]
        if upserts:
            self.memory.upsert(upserts)
        if deletes:
            present = [r.id for r in self.memory.collection.get_many(deletes) if r is not None]
            if present:
                self.memory.delete(present)

    # -- reads ---------------------------------------------------------------------------

    def _read(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = self.memory.collection.get_many([_item_id(op.namespace, op.key)])[0]
            return self._item(found) if found is not None else None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValidationError(f"unknown operation {type(op).__name__}")

    def _item(self, record: Record) -> Item:
        value = json.loads(record.metadata[VALUE])
        return Item(
            value=value, key=str(record.metadata[KEY]), namespace=_namespace(record), created_at=_when(record.created_at), updated_at=_when(record.updated_at)
        )

    def _search_item(self, record: Record, score: float | None) -> SearchItem:
        item = self._item(record)
        return SearchItem(namespace=item.namespace, key=item.key, value=item.value, created_at=item.created_at, updated_at=item.updated_at, score=score)

    def _where(self, op: SearchOp) -> tuple[dict[str, Any], dict[str, Any]]:
        """The memcore where filter of a search, and what of its filter memcore cannot say."""
        where: dict[str, Any] = {f"{NS}{i}": level for i, level in enumerate(op.namespace_prefix)}
        where[DEPTH] = {"$gte": len(op.namespace_prefix)}  # LangGraph items only (a number field they all have)
        rest: dict[str, Any] = {}
        for field, wanted in (op.filter or {}).items():
            name = f"v_{field}"
            simple = isinstance(wanted, _SCALAR) or (
                isinstance(wanted, dict) and wanted and all(k in _OPERATORS and isinstance(v, _SCALAR) for k, v in wanted.items())
            )
            if simple and FIELD_PATTERN.match(name):
                where[name] = wanted
            else:
                rest[field] = wanted
        return where, rest

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise ValidationError("limit and offset must be non-negative")
        where, rest = self._where(op)
        wanted = op.offset + op.limit
        if wanted == 0:
            return []
        if op.query:
            depth = self.memory.count(where=where) if rest else wanted  # a Python-side filter needs every candidate
            if depth == 0:
                return []
            hits = self.memory.query(op.query, k=depth, where=where)
            scored: list[tuple[Record, float | None]] = [(h.record, float(h.score)) for h in hits if h.record is not None]
        else:
            ids = self.memory.collection.ids(where=where)
            records = self.memory.collection.get_many(ids if rest else ids[:wanted])
            scored = [(r, None) for r in records if r is not None]
        if rest:
            scored = [(r, s) for r, s in scored if all(_compare(json.loads(r.metadata[VALUE]).get(f), w) for f, w in rest.items())]
        return [self._search_item(r, s) for r, s in scored[op.offset : wanted]]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        seen = {_namespace(r) for r in self.memory.collection.get_many(self.memory.collection.ids(where={DEPTH: {"$gte": 0}})) if r is not None}
        conditions: tuple[MatchCondition, ...] = op.match_conditions or ()
        found = [ns for ns in seen if all(_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            found = list({ns[: op.max_depth] for ns in found})
        return sorted(found)[op.offset : op.offset + op.limit]

    def close(self) -> None:
        """Close the memory if this store opened it."""
        if self._owns_memory:
            self.memory.close()


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path) if condition.match_type == "prefix" else zip(reversed(namespace), reversed(path))
    return all(p == "*" or n == p for n, p in pairs)
