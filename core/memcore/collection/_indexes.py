"""The index lifecycle of a collection: create, check, reconfigure, drop and rebuild indexes.

An index definition (name, kind, options) is validated in one place, :meth:`IndexLifecycle._config`;
every other step takes the config it returns. Opening a stored index never fails the open:
an index that cannot be built or loaded becomes a broken handle, reported and repaired by
:meth:`IndexLifecycle.rebuild_index`.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Iterable, Mapping

from .._plugins._registry import ComponentConfig
from .._util.log import get_logger
from .._util.progress import progress_for
from ..errors import BrokenIndexError, ConfigError, ValidationError
from ..indexes._broken import describe_failure
from ..indexes._handle import IndexHandle, generation_of, new_generation
from ..indexes._index import Index, IndexContext
from ..indexes._options import changed_options, check_change
from ..indexes._vector_reader import VectorReader
from ..model._record import Record
from ..stores._store import INDEX_DEFINITIONS, WriteBatch
from ._base import CollectionBase

__all__ = ["IndexLifecycle", "INDEX_NAME", "IndexOptions"]

log = get_logger("memcore.collection")

INDEX_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
_STORE_BATCH = 50_000
"""Records per membership batch when an index that reads the store is populated (no record is read)."""
IndexOptions = Mapping[str, Any] | ComponentConfig
"""An index's options: a settings entry, or a config its kind's model already validated."""


class IndexLifecycle(CollectionBase):
    """The index lifecycle part of :class:`memcore.Collection`."""

    def _pin_spaces(self) -> None:
        store = self._store
        pinned = store.state_items("spaces")
        new = {}
        for name, space in self._spaces.items():
            if name in pinned:
                space.check_pinned(self._current_pin(pinned[name]))
            else:
                new[("spaces", name)] = space.manifest()
        if new and not store.read_only:
            store.apply(WriteBatch(state=new))

    def _current_pin(self, pin: Any) -> Any:
        """A space pin with the embedder's current kind name (pinned before it was renamed)."""
        if isinstance(pin, Mapping) and isinstance(pin.get("embedder"), str):
            return {**pin, "embedder": self._state.registry.canonical("embedders", pin["embedder"])}
        return pin

    def _open_declared(self, declared: Mapping[str, tuple[str, IndexOptions]]) -> None:
        """Open every stored index; one that is declared too is opened once, with the declared
        config when it changes no build-time option (its search-time options then apply).

        A reader or a process of a shared store first notes the store's number of the last
        definition change (:attr:`memcore.plugin.LogTail.definitions`), before reading the
        definitions: a change after it is followed at the next catch-up."""
        state = self._state
        if self._follows_others():
            state.definitions = self._store.read_tail({}).definitions
        state.following = True
        try:
            for name, recorded in self._store.state_items(INDEX_DEFINITIONS).items():
                stored = state.registry.canonical_kinds(recorded)  # recorded before a kind was renamed: its current name
                config, changed = self._declared_config(name, stored, declared.get(name))
                wanted = {**stored, "config": config.model_dump(mode="json")} if changed and config is not None else stored
                handle = self._indexes[name] = self._open_stored(name, wanted, config)
                if changed and handle.error is None:
                    self._record_reconfigured(handle, changed)
        finally:
            state.following = False

    def _follow_definitions(self) -> None:
        """Make this collection's indexes those the store defines now: another process
        dropped, created, or dropped and created again an index (a new generation, maybe of
        another kind or options). A dropped index is let go (its files are the dropping
        process's to delete: searching it raises NotFoundError, as there); a new or
        re-created one is opened from the store as at open (its saved payload when it is of
        this generation, else rebuilt from the store's members). Indexes of an unchanged
        generation stay as they are (a search-time option another process changed included:
        this process keeps its own)."""
        state = self._state
        stored = {name: state.registry.canonical_kinds(recorded) for name, recorded in self._store.state_items(INDEX_DEFINITIONS).items()}
        state.following = True
        try:
            for name, handle in list(self._indexes.items()):
                definition = stored.get(name)
                if definition is not None and generation_of(definition) == handle.generation:
                    continue
                del self._indexes[name]
                handle.close_index()
                log.info("index.followed", name=name, change="dropped" if definition is None else "re-created")
            for name, definition in stored.items():
                if name not in self._indexes:
                    self._indexes[name] = self._open_stored(name, definition)
                    log.info("index.followed", name=name, change="opened", kind=self._indexes[name].kind)
        finally:
            state.following = False

    def _config(self, name: str, kind: str, options: IndexOptions) -> ComponentConfig:
        """The one parse of an index definition: the name checked, the options validated by
        the config model of ``kind``. A config of that kind the registry already validated
        (the settings ``memcore.open`` checked) is taken as it is, without a lookup. Every
        step below takes the config returned here."""
        if not isinstance(name, str) or not INDEX_NAME.match(name):
            raise ValidationError(f"bad index name {name!r}: letters, digits, '_', '.', '-' (max 128)")
        if isinstance(options, ComponentConfig) and options.kind == kind:
            return options
        # a deprecated spelling of the kind warns here and parses to the current name (config.kind)
        return self._state.registry.get("indexes", kind, location=f"indexes.{name}.kind").parse_config(options, f"indexes.{name}")

    def _new_handle(self, name: str, kind: str, options: IndexOptions, generation: str | None = None) -> IndexHandle:
        """Build index ``name`` (its factory called once) with the spaces it requires checked;
        ``generation``: the stored one (an index opened or reloaded), None for a new index."""
        config = self._config(name, kind, options)
        kind = config.kind  # a deprecated spelling: the current one (the key of the index's query modes)
        reg = self._state.index_kinds.get(kind) or self._state.registry.get("indexes", kind, location=f"indexes.{name}.kind")  # the factory
        directory = self._directory(name)
        context = IndexContext(
            name=name,
            spaces={n: s.info for n, s in self._spaces.items()},
            kind=kind,
            vectors=VectorReader(self._store, name),
            directory=directory,
            llms=self._state.llms,
            read_only=self._store.read_only,
        )

        def make() -> Index:
            index = reg.build(config, context)
            if not isinstance(index, Index):
                raise ConfigError(f"index kind {kind!r} (plugin {reg.plugin}) built a {type(index).__name__}, not a memcore.Index", location=f"indexes.{name}")
            return index

        index = make()
        for space in index.requires.spaces:
            context.space(space)  # raises ConfigError for an undeclared space
        return IndexHandle(name, kind, config, index, make, directory=directory, canonical_kinds=self._state.registry.canonical_kinds, generation=generation)

    def _declared_config(self, name: str, stored: Mapping[str, Any], declared: tuple[str, IndexOptions] | None) -> tuple[ComponentConfig | None, list[str]]:
        """The declared config to open a stored index with (None: open the stored one), and
        the search-time options it changes.

        Only a declared definition of the same kind that changes nothing but search-time
        options is used; anything else (no declaration, an invalid or a build-time change)
        opens the stored definition, and :meth:`ensure_indexes` reports it.
        """
        if declared is None or not isinstance(stored, Mapping) or self._state.registry.canonical("indexes", declared[0]) != stored.get("kind"):
            return None, []
        kind, options = self._state.registry.canonical("indexes", declared[0]), declared[1]
        try:
            config = self._config(name, kind, options)
            changed = check_change(name, kind, stored.get("config") or {}, config)
        except Exception:  # noqa: BLE001 - reported by ensure_indexes with the settings' location
            return None, []
        if changed or config.model_dump(mode="json") == stored.get("config"):
            return config, changed
        return None, []

    def _record_reconfigured(self, handle: IndexHandle, changed: list[str]) -> None:
        """Store the new search-time values of ``handle`` (its manifest follows on the next save)."""
        if not self._store.read_only:
            self._store.apply(WriteBatch(state={(INDEX_DEFINITIONS, handle.name): handle.stored_definition()}))
        handle.dirty = True
        log.info("index.reconfigured", name=handle.name, options=changed)

    def _open_stored(self, name: str, definition: Mapping[str, Any], config: ComponentConfig | None = None) -> IndexHandle:
        """Build (with ``config`` when given, else the stored one), load and catch up a stored
        index; a failure gives a broken handle, never a failed open."""
        try:
            handle = self._new_handle(name, definition["kind"], config if config is not None else definition["config"], generation_of(definition))
            self._open_handle(handle)
            return handle
        except Exception as exc:  # noqa: BLE001 - any plugin failure: the memory still opens
            return self._broken(name, definition, exc)

    def _open_handle(self, handle: IndexHandle) -> None:
        store = self._store
        saved = handle.load()
        last = store.last_seq()
        if saved is None or saved < store.log_start() or saved > last:
            # filled vectors are kept: an index that reads its vectors from the store finds them next time
            handle.rebuild(store, self._fill_for(handle, persist=not store.read_only))
            return
        handle.applied_seq = saved
        self._catch_up(handle)

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
            handle = self._handle(name)
            members = set(self._store.ids(index=name))
            todo = [i for i in self._store.ids() if i not in members]
            with progress_for(f"Populating {name}", len(todo)) as update:
                if handle.index.reads_store and self._scope.get() is None:
                    todo = self._join_in_store(handle, todo, update)
                for start in range(0, len(todo), batch_size):
                    chunk = todo[start : start + batch_size]
                    self.insert_to_index(name, chunk)
                    update(len(chunk))
            log.info("index.populated", name=name, records=len(todo), seconds=round(time.perf_counter() - started, 3))
            return len(todo)

    def _join_in_store(self, handle: IndexHandle, ids: list[str], update: Callable[[int], None]) -> list[str]:
        """Make the records of ``ids`` that already have the vectors of ``handle``'s spaces
        members of an index that reads the store's data itself (:attr:`Index.reads_store`),
        without reading them back: only their membership is written, in large batches (each
        atomic). Returns the ids still to add the ordinary way (a vector to embed first)."""
        missing: set[str] = set()
        for space in self._spaces_of([handle]):
            missing.update(self._store.missing_vectors(ids, space))
        ready = [i for i in ids if i not in missing]
        for start in range(0, len(ready), _STORE_BATCH):
            chunk = ready[start : start + _STORE_BATCH]
            self._commit(WriteBatch(add_membership={handle.name: chunk}), {})
            update(len(chunk))
        return [i for i in ids if i in missing]

    def ensure_index(self, name: str, kind: str, **options: Any) -> bool:
        """Make sure index ``name`` exists with this kind and options; True when it was created.

        Missing: created (its factory called once). Present with the same definition: nothing
        is built. Present otherwise: :class:`ConfigError`. See :meth:`ensure_indexes`.
        """
        return bool(self.ensure_indexes({name: (kind, options)}))

    def ensure_indexes(self, definitions: Mapping[str, tuple[str, IndexOptions]], *, populate: Iterable[str] = ()) -> list[str]:
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
            changes: list[tuple[IndexHandle, str, ComponentConfig, list[str]]] = []
            for name, (kind, options) in definitions.items():
                existing = self._indexes.get(name)
                if existing is None and not self._store.read_only:
                    new.append(self._new_handle(name, kind, options))  # the one build: checks the spaces too
                    continue
                config = self._config(name, kind, options)
                kind = config.kind  # a deprecated spelling: the current one
                if existing is not None and existing.definition() != {"kind": kind, "config": config.model_dump(mode="json")}:
                    changed = check_change(name, kind, existing.definition()["config"], config, old_kind=existing.kind)
                    changes.append((existing, kind, config, changed))
            for existing, kind, config, changed in changes:
                self._reconfigure(existing, kind, config, changed)
            for handle in new:
                self._add_handle(handle)
            wanted = set(populate)
            for handle in new:
                if handle.name in wanted:
                    try:
                        self.populate_index(handle.name)
                    except Exception as exc:  # noqa: BLE001 - a failed fill is a broken index, never a failed open
                        self._indexes[handle.name] = self._broken(handle.name, handle.stored_definition(), exc)
                        handle.close_index()
            return [h.name for h in new]

    def _reconfigure(self, existing: IndexHandle, kind: str, config: ComponentConfig, changed: list[str]) -> None:
        """Reload ``existing`` with new search-time options over its saved files (no rebuild)."""
        if existing.error is None and not existing.stale:
            existing.save()
        handle = self._new_handle(existing.name, kind, config, existing.generation)  # the same index, other search-time options
        self._open_handle(handle)
        self._indexes[handle.name] = handle
        existing.close_index()
        self._record_reconfigured(handle, changed)

    def _add_handle(self, handle: IndexHandle) -> None:
        handle.set_aside()  # files the store does not know of are kept, never deleted
        handle.generation = new_generation()  # a process holding an older index of this name follows the change
        batch = WriteBatch(state={(INDEX_DEFINITIONS, handle.name): handle.stored_definition()})
        if self._store.shared:  # a process that had not seen the name dropped may have written members into it
            batch.drop_indexes.append(handle.name)
        applied = self._store.apply(batch)
        handle.applied_seq = applied.seq
        self._indexes[handle.name] = handle
        log.info("index.created", name=handle.name, kind=handle.kind)

    def check_index(self, name: str, kind: str, **options: Any) -> None:
        """Validate an index definition (name, kind, options, spaces) without creating anything."""
        self._new_handle(name, kind, options)

    def drop_index(self, name: str) -> None:
        """Remove an index, its membership and its files (records stay)."""
        with self._lock:
            handle = self._handle(name, usable=False)
            self._store.apply(WriteBatch(drop_indexes=[name], state={(INDEX_DEFINITIONS, name): None}))
            del self._indexes[name]
            handle.remove_files()
            handle.close_index()  # after the files: nothing saved names its data any more
            log.info("index.dropped", name=name)

    def index(self, name: str) -> Index:
        """The live index object (for kind-specific reads; it bypasses scopes): prefer :meth:`retrieve`."""
        with self._lock:
            return self._handle(name).index

    def rebuild_index(self, name: str, progress: Callable[[int], None] | None = None, **options: Any) -> int:
        """Rebuild an index from the store; returns the number of records indexed.

        A broken index is built afresh from its stored definition: this is how it is repaired.
        ``options`` (all of the index's options, as for :meth:`create_index`) give it a new
        definition first -- the way to change a build-time option. Without ``progress``,
        progress goes to the reporter of :mod:`memcore._util.progress`.
        """
        with self._lock:
            store = self._store
            handle = self._repairable(name)
            if options:
                new = self._new_handle(name, handle.kind, options)
                if new.definition() != handle.definition():
                    new.generation = new_generation()  # another index: other processes build theirs again
                    store.apply(WriteBatch(state={(INDEX_DEFINITIONS, name): new.stored_definition()}))
                    handle.remove_files()
                    handle.close_index()
                    self._indexes[name] = new
                    log.info("index.redefined", name=name, options=changed_options(handle.definition()["config"], new.definition()["config"]))
                    handle = new
            fill = self._fill_for(handle, persist=not store.read_only)
            if progress is not None:
                count = self._rebuild(handle, fill, progress)
            else:
                with progress_for(f"Rebuilding {name}", store.count(index=name)) as update:
                    count = self._rebuild(handle, fill, update)
            handle.save()
            return count

    def _repairable(self, name: str) -> IndexHandle:
        """The handle to rebuild: a broken one is made again from its stored definition
        (BrokenIndexError when that still fails)."""
        handle = self._handle(name, usable=False)
        if handle.error is None:
            return handle
        definition = handle.stored_definition()
        try:
            return self._new_handle(name, definition["kind"], definition["config"], handle.generation)
        except Exception as exc:  # noqa: BLE001 - any plugin failure stays a reported, typed state
            self._indexes[name] = self._broken(name, definition, exc)
            raise BrokenIndexError(name, describe_failure(exc)) from None

    def _rebuild(self, handle: IndexHandle, fill: Callable[[list[Record]], list[Record]], progress: Callable[[int], None] | None) -> int:
        """Rebuild ``handle`` and install it; a failure leaves it broken (reported) and raises BrokenIndexError."""
        try:
            count = handle.rebuild(self._store, fill, progress)
        except Exception as exc:  # noqa: BLE001
            self._indexes[handle.name] = self._broken(handle.name, handle.stored_definition(), exc)
            raise BrokenIndexError(handle.name, describe_failure(exc)) from None
        if self._indexes.get(handle.name) is not handle:
            self._indexes[handle.name] = handle
            log.info("index.repaired", name=handle.name, records=count)
        return count
