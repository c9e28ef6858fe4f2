"""The ``memoryos`` service's state namespace, read from the store once per store sequence
number instead of once per query.

:class:`StateView` caches ``collection.state_items(namespace)`` together with the store's
``last_seq()``. A read checks the sequence number (one cheap store read) and re-reads the
namespace only when something was committed since. The service's own writes go through
:meth:`StateView.write`: when nothing else was committed in between (the sequence number
moved by exactly one), the cached copy is patched in place instead of being re-read, so a
retrieve that counts visits does not make the next retrieve read the whole state again.
Another process (or writer) committing in between simply invalidates the cache.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from memcore import Collection

__all__ = ["StateView"]


class StateView:
    """One state namespace of ``collection``, cached by store sequence number."""

    def __init__(self, collection: Collection, namespace: str):
        self.collection = collection
        self.namespace = namespace
        self._seq: int | None = None
        self._items: dict[str, Any] = {}
        self.reads = 0  # how often the namespace was read from the store (tests, bench)

    def _last_seq(self) -> int:
        return int(self.collection.store.last_seq())

    def items(self) -> dict[str, Any]:
        """All keys of the namespace (a cached dict: treat it and its values as read-only)."""
        seq = self._last_seq()
        if seq != self._seq:
            self._items = self.collection.state_items(self.namespace)
            self._seq = seq
            self.reads += 1
        return self._items

    def get(self, key: str, default: Any = None) -> Any:
        """One value (from the cached namespace)."""
        return self.items().get(key, default)

    def prefixed(self, prefix: str) -> dict[str, Any]:
        """The keys starting with ``prefix``."""
        return {k: v for k, v in self.items().items() if k.startswith(prefix)}

    def write(self, changes: Mapping[str, Any], commit: Callable[[dict[tuple[str, str], Any]], Any] | None = None) -> Any:
        """Commit ``changes`` (key -> JSON value, None deletes) in ONE store commit.

        ``commit(state)`` performs the commit carrying ``state`` (e.g. ``insert_to_index(...,
        state=state)``); by default ``collection.set_state``. Returns what ``commit`` returned.
        With no ``changes`` it wraps a commit of the service that does not touch the namespace
        (an index insert, an evict), so that it does not cost a re-read either.
        """
        state = {(self.namespace, k): v for k, v in changes.items()}
        before = self._last_seq()
        fresh = before == self._seq
        try:
            out = (commit or self.collection.set_state)(state)
        except BaseException:
            self._seq = None
            raise
        after = self._last_seq()
        if fresh and after == before and not changes:  # nothing was committed (e.g. an evict with nothing to evict)
            return out
        if fresh and after == before + 1:
            items = dict(self._items)
            for key, value in changes.items():
                if value is None:
                    items.pop(key, None)
                else:
                    items[key] = value
            self._items, self._seq = items, after
        else:
            self._seq = None
        return out
