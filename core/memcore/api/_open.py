"""``memcore.open``: build a whole memory (store, spaces, indexes, pipeline, service) from settings."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Mapping

from ..collection._collection import Collection
from ..embedders._default import AUTO, default_embedder
from ..embedders._embedder import Embedder, Space
from ..errors import ConfigError
from ..llms._llm import LLMs
from .._plugins._host import get_registry
from .._plugins._registry import Registry
from .._util.log import get_logger
from ._memory import Memory
from ..services._service import Service
from ..settings import MemcoreSettings, load_settings, with_overrides
from ._migrate import check_complete
from ._check import CheckedSettings, check_built_service, check_settings
from ._store_file import check_store_secrets, read_store_entry, write_store_entry
from ._stored import StoredMemory, check_omitted, peek, record_settings, settings_document, stored_layer

__all__ = ["open", "Memory"]

log = get_logger("memcore.open")
_hinted: set[str] = set()
"""The creation hints already shown in this process (each is shown once)."""


def _build_spaces(settings: MemcoreSettings, checked: CheckedSettings) -> dict[str, Space]:
    spaces = {}
    for name, entry in settings.spaces.items():
        config = checked.spaces.get(name)
        if config is None:
            spaces[name] = Space(name, int(entry["dim"]), None, "none")
            continue
        embedder = checked.registrations[f"spaces.{name}"].build(config)  # looked up once, by check_settings
        if not isinstance(embedder, Embedder):
            raise ConfigError(f"embedder {config.kind!r} built a {type(embedder).__name__}, not a memcore.Embedder", location=f"spaces.{name}")
        if entry.get("dim") is not None and entry["dim"] != embedder.dim:
            raise ConfigError(f"dim {entry['dim']} differs from the embedder's {embedder.dim}", location=f"spaces.{name}.dim")
        spaces[name] = Space(name, int(embedder.dim), embedder, config.kind)
    return spaces


def _build_service(checked: CheckedSettings, collection: Collection) -> Service:
    registration = checked.registrations["service"]
    service = registration.build(checked.service, collection, checked.pipeline)
    if not isinstance(service, Service):
        raise ConfigError(f"service {checked.service.kind!r} built a {type(service).__name__}, not a memcore.Service", location="service")
    check_built_service(registration, checked.service, service)
    return service


def _resolve(settings: MemcoreSettings | str | os.PathLike[str] | Mapping[str, Any] | None, overrides: dict[str, Any]) -> MemcoreSettings:
    if isinstance(settings, MemcoreSettings):
        return with_overrides(settings, **overrides)  # they used to be dropped without a word
    if isinstance(settings, Mapping):
        return load_settings(None, **{**settings, **overrides})
    return load_settings(settings, **overrides)


def _auto_spaces(settings: MemcoreSettings) -> list[str]:
    """The spaces whose embedder is ``auto`` (resolved when the memory is opened)."""
    return [name for name, space in settings.spaces.items() if (space.get("embedder") or {}).get("kind") == AUTO]


def _resolve_auto(settings: MemcoreSettings, stored: StoredMemory | None, registry: Registry) -> tuple[MemcoreSettings, list[str]]:
    """``auto`` embedders made concrete: an existing space keeps the embedder it was created
    with (its pin), a new one gets :func:`memcore.embedders._default.default_embedder`.
    Returns the settings and the hints to show (the hashing fallback's, at creation)."""
    names = _auto_spaces(settings)
    if not names:
        return settings, []
    pins = stored.spaces if stored is not None else {}
    spaces = {name: dict(space) for name, space in settings.spaces.items()}
    hints: list[str] = []
    for name in names:
        options = {k: v for k, v in spaces[name]["embedder"].items() if k != "kind"}
        pinned = pins.get(name)
        if isinstance(pinned, Mapping) and isinstance(pinned.get("embedder"), str):
            kind = registry.canonical("embedders", pinned["embedder"])
        else:
            kind, hint = default_embedder()
            if hint is not None and hint not in hints:
                hints.append(hint)
        spaces[name]["embedder"] = {"kind": kind, **options}
    return settings.model_copy(update={"spaces": spaces}), hints


def _show(hints: list[str]) -> None:
    """Each creation hint once per process: a log warning and a Python warning."""
    for hint in hints:
        log.warning("memory.hint", hint=hint)
        if hint not in _hinted:
            _hinted.add(hint)
            warnings.warn(hint, UserWarning, stacklevel=3)


def _settings_for(
    settings: MemcoreSettings | str | os.PathLike[str] | Mapping[str, Any] | None, path: Any, overrides: dict[str, Any], registry: Registry
) -> tuple[MemcoreSettings, Path | None, StoredMemory | None]:
    """The settings to build with: ``settings`` as given; without them, the memory's own
    (stored in it when it was made, see :mod:`memcore.api._stored`) under the environment
    and ``overrides``, or the environment and the defaults for a new memory."""
    resolved = _resolve(settings, overrides)
    directory = Path(path) if path is not None else (Path(resolved.path) if resolved.path else None)
    named = read_store_entry(directory) if settings is None else None
    if named is not None:  # the memory's store is not the default: it is named in the directory
        entry, omitted = named
        resolved = load_settings(None, base={"store": entry}, **overrides)
        check_store_secrets(omitted, resolved.store)
    stored = peek(resolved, registry, directory, keep=named is not None) if settings is None or _auto_spaces(resolved) else None
    try:
        if settings is None and stored is not None and stored.settings is not None:
            resolved = load_settings(None, base=stored_layer(stored, registry), **overrides)
            check_omitted(stored, resolved)
    except BaseException:
        _drop(stored)
        raise
    return resolved, directory, stored


def _drop(stored: StoredMemory | None) -> None:
    """Close the store ``peek`` kept open, if any (the open failed before taking it)."""
    if stored is not None and stored.store is not None:
        stored.store.close()


def open(
    settings: MemcoreSettings | str | os.PathLike[str] | Mapping[str, Any] | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> Memory:
    """Build the memory declared by ``settings`` (an object, a TOML/YAML path, a dict) at the
    collection directory ``path``.

    Without ``settings``, an existing memory reopens with the settings it keeps about itself
    (those it was last opened with for writing, without secrets), under the ``MEMCORE_``
    environment and ``overrides``; a new one gets the environment and the defaults. Given
    settings are checked against the memory: search-time options apply, a changed build-time
    option or embedder is refused (with the rebuild command). A memory opened for writing
    keeps the settings it was opened with.

    Indexes declared in settings or required by the service are created when missing;
    existing ones are loaded and caught up from the store. Each index is built once.
    """
    registry = get_registry()
    resolved, directory, stored = _settings_for(settings, path, overrides, registry)
    try:
        resolved, hints = _resolve_auto(resolved, stored, registry)
        checked = check_settings(resolved, registry)  # every entry validated before anything opens
        spaces = _build_spaces(resolved, checked)
    except BaseException:
        _drop(stored)
        raise
    llms = LLMs(checked.llms, registry)  # each built on first use; indexes with an LLM step get them too
    kept = stored.take_store(resolved.store) if stored is not None else None
    store = kept if kept is not None else checked.registrations["store"].build(checked.store, directory)
    try:
        check_complete(store)  # a copy `memcore migrate` did not finish is not a memory
        declared = {name: (d.kind, d.config) for name, d in checked.indexes.items()}
        kinds = {d.kind: checked.registrations[f"indexes.{name}"] for name, d in checked.indexes.items()}
        collection = Collection(store, spaces, registry, directory, declared=declared, llms=llms, index_kinds=kinds)  # search-time changes: one load
        collection.ensure_indexes(
            declared,
            populate=[name for name, d in checked.indexes.items() if d.populate],
        )
        pipeline_error: ConfigError | None = None
        try:
            checked.pipeline.check(collection)
        except ConfigError as exc:  # a service with its own retrieval only needs it for Memory.query
            if getattr(checked.registrations["service"].factory, "uses_pipeline", True):
                raise
            pipeline_error = exc
        service = _build_service(checked, collection)
        checked.pipeline.bind_llms(llms)
        service.bind_llms(llms)
        document = settings_document(resolved, registry)
        record_settings(store, document)
        if not store.read_only:
            write_store_entry(directory, document["store"], [place for place in document.get("omitted", []) if place.startswith("store.")])
    except BaseException:
        store.close()
        llms.close()
        raise
    memory = Memory(resolved, collection, checked.pipeline, service, llms)
    memory.pipeline_error = pipeline_error
    memory.hints = tuple(hints)
    _show(hints)
    return memory
