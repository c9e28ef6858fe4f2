"""The ``memoryos`` service's state namespace, read from the store once per store sequence
number instead of once per query -- per scope.

The core keeps a service's state per bound scope (``memoryos`` for an unscoped call,
``memoryos@scope:{"user_id": "alice"}`` for alice's, see :mod:`memcore.model._binding`).
:class:`StateView` therefore caches one copy per bound scope: alice's cached state is
never served to bob.

Each copy is kept with the store's ``last_seq()``. A read checks the sequence number (one
cheap store read) and re-reads the namespace only when something was committed since. The
service's own writes go through :meth:`StateView.write`: when nothing else was committed in
between (the sequence number moved by exactly one), the cached copy is patched in place
instead of being re-read, so a retrieve that counts visits does not make the next retrieve
read the whole state again. Another process (or writer, or scope) committing in between
simply invalidates the cache.

:meth:`StateView.scratch` is a per-scope dict for what the service derives from its state
and records in Python (page vectors, the segment matrix); it lives as long as the scope's
cached copy (the least recently used scopes beyond ``max_scopes`` are dropped) and
:meth:`StateView.clear` drops everything (after a forget or a delete).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, TypeVar, overload

from memcore.plugin import Collection

__all__ = ["StateView"]

T = TypeVar("T")


@dataclass
class _Copy:
    """One scope's cached namespace, the sequence number it was read at, its scratch dicts."""

    seq: int | None = None
    items: dict[str, Any] = field(default_factory=dict)
    scratch: dict[str, Any] = field(default_factory=dict)


class StateView:
    """One state namespace of ``collection``, cached per bound scope by store sequence number."""

    def __init__(self, collection: Collection, namespace: str, max_scopes: int = 32):
        self.collection = collection
        self.namespace = namespace
        self.max_scopes = max_scopes
        self._copies: OrderedDict[str, _Copy] = OrderedDict()
        self._lock = threading.Lock()  # threads bound to different scopes share the dict
        self.reads = 0  # how often a namespace was read from the store (tests, bench)

    def _scope_key(self) -> str:
        """The bound scope, as the key of its cached copy ("{}" unscoped)."""
        scope = self.collection.bound_scope
        return json.dumps(scope.as_dict() if scope is not None else {}, sort_keys=True, ensure_ascii=False)

    def _copy(self) -> _Copy:
        """The bound scope's cached copy (created empty; the least recently used dropped)."""
        key = self._scope_key()
        with self._lock:
            copy = self._copies.get(key)
            if copy is None:
                copy = self._copies[key] = _Copy()
                while len(self._copies) > self.max_scopes:
                    self._copies.popitem(last=False)
            else:
                self._copies.move_to_end(key)
            return copy

    def _last_seq(self) -> int:
        return int(self.collection.store.last_seq())

    def items(self) -> dict[str, Any]:
        """All keys of the bound scope's namespace (a cached dict: treat it and its values as read-only)."""
        copy = self._copy()
        seq = self._last_seq()
        if seq != copy.seq:
            copy.items = self.collection.state_items(self.namespace)
            copy.seq = seq
            self.reads += 1
        return copy.items

    def get(self, key: str, default: Any = None) -> Any:
        """One value (from the cached namespace)."""
        return self.items().get(key, default)

    def prefixed(self, prefix: str) -> dict[str, Any]:
        """The keys starting with ``prefix``."""
        return {k: v for k, v in self.items().items() if k.startswith(prefix)}

    def scratch(self, name: str, factory: Callable[[], Any] = dict) -> Any:
        """The bound scope's Python-side cache ``name`` (created by ``factory``)."""
        scratch = self._copy().scratch
        if name not in scratch:
            scratch[name] = factory()
        return scratch[name]

    def discard(self, name: str, keys: Sequence[str]) -> None:
        """Drop ``keys`` from the scratch dict ``name`` of every scope (records that changed or went)."""
        with self._lock:
            copies = list(self._copies.values())
        for copy in copies:
            cache = copy.scratch.get(name)
            if cache:
                for key in keys:
                    cache.pop(key, None)

    def clear(self) -> None:
        """Drop every cached copy and scratch dict (every scope)."""
        with self._lock:
            self._copies.clear()

    @overload
    def write(self, changes: Mapping[str, Any]) -> None: ...

    @overload
    def write(self, changes: Mapping[str, Any], commit: Callable[[dict[tuple[str, str], Any]], T]) -> T: ...

    def write(self, changes: Mapping[str, Any], commit: Callable[[dict[tuple[str, str], Any]], T] | None = None) -> T | None:
        """Commit ``changes`` (key -> JSON value, None deletes) in ONE store commit.

        ``commit(state)`` performs the commit carrying ``state`` (e.g. ``insert_to_index(...,
        state=state)``); by default ``collection.set_state``. Returns what ``commit`` returned.
        With no ``changes`` it wraps a commit of the service that does not touch the namespace
        (an index insert, an evict), so that it does not cost a re-read either.
        """
        copy = self._copy()
        state = {(self.namespace, k): v for k, v in changes.items()}
        before = self._last_seq()
        fresh = before == copy.seq
        try:
            out = (commit or self.collection.set_state)(state)
        except BaseException:
            copy.seq = None
            raise
        after = self._last_seq()
        if fresh and after == before and not changes:  # nothing was committed (e.g. an evict with nothing to evict)
            return out
        if fresh and after == before + 1:
            items = dict(copy.items)
            for key, value in changes.items():
                if value is None:
                    items.pop(key, None)
                else:
                    items[key] = value
            copy.items, copy.seq = items, after
        else:
            copy.seq = None
        return out
