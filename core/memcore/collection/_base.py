"""What the parts of a collection share: its state, and the helpers every path uses.

A :class:`memcore.Collection` is one :class:`CollectionState` (the store, the spaces, the
live index handles, the scope binding, the lock...) seen through three parts that never
import each other: the index lifecycle (:mod:`._indexes`), the write path (:mod:`._writes`)
and the read path (:mod:`._reads`, whose :class:`CollectionReader` is what stages get).
Each part derives from :class:`CollectionBase`, which holds the state and the helpers below.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from .._plugins._registry import Registration, Registry
from .._util.log import get_logger
from ..embedders._embedder import Space, fill_vectors
from ..errors import BrokenIndexError, NotFoundError, ValidationError
from ..indexes._allowed import AllowedCache
from ..indexes._broken import StoredConfig, UnavailableIndex, describe_failure, saved_seq
from ..indexes._handle import IndexHandle, generation_of
from ..indexes._index import Index
from ..model._binding import ScopeBinding
from ..model._document import DocumentFilter
from ..model._filters import filter_key
from ..model._record import Record
from ..stores._store import Store, WriteBatch
from ._input import coerce_ids

if TYPE_CHECKING:
    from ..llms._llm import LLMs

__all__ = ["CollectionBase", "CollectionState"]

log = get_logger("memcore.collection")


class CollectionState:
    """The one mutable state of a collection, shared by its parts and its reader.

    Only ``closed`` is ever rebound; the other fields keep the same objects for the life of
    the collection (``indexes`` changes in place), so each part may keep references to them.
    """

    __slots__ = (
        "store",
        "spaces",
        "registry",
        "path",
        "llms",
        "indexes",
        "lock",
        "binding",
        "allowed_sets",
        "closed",
        "index_kinds",
        "text_filter",
        "query_vectors",
        "definitions",
        "following",
        "follow_definitions",
    )

    def __init__(self, store: Store, spaces: Mapping[str, Space], registry: Registry, path: Path | None, llms: "LLMs | None") -> None:
        self.store = store
        self.spaces = dict(spaces)
        self.registry = registry
        self.path = path
        self.llms = llms
        self.indexes: dict[str, IndexHandle] = {}
        self.lock = threading.RLock()
        self.binding = ScopeBinding()
        self.allowed_sets = AllowedCache()
        """The ids each filter and scope allow, per store sequence (see :mod:`memcore.indexes._allowed`)."""
        self.closed = False
        self.index_kinds: dict[str, Registration] = {}
        """Index kinds already looked up by the caller (``memcore.open``): not asked again."""
        self.text_filter: ContextVar[DocumentFilter | None] = ContextVar(f"memcore_text_filter_{id(self)}", default=None)
        """The text filter bound for the current call (``CollectionReader.text_filtered``), AND-ed into every filtered read."""
        self.query_vectors: ContextVar[dict[tuple[str, str], Any] | None] = ContextVar(f"memcore_query_vectors_{id(self)}", default=None)
        """Query vectors embedded ahead in one batch for the current call (``CollectionReader.embedded_queries``): ``(space, text) -> vector``."""
        self.definitions: int | None = None
        """The store's number of the last index definition change this collection followed
        (:attr:`memcore.plugin.LogTail.definitions`; a reader or a process of a shared store)."""
        self.following = False
        """True while the handles are being made those of the stored definitions (the open, or
        :meth:`IndexLifecycle._follow_definitions`): the catch-ups it runs do not follow them again."""
        self.follow_definitions: Callable[[], None] | None = None
        """Makes the handles those of the stored definitions (the collection's
        ``_follow_definitions``, set when it is built): every part, the reader stages get
        included, calls it through here."""


class CollectionBase:
    """A view of a :class:`CollectionState` with the helpers the three paths share."""

    def __init__(self, state: CollectionState) -> None:
        self._state = state
        self._store = state.store
        self._spaces = state.spaces
        self._indexes = state.indexes
        self._lock = state.lock
        self._binding = state.binding
        self._scope = state.binding.var  # the bound scope: self._scope.get() (None: unbound)
        self._allowed_sets = state.allowed_sets

    def _check_open(self) -> None:
        if self._state.closed:
            raise ValidationError("this collection is closed")

    def _follows_others(self) -> bool:
        """Whether other processes may change this collection's store while it is open (it is
        read-only, or shared): its indexes then follow their writes and index definitions."""
        return self._store.read_only or self._store.shared

    def _sync(self) -> None:
        """Readers (and every process of a shared store) catch their indexes up with what
        other processes committed, index definitions included."""
        if self._follows_others():
            self._catch_up(*(h for h in self._indexes.values() if h.error is None and not h.index.reads_store), definitions=True)

    def _catch_up(self, *handles: IndexHandle, definitions: bool = False) -> None:
        """Apply the logged ops the indexes have not seen, read for all of them at once with
        the records they add (:meth:`Store.read_tail`); rebuild an index whose ops the log
        no longer has.

        A reader or a process of a shared store first follows the index definitions when the
        read says another process changed them (:meth:`IndexLifecycle._follow_definitions`:
        a dropped index is let go, a new or re-created one opened from the store); the log
        read for a handle that was replaced is not applied. ``definitions``: read even with
        no handle to catch up (the check alone)."""
        state = self._state
        follow = not state.following and self._follows_others()
        if not handles and not (definitions and follow):
            return
        store = self._store
        tail = store.read_tail({h.name: h.applied_seq for h in handles})  # log start and ops in one snapshot
        if follow and state.follow_definitions is not None and (tail.definitions is None or tail.definitions != state.definitions):
            state.follow_definitions()
            state.definitions = tail.definitions  # once followed: a failure is tried again at the next catch-up
            handles = tuple(h for h in handles if self._indexes.get(h.name) is h)
        for handle in handles:
            if handle.catch_up(store, tail.logs[handle.name], tail.records) is None:
                handle.rebuild(store, self._fill_for(handle))

    def _handle(self, name: str, *, usable: bool = True) -> IndexHandle:
        """The handle of index ``name``; with ``usable`` a broken one raises BrokenIndexError."""
        self._check_open()
        handle = self._indexes.get(name)
        if handle is None and self._follows_others():
            self._sync()  # another process may have created it
            handle = self._indexes.get(name)
        if handle is None:
            raise NotFoundError(f"no index named {name!r}; indexes: {sorted(self._indexes) or '(none)'}")
        if handle.stale and handle.error is None:
            try:
                handle.rebuild(self._store, self._fill_for(handle, persist=not self._store.read_only))
            except Exception as exc:  # noqa: BLE001 - reported as a broken index, never a raw failure
                handle = self._indexes[name] = self._broken(name, handle.stored_definition(), exc)
        if usable and handle.error is not None:
            raise BrokenIndexError(name, handle.error)
        return handle

    def _only_index(self) -> IndexHandle:
        if len(self._indexes) == 1:
            return next(iter(self._indexes.values()))
        raise ValidationError(f"name the index to search (index=...); indexes: {sorted(self._indexes) or '(none)'}")

    def _targets(self, indexes: str | Iterable[str] | None) -> list[IndexHandle]:
        if indexes is None:
            return list(self._indexes.values())
        if isinstance(indexes, str):
            indexes = [indexes]
        return [self._handle(n) for n in dict.fromkeys(indexes)]

    def _spaces_of(self, handles: Iterable[IndexHandle]) -> list[str]:
        return list(dict.fromkeys(s for h in handles for s in h.index.requires.spaces))

    def _fill_for(self, handle: IndexHandle, persist: bool = False) -> Callable[[list[Record]], list[Record]]:
        spaces = self._spaces_of([handle])

        def fill(records: list[Record]) -> list[Record]:
            changed = fill_vectors(self._spaces, records, spaces)
            if changed and persist:
                self._store.apply(WriteBatch(upserts=changed))
            return records

        return fill

    def _size(self, name: str) -> int:
        """``len()`` of index ``name``; an index whose library fails to count (damaged files
        it read lazily) becomes a broken handle, reported instead of raised."""
        handle = self._indexes[name]
        try:
            return len(handle.index)
        except Exception as exc:  # noqa: BLE001 - a library's own error: the index is broken, the memory stays usable
            self._indexes[name] = self._broken(name, handle.stored_definition(), exc)
            handle.close_index()
            return 0

    def _broken(self, name: str, definition: Mapping[str, Any], exc: BaseException) -> IndexHandle:
        """A handle for an index that cannot be used; reported, searchable only after a rebuild."""
        reason = describe_failure(exc)
        kind = str(definition.get("kind", "?")) if isinstance(definition, Mapping) else "?"
        raw = definition.get("config") if isinstance(definition, Mapping) else None
        config = StoredConfig.model_validate({**(raw if isinstance(raw, Mapping) else {}), "kind": kind})
        directory = self._directory(name)

        def make() -> Index:
            raise BrokenIndexError(name, reason)

        generation = generation_of(definition)
        handle = IndexHandle(
            name,
            kind,
            config,
            UnavailableIndex(name, reason),
            make,
            directory=directory,
            error=reason,
            generation=generation,
        )
        handle.applied_seq = saved_seq(directory, self._store.last_seq())
        log.error("index.broken", name=name, kind=kind, error=reason)
        return handle

    def _directory(self, name: str) -> Path | None:
        """Where index ``name`` keeps its files (None in memory)."""
        path = self._state.path
        return path / "indexes" / name if path is not None else None

    def _leaving(self, remove_from: Mapping[str, Iterable[str]] | None) -> dict[str, list[str]]:
        """``remove_from`` checked: existing indexes, ids that are (visible) members of them."""
        out: dict[str, list[str]] = {}
        for index, ids in (remove_from or {}).items():
            self._handle(index)
            wanted = list(dict.fromkeys(coerce_ids(ids)))
            members = self._store.memberships(wanted)
            missing = [i for i in wanted if index not in members.get(i, ())] + self._invisible(wanted)
            if missing:
                raise NotFoundError(f"record(s) {missing[:5]} are not in index {index!r}; nothing was written")
            if wanted:
                out[index] = wanted
        return out

    def _invisible(self, ids: Sequence[str]) -> list[str]:
        """The ids among ``ids`` the bound scope does not see (none when unbound)."""
        bound = self._scope.get()
        if bound is None or not ids:
            return []
        store = self._store
        key = (filter_key(None), tuple(bound.as_dict().items()))
        visible = self._allowed_sets.get(store.last_seq(), key, lambda: store.ids(where=None, scope=bound), None, bound)
        return [i for i in ids if i not in visible]

    def _get_many(self, ids: Sequence[str]) -> list[Record]:
        """The records of ``ids`` the bound scope sees; NotFoundError naming the others."""
        self._check_open()
        found = self._store.get(list(ids))
        if self._scope.get() is not None:
            found = [r if r is not None and self._binding.covers(r) else None for r in found]
        missing = [i for i, r in zip(ids, found) if r is None]
        if missing:
            raise NotFoundError(f"no record(s) {missing[:5]}")
        return found  # type: ignore[return-value]

    if TYPE_CHECKING:  # one path calls another through the collection that composes them

        def insert_to_index(self, index: str, ids: str | Iterable[str], *, state: Mapping[tuple[str, str], Any] | None = None) -> None: ...
        def _commit(self, batch: WriteBatch, cache: dict[str, Record]) -> None: ...
