"""The Collection: one copy of the data (a store) plus many named indexes.

Every write is validated completely (records, vectors, target indexes), embedded, then
committed to the store as one atomic batch, then applied to the live indexes from the ops
the store logged. Indexes are derived data: they are saved on :meth:`Collection.flush` /
:meth:`Collection.close`, caught up from the store's log on open, and rebuilt when missing
or corrupt.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterable, Mapping, Sequence

from ..indexes._allowed import AllowedCache, AllowedIds
from ..indexes._broken import StoredConfig, UnavailableIndex, describe_failure, saved_seq
from ..errors import BrokenIndexError, ConfigError, DuplicateIdError, IndexUpdateError, NotFoundError, ValidationError
from ..model._filters import Filter, filter_key, parse_filter
from ..retrieval._fusion import Fusion
from ..indexes._index import Index, IndexContext
from ..indexes._handle import IndexHandle
from ..indexes._options import changed_options, check_change
from .._util.log import get_logger
from .._plugins._host import get_registry
from .._util.progress import progress_for
from ..model._hit import attach_batch
from ..model._hit import rank_hits
from ..model._hit import Hit
from ..model._record import Link, Record, Scope
from ..model._query import Query
from ..model._checks import check_json_value, validate_k
from .._plugins._registry import ComponentConfig, Registry
from ._input import RecordInput, coerce_ids, coerce_records
from ..model._binding import ScopeBinding, namespace_scope
from ..embedders._space import Space, fill_vectors, prepare_query, query_vector
from ..stores._store import Store, WriteBatch
from ..indexes._vector_reader import VectorReader

if TYPE_CHECKING:
    from ..llms._llm import LLMs

__all__ = ["Collection"]

log = get_logger("memcore.collection")

RESERVED_STATE = frozenset({"indexes", "spaces"})
INDEX_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
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


class Collection:
    """One store + named indexes. Use :func:`memcore.open` or :meth:`Collection.create` to get one."""

    def __init__(
        self,
        store: Store,
        spaces: Mapping[str, Space],
        registry: Registry,
        path: str | Path | None = None,
        declared: Mapping[str, tuple[str, Mapping[str, Any] | ComponentConfig]] | None = None,
        llms: "LLMs | None" = None,
    ):
        """``declared``: the indexes the settings declare (``{name: (kind, options)}``); a
        stored index whose declared options differ only in search-time fields is loaded once,
        with the declared ones (:meth:`ensure_indexes` then finds nothing to change).
        ``llms``: the memory's LLMs, handed to the indexes (``IndexContext.llms``)."""
        self.llms = llms
        self.store = store
        self.spaces = dict(spaces)
        self.registry = registry
        self.path = Path(path) if path is not None else None
        self._indexes: dict[str, IndexHandle] = {}
        self._lock = threading.RLock()
        self._closed = False
        self._allowed_sets = AllowedCache()
        self._binding = ScopeBinding()
        self._pin_spaces()
        for name, stored in store.state_items("indexes").items():
            definition = registry.canonical_kinds(stored)  # recorded before a kind was renamed: its current name
            wanted, changed = self._search_time_update(name, definition, (declared or {}).get(name))
            handle = self._indexes[name] = self._open_stored(name, wanted)
            if changed and handle.error is None:
                self._record_reconfigured(handle, changed)

    # -- construction --------------------------------------------------------------------

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
            store = store_reg.factory(store_reg.parse_config({}, "store"), Path(path) if path is not None else None)
        if spaces is None:
            emb_reg = registry.get("embedders", "hashing")
            emb = emb_reg.factory(emb_reg.parse_config({}, "spaces.default.embedder"))
            spaces = {"default": Space("default", emb.dim, emb, "hashing")}
        try:
            return cls(store, spaces, registry, path)
        except BaseException:
            if owned:  # a failed open must not keep the writer lock
                store.close()
            raise

    def _pin_spaces(self) -> None:
        pinned = self.store.state_items("spaces")
        new = {}
        for name, space in self.spaces.items():
            if name in pinned:
                space.check_pinned(self._current_pin(pinned[name]))
            else:
                new[("spaces", name)] = space.manifest()
        if new and not self.store.read_only:
            self.store.apply(WriteBatch(state=new))

    def _current_pin(self, pin: Any) -> Any:
        """A space pin with the embedder's current kind name (pinned before it was renamed)."""
        if isinstance(pin, Mapping) and isinstance(pin.get("embedder"), str):
            return {**pin, "embedder": self.registry.canonical("embedders", pin["embedder"])}
        return pin

    def _make_handle(self, name: str, kind: str, options: Mapping[str, Any] | ComponentConfig) -> IndexHandle:
        reg = self.registry.get("indexes", kind, location=f"indexes.{name}.kind")
        kind = reg.name  # a deprecated spelling: the current one (the key of the index's query modes)
        config = reg.parse_config(options, f"indexes.{name}")
        directory = self.path / "indexes" / name if self.path is not None else None
        context = IndexContext(
            name=name,
            spaces={n: s.info for n, s in self.spaces.items()},
            kind=kind,
            vectors=VectorReader(self.store, name),
            directory=directory,
            llms=self.llms,
        )

        def make() -> Index:
            index = reg.factory(config, context)
            if not isinstance(index, Index):
                raise ConfigError(f"index kind {kind!r} (plugin {reg.plugin}) built a {type(index).__name__}, not a memcore.Index", location=f"indexes.{name}")
            return index

        index = make()
        for space in index.requires.spaces:
            context.space(space)  # raises ConfigError for an undeclared space
        return IndexHandle(name, kind, config, index, make, directory=directory, canonical_kinds=self.registry.canonical_kinds)

    def _search_time_update(
        self, name: str, stored: Mapping[str, Any], declared: tuple[str, Mapping[str, Any] | ComponentConfig] | None
    ) -> tuple[Mapping[str, Any], list[str]]:
        """The definition to open a stored index with, and the search-time options that change.

        Only a declared definition of the same kind that changes nothing but search-time
        options replaces the stored one; anything else (no declaration, an invalid or a
        build-time change) opens the stored definition, and :meth:`ensure_indexes` reports it.
        """
        if declared is None or not isinstance(stored, Mapping) or self.registry.canonical("indexes", declared[0]) != stored.get("kind"):
            return stored, []
        kind, options = self.registry.canonical("indexes", declared[0]), declared[1]
        try:
            config = self.registry.get("indexes", kind).parse_config(options, f"indexes.{name}")
            changed = check_change(name, kind, stored.get("config") or {}, config)
        except Exception:  # noqa: BLE001 - reported by ensure_indexes with the settings' location
            return stored, []
        if not changed:
            return stored, []
        return {"kind": kind, "config": config.model_dump(mode="json")}, changed

    def _record_reconfigured(self, handle: IndexHandle, changed: list[str]) -> None:
        """Store the new search-time values of ``handle`` (its manifest follows on the next save)."""
        if not self.store.read_only:
            self.store.apply(WriteBatch(state={("indexes", handle.name): handle.definition()}))
        handle.dirty = True
        log.info("index.reconfigured", name=handle.name, options=changed)

    def _open_stored(self, name: str, definition: Mapping[str, Any]) -> IndexHandle:
        """Build, load and catch up a stored index; a failure gives a broken handle, never a failed open."""
        try:
            handle = self._make_handle(name, definition["kind"], definition["config"])
            self._open_handle(handle)
            return handle
        except Exception as exc:  # noqa: BLE001 - any plugin failure: the memory still opens
            return self._broken(name, definition, exc)

    def _broken(self, name: str, definition: Mapping[str, Any], exc: BaseException) -> IndexHandle:
        """A handle for an index that cannot be used; reported, searchable only after a rebuild."""
        reason = describe_failure(exc)
        kind = str(definition.get("kind", "?")) if isinstance(definition, Mapping) else "?"
        raw = definition.get("config") if isinstance(definition, Mapping) else None
        config = StoredConfig.model_validate({**(raw if isinstance(raw, Mapping) else {}), "kind": kind})
        directory = self.path / "indexes" / name if self.path is not None else None

        def make() -> Index:
            raise BrokenIndexError(name, reason)

        handle = IndexHandle(name, kind, config, UnavailableIndex(name, reason), make, directory=directory, error=reason)
        handle.applied_seq = saved_seq(directory, self.store.last_seq())
        log.error("index.broken", name=name, kind=kind, error=reason)
        return handle

    def _open_handle(self, handle: IndexHandle) -> None:
        saved = handle.load()
        last = self.store.last_seq()
        if saved is None or saved < self.store.log_start() or saved > last:
            # filled vectors are kept: an index that reads its vectors from the store finds them next time
            handle.rebuild(self.store, self._fill_for(handle, persist=not self.store.read_only))
            return
        handle.applied_seq = saved
        self._catch_up(handle)

    # -- indexes -------------------------------------------------------------------------

    def create_index(self, name: str, kind: str, *, exist_ok: bool = False, populate: bool = False, **options: Any) -> None:
        """Create an index ``name`` of a registered ``kind`` with its own options.

        ``exist_ok``: no error when an index of that name and kind exists with the same
        build-time options; changed search-time options (``ComponentConfig.search_time``)
        are applied, a changed build-time option raises :class:`ConfigError` naming it.
        ``populate``: fill the new index with every record of the collection
        (:meth:`populate_index`); otherwise it starts empty.
        """
        with self._lock:
            self._check_open()
            existing = self._indexes.get(name)
            if existing is not None and exist_ok:
                self.ensure_indexes({name: (kind, options)})
                return
            handle = self._new_handle(name, kind, options)
            if existing is not None:
                raise ConfigError(f"index {name!r} already exists ({existing.kind}); drop it first", location=f"indexes.{name}")
            self._add_handle(handle)
            if populate:
                self.populate_index(name)

    def populate_index(self, name: str, *, batch_size: int = 512) -> int:
        """Add every stored record that is not yet in index ``name`` to it, in batches
        (each batch atomic); returns how many were added. Progress goes to the reporter of
        :mod:`memcore._util.progress` (the CLI's progress bar)."""
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValidationError(f"batch_size must be a positive int, not {batch_size!r}")
        with self._lock:
            self._handle(name)
            started = time.perf_counter()
            members = set(self.store.ids(index=name))
            todo = [i for i in self.store.ids() if i not in members]
            with progress_for(f"Populating {name}", len(todo)) as update:
                for start in range(0, len(todo), batch_size):
                    chunk = todo[start : start + batch_size]
                    self.insert_to_index(name, chunk)
                    update(len(chunk))
            log.info("index.populated", name=name, records=len(todo), seconds=round(time.perf_counter() - started, 3))
            return len(todo)

    def ensure_index(self, name: str, kind: str, **options: Any) -> bool:
        """Make sure index ``name`` exists with this kind and options; True when it was created.

        Missing: created (its factory called once). Present with the same definition: nothing
        is built. Present otherwise: :class:`ConfigError`. See :meth:`ensure_indexes`.
        """
        return bool(self.ensure_indexes({name: (kind, options)}))

    def ensure_indexes(self, definitions: Mapping[str, tuple[str, Mapping[str, Any] | ComponentConfig]], *, populate: Iterable[str] = ()) -> list[str]:
        """:meth:`ensure_index` for several ``{name: (kind, options or config)}``: every
        definition is checked before any index is created. A read-only collection creates
        nothing. Returns the names of the indexes created.

        An existing index whose search-time options (``ComponentConfig.search_time``) differ
        is reloaded with them; a different kind or build-time option is a
        :class:`ConfigError` naming the option, both values and the rebuild command.
        Created indexes named in ``populate`` are filled from the store (:meth:`populate_index`).
        """
        with self._lock:
            self._check_open()
            new: list[IndexHandle] = []
            changes: list[tuple[IndexHandle, str, Mapping[str, Any] | ComponentConfig, list[str]]] = []
            for name, (kind, options) in definitions.items():
                existing = self._indexes.get(name)
                if existing is None and not self.store.read_only:
                    new.append(self._new_handle(name, kind, options))  # the one build: checks the spaces too
                    continue
                definition = self._definition(name, kind, options)
                if existing is not None and existing.definition() != definition:
                    config = self.registry.get("indexes", kind).parse_config(options, f"indexes.{name}")
                    current = self.registry.canonical("indexes", kind)
                    changed = check_change(name, current, existing.definition()["config"], config, old_kind=existing.kind)
                    changes.append((existing, kind, options, changed))
            for existing, kind, options, changed in changes:
                self._reconfigure(existing, kind, options, changed)
            for handle in new:
                self._add_handle(handle)
            wanted = set(populate)
            for handle in new:
                if handle.name in wanted:
                    try:
                        self.populate_index(handle.name)
                    except Exception as exc:  # noqa: BLE001 - a failed fill is a broken index, never a failed open
                        self._indexes[handle.name] = self._broken(handle.name, handle.definition(), exc)
                        handle.close_index()
            return [h.name for h in new]

    def _reconfigure(self, existing: IndexHandle, kind: str, options: Mapping[str, Any] | ComponentConfig, changed: list[str]) -> None:
        """Reload ``existing`` with new search-time options over its saved files (no rebuild)."""
        if existing.error is None and not existing.stale:
            existing.save()
        handle = self._new_handle(existing.name, kind, options)
        self._open_handle(handle)
        self._indexes[handle.name] = handle
        existing.close_index()
        self._record_reconfigured(handle, changed)

    def _definition(self, name: str, kind: str, options: Mapping[str, Any] | ComponentConfig) -> dict[str, Any]:
        """What the store would keep about this index (validated, nothing built)."""
        if not isinstance(name, str) or not INDEX_NAME.match(name):
            raise ValidationError(f"bad index name {name!r}: letters, digits, '_', '.', '-' (max 128)")
        reg = self.registry.get("indexes", kind, location=f"indexes.{name}.kind")
        config = reg.parse_config(options, f"indexes.{name}")
        return {"kind": reg.name, "config": config.model_dump(mode="json")}

    def _add_handle(self, handle: IndexHandle) -> None:
        handle.set_aside()  # files the store does not know of are kept, never deleted
        applied = self.store.apply(WriteBatch(state={("indexes", handle.name): handle.definition()}))
        handle.applied_seq = applied.seq
        self._indexes[handle.name] = handle
        log.info("index.created", name=handle.name, kind=handle.kind)

    def check_index(self, name: str, kind: str, **options: Any) -> None:
        """Validate an index definition (name, kind, options, spaces) without creating anything."""
        self._new_handle(name, kind, options)

    def _new_handle(self, name: str, kind: str, options: Mapping[str, Any] | ComponentConfig) -> IndexHandle:
        if not isinstance(name, str) or not INDEX_NAME.match(name):
            raise ValidationError(f"bad index name {name!r}: letters, digits, '_', '.', '-' (max 128)")
        return self._make_handle(name, kind, options)

    def drop_index(self, name: str) -> None:
        """Remove an index, its membership and its files (records stay)."""
        with self._lock:
            handle = self._handle(name, usable=False)
            self.store.apply(WriteBatch(drop_indexes=[name], state={("indexes", name): None}))
            del self._indexes[name]
            handle.remove_files()
            handle.close_index()  # after the files: nothing saved names its data any more
            log.info("index.dropped", name=name)

    def list_indexes(self) -> list[dict[str, Any]]:
        """Each index: name, kind, config, size, score name and requirements."""
        with self._lock:
            self._sync()
            return [
                {
                    "name": h.name,
                    "kind": h.kind,
                    "config": h.config.model_dump(mode="json"),
                    "size": len(h.index),
                    "score": h.index.score_name,
                    "requires": {"spaces": list(h.index.requires.spaces), "text": h.index.requires.text, "links": h.index.requires.links},
                    "status": "ok" if h.error is None else "broken",
                    **({"error": h.error} if h.error is not None else {}),
                }
                for h in self._indexes.values()
            ]

    def index(self, name: str) -> Index:
        """The live index object (for kind-specific reads); prefer :meth:`retrieve`."""
        with self._lock:
            return self._handle(name).index

    def has_index(self, name: str) -> bool:
        """True when an index of that name exists."""
        return name in self._indexes

    def rebuild_index(self, name: str, progress: Callable[[int], None] | None = None, **options: Any) -> int:
        """Rebuild an index from the store; returns the number of records indexed.

        A broken index is built afresh from its stored definition: this is how it is repaired.
        ``options`` (all of the index's options, as for :meth:`create_index`) give it a new
        definition first -- the way to change a build-time option. Without ``progress``,
        progress goes to the reporter of :mod:`memcore._util.progress`.
        """
        with self._lock:
            handle = self._repairable(name)
            if options:
                new = self._new_handle(name, handle.kind, options)
                if new.definition() != handle.definition():
                    self.store.apply(WriteBatch(state={("indexes", name): new.definition()}))
                    handle.remove_files()
                    handle.close_index()
                    self._indexes[name] = new
                    log.info("index.redefined", name=name, options=changed_options(handle.definition()["config"], new.definition()["config"]))
                    handle = new
            fill = self._fill_for(handle, persist=not self.store.read_only)
            if progress is not None:
                count = self._rebuild(handle, fill, progress)
            else:
                with progress_for(f"Rebuilding {name}", self.store.count(index=name)) as update:
                    count = self._rebuild(handle, fill, update)
            handle.save()
            return count

    def _repairable(self, name: str) -> IndexHandle:
        """The handle to rebuild: a broken one is made again from its stored definition
        (BrokenIndexError when that still fails)."""
        handle = self._handle(name, usable=False)
        if handle.error is None:
            return handle
        definition = handle.definition()
        try:
            return self._make_handle(name, definition["kind"], definition["config"])
        except Exception as exc:  # noqa: BLE001 - any plugin failure stays a reported, typed state
            self._indexes[name] = self._broken(name, definition, exc)
            raise BrokenIndexError(name, describe_failure(exc)) from None

    def _rebuild(self, handle: IndexHandle, fill: Callable[[list[Record]], list[Record]], progress: Callable[[int], None] | None) -> int:
        """Rebuild ``handle`` and install it; a failure leaves it broken (reported) and raises BrokenIndexError."""
        try:
            count = handle.rebuild(self.store, fill, progress)
        except Exception as exc:  # noqa: BLE001
            self._indexes[handle.name] = self._broken(handle.name, handle.definition(), exc)
            raise BrokenIndexError(handle.name, describe_failure(exc)) from None
        if self._indexes.get(handle.name) is not handle:
            self._indexes[handle.name] = handle
            log.info("index.repaired", name=handle.name, records=count)
        return count

    def _handle(self, name: str, *, usable: bool = True) -> IndexHandle:
        """The handle of index ``name``; with ``usable`` a broken one raises BrokenIndexError."""
        self._check_open()
        try:
            handle = self._indexes[name]
        except KeyError:
            raise NotFoundError(f"no index named {name!r}; indexes: {sorted(self._indexes) or '(none)'}") from None
        if handle.stale and handle.error is None:
            try:
                handle.rebuild(self.store, self._fill_for(handle, persist=not self.store.read_only))
            except Exception as exc:  # noqa: BLE001 - reported as a broken index, never a raw failure
                handle = self._indexes[name] = self._broken(name, handle.definition(), exc)
        if usable and handle.error is not None:
            raise BrokenIndexError(name, handle.error)
        return handle

    def _targets(self, indexes: str | Iterable[str] | None) -> list[IndexHandle]:
        if indexes is None:
            return list(self._indexes.values())
        if isinstance(indexes, str):
            indexes = [indexes]
        return [self._handle(n) for n in dict.fromkeys(indexes)]

    # -- writes --------------------------------------------------------------------------

    def insert(
        self,
        items: RecordInput | Sequence[RecordInput],
        *,
        indexes: str | Iterable[str] | None = None,
        scope: Scope | Mapping[str, Any] | None = None,
        state: StateChanges | None = None,
    ) -> list[str]:
        """Insert records into the store and the chosen indexes (all when ``indexes`` is None).

        Items are :class:`Record`, dicts (``text``, ``id``, ``metadata``, ``vectors``,
        ``links``, ``scope``) or plain strings. Re-inserting identical content is a no-op
        (besides index membership); a different record under an existing id raises
        :class:`DuplicateIdError` (use :meth:`upsert`). Returns the ids, in order.
        """
        with self._lock:
            self._check_open()
            records = self._coerce(items, scope)
            targets = self._targets(indexes)
            existing = self._existing(records)
            ids = [r.id for r in records]
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
            fill_vectors(self.spaces, fresh, spaces)
            changed_old = fill_vectors(self.spaces, kept, spaces)
            self._validate_for(targets, fresh + kept)
            if kept:
                members = self.store.memberships([r.id for r in kept])
                add = {h.name: [i for i in ids if h.name not in members.get(i, ())] for h in targets}
            else:
                add = {h.name: ids for h in targets}
            batch = WriteBatch(upserts=fresh + changed_old, add_membership={n: v for n, v in add.items() if v}, state=_state(state, self._binding))
            if not batch.is_empty():  # re-inserting what is already there changes nothing
                self._commit(batch, {r.id: r for r in fresh + kept} if kept else dict(zip(ids, records)))
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
        member_of = self.store.memberships([r.id for r in records if r.id in existing])
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
            fill_vectors(self.spaces, [r], self._spaces_of(handles))
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
            old = self.get(id)
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
            return self.get(id)

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
            found = {r.id: r for r in self.store.get(ids, with_vectors=False) if r is not None}
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
            members = self.store.memberships(ids)
            todo = [r for r in records if index not in members.get(r.id, ())]
            changed = fill_vectors(self.spaces, todo, self._spaces_of([handle]))
            self._validate_for([handle], todo)
            batch = WriteBatch(upserts=changed, add_membership={index: [r.id for r in todo]} if todo else {}, state=_state(state, self._binding))
            if not batch.is_empty():
                self._commit(batch, {r.id: r for r in todo})

    def remove_from_index(self, index: str, ids: str | Iterable[str], *, state: StateChanges | None = None) -> None:
        """Take records out of one index; they stay in the store and other indexes."""
        with self._lock:
            self._handle(index)
            ids = list(dict.fromkeys(coerce_ids(ids)))
            members = self.store.memberships(ids)
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
            members = self.store.memberships(ids)
            missing = [i for i in ids if from_index not in members.get(i, ())]
            if missing:
                raise NotFoundError(f"record(s) {missing[:5]} are not in index {from_index!r}; nothing was moved")
            todo = [r for r in records if to_index not in members.get(r.id, ())]
            changed = fill_vectors(self.spaces, todo, self._spaces_of([target]))
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
            ids = self.store.ids(where=None, scope=target)
            by_index: dict[str, int] = {}
            for names in self.store.memberships(ids).values():
                for name in names:
                    by_index[name] = by_index.get(name, 0) + 1
            state: dict[tuple[str, str], Any] = {}
            for namespace in self.store.state_namespaces():
                owner = namespace_scope(namespace)
                if owner is not None and target.covers(owner):
                    state.update(((namespace, key), None) for key in self.store.state_items(namespace))
            if ids or state:
                self._commit(WriteBatch(deletes=ids, state=state), {})
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
        return self.store.get_state(self._binding.namespace(namespace), key, default)

    def state_items(self, namespace: str) -> dict[str, Any]:
        """All values of a state namespace (the bound scope's own)."""
        return self.store.state_items(self._binding.namespace(namespace))

    def link(self, source: str, target: str, relation: str = "related", weight: float = 1.0) -> None:
        """Add (or re-weight) the edge ``source -relation-> target``."""
        with self._lock:
            old = self.get(source)
            self.get(target)
            links = [l for l in old.links if (l.target, l.relation) != (target, relation)]
            self.update(source, links=[*links, Link(target, relation, weight)])

    def unlink(self, source: str, target: str, relation: str | None = None) -> int:
        """Remove edges from ``source`` to ``target`` (of one relation, or all); returns how many."""
        with self._lock:
            old = self.get(source)
            keep = [l for l in old.links if not (l.target == target and (relation is None or l.relation == relation))]
            if len(keep) != len(old.links):
                self.update(source, links=keep)
            return len(old.links) - len(keep)

    # -- reads ---------------------------------------------------------------------------

    def scoped(self, scope: Scope | Mapping[str, Any] | None) -> ContextManager[Scope | None]:
        """Bind ``scope`` for what runs inside the ``with`` block (this thread or task): every
        read sees only its records, writes stamp it on new records and keep component state
        per scope (see :mod:`memcore.model._binding`). ``None`` binds nothing new."""
        return self._binding.bind(scope)

    @property
    def bound_scope(self) -> Scope | None:
        """The scope the current call is bound to (None: unrestricted)."""
        return self._binding.scope

    def get(self, id: str) -> Record:
        """One record (NotFoundError when absent)."""
        return self._get_many([id])[0]

    def get_many(self, ids: Sequence[str]) -> list[Record | None]:
        """Records by id in order, None for unknown ids."""
        with self._lock:
            self._check_open()
            found = self.store.get(coerce_ids(ids))
            if self._binding.scope is None:
                return found
            return [r if r is not None and self._binding.covers(r) else None for r in found]

    def count(self, *, index: str | None = None, where: Mapping[str, Any] | None = None, scope: Scope | Mapping[str, Any] | None = None) -> int:
        """Number of records (in one index, matching a filter and scope)."""
        with self._lock:
            self._check_open()
            if index is not None:
                self._handle(index)
            return self.store.count(where=parse_filter(where), scope=self._binding.effective(scope), index=index)

    def ids(self, *, index: str | None = None, where: Mapping[str, Any] | None = None, scope: Scope | Mapping[str, Any] | None = None) -> list[str]:
        """Ids in insertion order (in one index, matching a filter and scope)."""
        with self._lock:
            self._check_open()
            if index is not None:
                self._handle(index)
            return self.store.ids(where=parse_filter(where), scope=self._binding.effective(scope), index=index)

    def retrieve(
        self,
        query: Query | str | Mapping[str, Any],
        *,
        index: str | None = None,
        k: int | None = None,
        where: Mapping[str, Any] | None = None,
        scope: Scope | Mapping[str, Any] | None = None,
        with_records: bool = True,
    ) -> list[Hit]:
        """The best ``k`` hits of one index for a query (text, vectors or a :class:`Query`)."""
        with self._lock:
            self._check_open()
            q = self.make_query(query, k=k, where=where, scope=scope)
            self._sync()
            handle = self._handle(index) if index is not None else self._only_index()
            hits = self.search_index(handle.name, q, q.k)
            return self.attach_records(hits) if with_records else hits

    def retrieve_multi(
        self,
        queries_by_index: Mapping[str, Query | str | Mapping[str, Any]],
        *,
        fusion: str | Mapping[str, Any] | Fusion = "rrf",
        k: int = 10,
        depth: int | None = None,
        where: Mapping[str, Any] | None = None,
        scope: Scope | Mapping[str, Any] | None = None,
        with_records: bool = True,
    ) -> list[Hit]:
        """Query several indexes (``depth`` hits each, default ``max(k, 50)``) and fuse the lists
        (``fusion`` default ``rrf``, from memcore-rrf; the core's own fusion is ``concat``)."""
        with self._lock:
            self._check_open()
            validate_k(k)
            depth = validate_k(depth if depth is not None else max(k, 50))
            if not queries_by_index:
                raise ValidationError("retrieve_multi needs at least one index")
            fuse = self.build_fusion(fusion)
            self._sync()
            lists = {}
            for name, query in queries_by_index.items():
                q = self.make_query(query, k=depth, where=where, scope=scope)
                lists[name] = self.search_index(self._handle(name).name, q, depth)
            hits = fuse(lists, k)
            return self.attach_records(hits) if with_records else hits

    # -- helpers shared with pipelines and services --------------------------------------

    def make_query(self, query: Query | str | Mapping[str, Any], *, k: int | None = None, where: Any = None, scope: Any = None) -> Query:
        """Coerce and validate a query, applying overrides."""
        changes: dict[str, Any] = {}
        if k is not None:
            changes["k"] = k
        if where is not None:
            changes["where"] = where
        if scope is not None:
            changes["scope"] = scope
        if type(query) is str:  # a text (Memory.query): one Query built with the overrides, not one then a copy
            q = Query(text=query, **changes)
        else:
            q = Query.coerce(query)
            if changes:
                q = q.evolve(**changes)
        q.parsed_where()  # a bad filter fails here, before any search; parsed once per query
        if q.vectors:
            spaces = self.spaces
            for space, vector in q.vectors.items():  # caller-given vectors: declared space, right dimension
                declared = spaces.get(space)
                if declared is None:
                    raise ValidationError(f"the query has a vector for undeclared space {space!r}; spaces: {sorted(spaces)}")
                declared.check_query_vector(vector)
        return q

    def search_index(self, name: str, query: Query, k: int, *, list_name: str | None = None) -> list[Hit]:
        """Embed what the index needs, resolve filters to ``allowed``, and search.

        Each hit's provenance is its rank and score in this list (named ``list_name``,
        default the index name).
        """
        with self._lock:
            handle = self._handle(name)
            if self.store.read_only:  # pipelines search through here: readers catch up first
                self._catch_up(handle)
            if type(k) is not int or k <= 0:  # validate_k's common case, without its call: this runs for every query
                validate_k(k)
            index = handle.index
            if self._binding.scope is not None:  # the caller's scope, whatever the query says
                bound = self._binding.effective(query.scope)
                if bound != query.scope:
                    query = query.evolve(scope=bound)
            q = prepare_query(self.spaces, query, index.requires)
            index.validate_query(q)
            if q.where is None and q.scope is None:  # neither filter nor scope: nothing to resolve
                allowed = None
            else:
                allowed = self._allowed(q, name)
                if allowed is not None and not allowed:
                    return []
            hits = index.search(q, k, allowed)
            rank_hits(hits, list_name or name, name)  # each hit's rank and score here (its Contribution built on first read), its index when it names none
            return hits

    def build_fusion(self, fusion: str | Mapping[str, Any] | Fusion) -> Fusion:
        """A fusion strategy from a registered name, a config dict or an instance."""
        if isinstance(fusion, Fusion):
            return fusion
        data = {"kind": fusion} if isinstance(fusion, str) else dict(fusion)
        kind = data.pop("kind", None)
        reg = self.registry.get("fusions", str(kind), location="fusion")
        built: Fusion = reg.factory(reg.parse_config(data, "fusion"))
        return built

    def attach_records(self, hits: list[Hit]) -> list[Hit]:
        """Attach each hit's record (without vectors); hits whose record vanished are dropped.

        The records are read now and each is built on first access of ``hit.record`` (see
        :mod:`memcore.model._record_batch`)."""
        if self._binding.scope is not None:
            hidden = set(self._invisible([h.id for h in hits]))
            hits = [h for h in hits if h.id not in hidden] if hidden else hits
        return attach_batch(hits, self.store.get_batch([h.id for h in hits]))

    def query_vector(self, query: Query, space: str) -> Any:
        """The query's vector in ``space`` (embedded once and cached on the query)."""
        return query_vector(self.spaces, query, space)

    def vectors(self, ids: Sequence[str], space: str) -> tuple[Any, Any]:
        """Stored vectors of ``ids`` in ``space``: ``(matrix, present mask)`` (records outside
        the bound scope are absent: zero rows, mask False)."""
        ids = list(ids)
        matrix, present = self.store.vectors(ids, space)
        hidden = set(self._invisible(ids))
        if hidden:
            for row, rid in enumerate(ids):
                if rid in hidden:
                    matrix[row] = 0
                    present[row] = False
        return matrix, present

    # -- lifecycle -----------------------------------------------------------------------

    def flush(self) -> None:
        """Save every changed index to disk and prune the operation log they no longer need."""
        with self._lock:
            if self._closed or self.store.read_only:
                return
            for handle in self._indexes.values():
                handle.save()
            if self.path is not None and self._indexes:
                self.store.prune_log(min(h.applied_seq for h in self._indexes.values()))

    def close(self) -> None:
        """Flush and release the store (and its writer lock). Idempotent."""
        with self._lock:
            if self._closed:
                return
            try:
                self.flush()
            finally:
                self._closed = True
                for handle in self._indexes.values():
                    handle.close_index()
                self.store.close()

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
                "path": str(self.path) if self.path else None,
                "records": self.count(),
                "seq": self.store.last_seq(),
                "store_bytes": self.store.size_bytes(),
                "spaces": {n: s.manifest() for n, s in self.spaces.items()},
                "indexes": [
                    {**entry, "bytes": self._indexes[entry["name"]].size_bytes(), "stats": self._indexes[entry["name"]].index.stats()}
                    for entry in self.list_indexes()
                ],
            }

    # -- internals -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ValidationError("this collection is closed")

    def _sync(self) -> None:
        """Readers catch their indexes up with what the writer process committed."""
        if self.store.read_only:
            for handle in self._indexes.values():
                if handle.error is None:
                    self._catch_up(handle)

    def _catch_up(self, handle: IndexHandle) -> None:
        """Apply the logged ops the index has not seen; rebuild when the log no longer has them."""
        if handle.catch_up(self.store) is None:  # log start and ops are read in one snapshot
            handle.rebuild(self.store, self._fill_for(handle))

    def _only_index(self) -> IndexHandle:
        if len(self._indexes) == 1:
            return next(iter(self._indexes.values()))
        raise ValidationError(f"name the index to search (index=...); indexes: {sorted(self._indexes) or '(none)'}")

    def _coerce(self, items: RecordInput | Sequence[RecordInput], scope: Scope | Mapping[str, Any] | None) -> list[Record]:
        """A batch's records, scoped: the bound scope is the default and the limit."""
        records = coerce_records(items, self._binding.effective(scope), self.spaces)
        self._binding.stamp(records)
        return records

    def outside_scope(self, ids: Sequence[str]) -> list[str]:
        """The ids among ``ids`` the bound scope does not see (none when unbound): what a
        stage or service that holds ids from elsewhere (links, its own state) must drop."""
        return self._invisible(ids)

    def _invisible(self, ids: Sequence[str]) -> list[str]:
        """The ids among ``ids`` the bound scope does not see (none when unbound)."""
        bound = self._binding.scope
        if bound is None or not ids:
            return []
        key = (filter_key(None), tuple(bound.as_dict().items()))
        visible = self._allowed_sets.get(self.store.last_seq(), key, lambda: self.store.ids(where=None, scope=bound), None, bound)
        return [i for i in ids if i not in visible]

    def _check_visible(self, records: Iterable[Record]) -> None:
        """Existing records a scoped write names must be the caller's (else: unknown)."""
        if self._binding.scope is None:
            return
        hidden = [r.id for r in records if not self._binding.covers(r)]
        if hidden:
            raise NotFoundError(f"no record(s) {hidden[:5]} in this scope; nothing was written")

    def _existing(self, records: Sequence[Record]) -> dict[str, Record]:
        return {r.id: r for r in self.store.get([r.id for r in records]) if r is not None}

    def _get_many(self, ids: Sequence[str]) -> list[Record]:
        self._check_open()
        found = self.store.get(list(ids))
        if self._binding.scope is not None:
            found = [r if r is not None and self._binding.covers(r) else None for r in found]
        missing = [i for i, r in zip(ids, found) if r is None]
        if missing:
            raise NotFoundError(f"no record(s) {missing[:5]}")
        return found  # type: ignore[return-value]

    def _check_links(self, records: Sequence[Record], batch_ids: set[str]) -> None:
        targets = sorted({l.target for r in records for l in r.links} - batch_ids)
        if targets:
            present = self.store.memberships(targets)
            missing = [t for t in targets if t not in present] + self._invisible([t for t in targets if t in present])
            if missing:
                raise NotFoundError(f"link target(s) {missing[:5]} do not exist")

    def _spaces_of(self, handles: Iterable[IndexHandle]) -> list[str]:
        return list(dict.fromkeys(s for h in handles for s in h.index.requires.spaces))

    def _fill_for(self, handle: IndexHandle, persist: bool = False) -> Callable[[list[Record]], list[Record]]:
        spaces = self._spaces_of([handle])

        def fill(records: list[Record]) -> list[Record]:
            changed = fill_vectors(self.spaces, records, spaces)
            if changed and persist:
                self.store.apply(WriteBatch(upserts=changed))
            return records

        return fill

    def _validate_for(self, handles: Iterable[IndexHandle], records: Sequence[Record]) -> None:
        for h in handles:
            if records:
                h.index.validate(records)

    def _commit(self, batch: WriteBatch, cache: dict[str, Record]) -> None:
        applied = self.store.apply(batch)
        changed: dict[str, Record | None] = dict.fromkeys(batch.deletes)
        changed.update((r.id, r) for r in batch.upserts)  # deletes run first: an id in both ends upserted
        self._allowed_sets.advance(applied.seq - 1, applied.seq, changed)
        failures = []
        for handle in self._indexes.values():
            if handle.error is not None:
                continue  # broken: the store keeps its membership, a rebuild applies it
            try:
                handle.apply(applied.ops, self.store, cache)
                handle.applied_seq = applied.seq
            except Exception as exc:  # the store has the data; the index is rebuilt on next use
                handle.stale = True
                failures.append(f"{handle.name}: {type(exc).__name__}: {exc}")
                log.error("index.update_failed", name=handle.name, error=str(exc))
        if failures:
            raise IndexUpdateError("stored, but index update failed (rebuilt on next use): " + "; ".join(failures))

    def _allowed(self, query: Query, index: str) -> AllowedIds | None:
        """The ids the query's filter and scope allow, resolved once per store sequence and
        shared by every index (see :mod:`memcore.indexes._allowed`); None when the query has neither."""
        where = query.parsed_where()
        scope = query.scope if query.scope is not None and not query.scope.is_empty() else None
        if where is None and scope is None:
            return None
        key = (filter_key(where), tuple(scope.as_dict().items()) if scope is not None else ())
        return self._allowed_sets.get(self.store.last_seq(), key, lambda: self._resolve_allowed(where, scope), where, scope)

    def _resolve_allowed(self, where: Filter | None, scope: Scope | None) -> list[str]:
        # Ids the index does not hold are harmless in ``allowed`` (an index returns only ids it
        # holds), so the store skips the membership join: measured at 100k records it was the
        # costlier half of the query, and it can only shrink a set whose size is paid in SQL anyway.
        return self.store.ids(where=where, scope=scope)
