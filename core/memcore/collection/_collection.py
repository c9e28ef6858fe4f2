"""The Collection: one copy of the data (a store) plus many named indexes.

Every write is validated completely (records, vectors, target indexes), embedded, then
committed to the store as one atomic batch, then applied to the live indexes from the ops
the store logged. Indexes are derived data: they are saved on :meth:`Collection.flush` /
:meth:`Collection.close`, caught up from the store's log on open, and rebuilt when missing
or corrupt.

A collection is its state (:mod:`._base`) seen through three parts: the index lifecycle
(:mod:`._indexes`), the write path (:mod:`._writes`) and the read path (:mod:`._reads`);
this module composes them and adds opening, flushing and closing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from .._plugins._host import get_registry
from .._plugins._registry import Registration, Registry
from ..embedders._embedder import Space
from ..stores._store import Store
from ._base import CollectionState
from ._indexes import IndexLifecycle, IndexOptions
from ._reads import CollectionReader
from ._writes import Writes

if TYPE_CHECKING:
    from ..llms._llm import LLMs

__all__ = ["Collection"]


class Collection(IndexLifecycle, Writes, CollectionReader):
    """One store + named indexes. Use :func:`memcore.open` or :meth:`Collection.create` to get one."""

    def __init__(
        self,
        store: Store,
        spaces: Mapping[str, Space],
        registry: Registry,
        path: str | Path | None = None,
        declared: Mapping[str, tuple[str, IndexOptions]] | None = None,
        llms: "LLMs | None" = None,
        index_kinds: Mapping[str, Registration] | None = None,
    ):
        """``declared``: the indexes the settings declare (``{name: (kind, options)}``); a
        stored index whose declared options differ only in search-time fields is loaded once,
        with the declared ones (:meth:`ensure_indexes` then finds nothing to change).
        ``llms``: the memory's LLMs, handed to the indexes (``IndexContext.llms``).
        ``index_kinds``: the registrations of index kinds the caller already looked up
        (``memcore.open``: those of the settings), so the registry is asked once per kind."""
        state = CollectionState(store, spaces, registry, Path(path) if path is not None else None, llms)
        state.index_kinds.update(index_kinds or {})
        super().__init__(state)
        self.reader = CollectionReader(state)
        """The read path of this collection, built once: what its pipeline's stages read through."""
        state.follow_definitions = self._follow_definitions
        self._pin_spaces()
        self._open_declared(declared or {})

    @classmethod
    def create(
        cls,
        path: str | Path | None = None,
        *,
        store: Store | None = None,
        spaces: Mapping[str, Space] | None = None,
        registry: Registry | None = None,
    ) -> "Collection":
        """A collection at ``path`` (SQLite) or in memory (``path=None``) with the hashing space ``default``.

        For a collection declared in settings use :func:`memcore.open`.
        """
        registry = registry or get_registry()
        owned = store is None
        if store is None:  # the builtin defaults, resolved through the registry like any component
            store_reg = registry.get("stores", "sqlite" if path is not None else "memory")
            store = store_reg.build(store_reg.parse_config({}, "store"), Path(path) if path is not None else None)
        if spaces is None:
            emb_reg = registry.get("embedders", "hashing")
            emb = emb_reg.build(emb_reg.parse_config({}, "spaces.default.embedder"))
            spaces = {"default": Space("default", emb.dim, emb, "hashing")}
        try:
            return cls(store, spaces, registry, path)
        except BaseException:
            if owned:  # a failed open must not keep the writer lock
                store.close()
            raise

    # -- what only the collection gives: its reader and raw access ------------------------

    @property
    def store(self) -> Store:
        """The store itself (raw access: it bypasses the bound scope)."""
        return self._store

    @property
    def spaces(self) -> dict[str, Space]:
        """The embedding spaces by name."""
        return self._spaces

    @property
    def registry(self) -> Registry:
        """The component registry the collection builds its indexes and fusions from."""
        return self._state.registry

    @property
    def path(self) -> Path | None:
        """The collection directory (None in memory)."""
        return self._state.path

    @property
    def llms(self) -> "LLMs | None":
        """The memory's LLMs, handed to the indexes (``IndexContext.llms``)."""
        return self._state.llms

    # -- lifecycle -----------------------------------------------------------------------

    def flush(self) -> None:
        """Save every changed index to disk and prune the operation log they no longer need."""
        with self._lock:
            if self._state.closed or self._store.read_only:
                return
            if self._store.shared:
                self._sync()  # an index another process dropped or re-created is not saved over its folder
            for handle in self._indexes.values():
                handle.save()
            if self._state.path is not None and self._indexes:
                self._store.prune_log(min(h.applied_seq for h in self._indexes.values()))

    def close(self) -> None:
        """Flush and release the store (and its writer lock). Idempotent."""
        with self._lock:
            if self._state.closed:
                return
            try:
                self.flush()
            finally:
                self._state.closed = True
                for handle in self._indexes.values():
                    handle.close_index()
                self._store.close()

    def __enter__(self) -> "Collection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return self.count()

    def info(self) -> dict[str, Any]:
        """Indexes, counts, kinds and on-disk sizes."""
        with self._lock:
            return {
                "path": str(self._state.path) if self._state.path else None,
                "records": self.count(),
                "seq": self._store.last_seq(),
                "store_bytes": self._store.size_bytes(),
                "spaces": {n: s.manifest() for n, s in self._spaces.items()},
                "indexes": [
                    {**entry, "bytes": self._indexes[entry["name"]].size_bytes(), "stats": self._indexes[entry["name"]].index.stats()}
                    for entry in self.list_indexes()
                ],
            }
