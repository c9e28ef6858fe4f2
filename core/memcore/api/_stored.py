"""The settings a memory keeps about itself, so that ``memcore.open(path=P)`` reopens it as
it was made.

What is kept: one JSON document in the store's component state (namespace ``memory``,
key ``settings``): the store, spaces, pipeline, service and LLM entries as they were last
opened for writing, without their secrets (:mod:`memcore._plugins._secrets`: the fields
a config marks secret, secret-named keys, URLs with a password; ``*_env`` references
stay) and without the store's open mode (``read_only``). The places of the secrets left
out are listed under ``omitted``: reopening without settings asks for them instead of
silently using a default. The indexes are not in it: the store already records every
index definition (created, dropped or reconfigured through the API or the CLI), and
those are what a reopened memory declares.

A memory created before memcore kept this document has none: it opens as before (the
environment and the defaults), and gets one the first time it is opened for writing.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from .._plugins._registry import Registry
from .._plugins._secrets import secret_field_names, strip_secrets
from ..errors import ConfigError, MemcoreError
from ..stores._store import Store, WriteBatch
from ._check import service_required_indexes

if TYPE_CHECKING:
    from ..settings import MemcoreSettings

__all__ = [
    "NAMESPACE",
    "KEY",
    "StoredMemory",
    "peek",
    "stored_layer",
    "check_omitted",
    "secrets_needed",
    "settings_document",
    "store_document",
    "record_settings",
]

NAMESPACE, KEY = "memory", "settings"
"""Where the document lives in the store's component state."""

FORMAT = 1
"""The document's format version."""

SECTIONS = ("store", "spaces", "pipeline", "service", "llms")
"""The settings sections a memory keeps (indexes come from the store's index definitions)."""

OPEN_MODE = ("read_only",)
"""Store options that say how this process opens the store, not what the memory is."""


@dataclass(frozen=True)
class StoredMemory:
    """What an existing memory's store says about itself, read before it is opened."""

    settings: dict[str, Any] | None
    """The settings document (None: a memory created before memcore kept one)."""
    spaces: dict[str, Any] = field(default_factory=dict)
    """The space pins: ``{space: {"dim", "embedder", "model_id"}}``."""
    indexes: dict[str, Any] = field(default_factory=dict)
    """The stored index definitions: ``{name: {"kind", "config"}}``."""
    store: Store | None = None
    """The store opened to read this, left open (``peek(keep=True)``) for the memory to use
    when it opens that same store entry; whoever holds it closes it."""
    store_entry: dict[str, Any] | None = None
    """The store entry ``store`` was opened with."""

    def take_store(self, entry: Mapping[str, Any]) -> Store | None:
        """The kept store when it was opened with ``entry``; closed (None) otherwise."""
        if self.store is None:
            return None
        if dict(entry) == self.store_entry:
            return self.store
        self.store.close()
        return None


def peek(settings: "MemcoreSettings", registry: Registry, directory: Any, *, keep: bool = False) -> StoredMemory | None:
    """Read what the store of ``settings`` at ``directory`` holds about its memory; None when
    there is no memory there yet, or it cannot be read (the real open then reports why).

    The store is opened read-only when its kind can be, and closed. With ``keep`` (the
    memory is known to exist: opening its store creates nothing), it is opened as
    ``settings`` say and left open in the result for the memory to reuse
    (:meth:`StoredMemory.take_store`): a store that is slow to open (an embedded server)
    opens once."""
    entry = dict(settings.store)
    registration = registry.get("stores", entry.get("kind", "sqlite"), location="store.kind")
    options = {k: v for k, v in entry.items() if k != "kind"}
    if "read_only" in registration.config_model.model_fields and not keep:
        options["read_only"] = True
    try:
        store = registration.factory(registration.parse_config(options, "store"), directory)
    except (MemcoreError, OSError):
        return None
    try:
        document = store.get_state(NAMESPACE, KEY)
        stored = StoredMemory(document if isinstance(document, dict) else None, dict(store.state_items("spaces")), dict(store.state_items("indexes")))
    except BaseException:
        store.close()
        raise
    if not keep:
        store.close()
        return stored
    return dataclasses.replace(stored, store=store, store_entry=entry)


def _service_indexes(service: Any, registry: Registry) -> set[str]:
    """The names of the indexes the stored service requires (it declares them itself)."""
    entry = {"kind": service} if isinstance(service, str) else dict(service or {"kind": "default"})
    try:
        registration = registry.get("services", entry.get("kind", "default"))
        config = registration.parse_config({k: v for k, v in entry.items() if k != "kind"}, "service")
        return set(service_required_indexes(registration, config))
    except MemcoreError:  # an unknown or invalid service is reported by check_settings
        return set()


def _declared_index(definition: Any, registry: Registry) -> dict[str, Any] | None:
    """A stored index definition as a settings entry; None when it cannot be declared here
    (kind not installed, options its plugin no longer accepts): it then opens from the
    store as it always did (a broken index is reported, never a failed open)."""
    if not isinstance(definition, Mapping):
        return None
    definition = registry.canonical_kinds(definition)
    kind, config = definition.get("kind"), definition.get("config") or {}
    if not isinstance(kind, str) or kind not in registry.names("indexes") or not isinstance(config, Mapping):
        return None
    options = {k: v for k, v in config.items() if k != "kind"}
    try:
        registry.get("indexes", kind).parse_config(options, "indexes")
    except MemcoreError:
        return None
    return {"kind": kind, **options}


def stored_layer(stored: StoredMemory, registry: Registry) -> dict[str, Any]:
    """The lowest settings layer of a memory reopened without settings: its document's
    sections, and its stored indexes (those the service requires are the service's)."""
    document = stored.settings or {}
    layer = {key: copy.deepcopy(document[key]) for key in SECTIONS if key in document}
    required = _service_indexes(layer.get("service"), registry)
    indexes = {}
    for name, definition in stored.indexes.items():
        entry = _declared_index(definition, registry) if name not in required else None
        if entry is not None:
            indexes[name] = entry
    layer["indexes"] = indexes
    return layer


def _lookup(settings: "MemcoreSettings", place: str) -> Any:
    """The value at a dotted place (``store.url``, ``pipeline[1].token``), None when absent."""
    value: Any = settings.model_dump()
    for part in place.replace("[", ".[").split("."):
        if part.startswith("["):
            index = int(part[1:-1])
            value = value[index] if isinstance(value, list) and index < len(value) else None
        else:
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is None:
            return None
    return value


def check_omitted(stored: StoredMemory, settings: "MemcoreSettings") -> None:
    """Refuse to reopen a memory whose secrets were left out of its stored settings until
    they are given again (environment or arguments): never a silent default in their place."""
    missing = [place for place in (stored.settings or {}).get("omitted", []) if _lookup(settings, place) is None]
    if missing:
        raise secrets_needed(missing)


def secrets_needed(missing: list[str]) -> ConfigError:
    """The error asking for the secrets at the dotted places ``missing`` (left out of what a
    memory keeps) to be given again."""
    variables = ", ".join("MEMCORE_" + place.replace("[", "__").replace("]", "").replace(".", "__").upper() + "=..." for place in missing)
    return ConfigError(
        f"{', '.join(missing)} {'is a secret' if len(missing) == 1 else 'are secrets'}, so the memory does not keep "
        f"{'it' if len(missing) == 1 else 'them'}: give {'it' if len(missing) == 1 else 'them'} again when opening without settings "
        f"({variables}, or keyword arguments of memcore.open), give the whole settings file (--config), "
        "or make the component read it from an environment variable (a `*_env` option)",
        location=missing[0],
    )


def _entry(entry: Any, category: str, location: str, registry: Registry, omitted: list[str]) -> Any:
    """One component entry without its secrets (its config model says which are)."""
    if not isinstance(entry, Mapping):
        return entry
    kind = entry.get("kind")
    registration = registry.entries.get(category, {}).get(registry.canonical(category, kind)) if isinstance(kind, str) else None
    secret = secret_field_names(registration.config_model if registration is not None else None)
    return strip_secrets(entry, secret, location, omitted)


def _pipeline(pipeline: Any, registry: Registry, omitted: list[str]) -> Any:
    if isinstance(pipeline, list):
        return [_entry(stage, "stages", f"pipeline[{i}]", registry, omitted) for i, stage in enumerate(pipeline)]
    if isinstance(pipeline, Mapping):
        return strip_secrets(pipeline, frozenset(), "pipeline", omitted)
    return pipeline


def settings_document(settings: "MemcoreSettings", registry: Registry) -> dict[str, Any]:
    """The document a memory keeps about ``settings`` (see the module docstring)."""
    omitted: list[str] = []
    store = {k: v for k, v in dict(settings.store).items() if k not in OPEN_MODE}
    spaces = {}
    for name, space in settings.spaces.items():
        space = dict(space)
        if space.get("embedder") is not None:
            space["embedder"] = _entry(space["embedder"], "embedders", f"spaces.{name}.embedder", registry, omitted)
        spaces[name] = space
    document: dict[str, Any] = {
        "format": FORMAT,
        "store": _entry(store, "stores", "store", registry, omitted),
        "spaces": spaces,
        "pipeline": _pipeline(copy.deepcopy(settings.pipeline), registry, omitted),
        "service": _entry(dict(settings.service), "services", "service", registry, omitted),
        "llms": {name: _entry(entry, "llms", f"llms.{name}", registry, omitted) for name, entry in settings.llms.items()},
    }
    if omitted:
        document["omitted"] = omitted
    return document


def store_document(entry: Mapping[str, Any], registry: Registry) -> dict[str, Any]:
    """A store entry as a settings document keeps it: without its open mode and secrets,
    the places of the secrets left out under ``omitted`` (a memory copied to another store
    by ``memcore migrate`` keeps this in place of the source's store entry)."""
    omitted: list[str] = []
    kept = dict(_entry({k: v for k, v in entry.items() if k not in OPEN_MODE}, "stores", "store", registry, omitted))
    return {**kept, "omitted": omitted} if omitted else kept


def record_settings(store: Store, document: Mapping[str, Any]) -> None:
    """Keep ``document`` in the store (one write, only when it changed; never read-only)."""
    if store.read_only or store.get_state(NAMESPACE, KEY) == document:
        return
    store.apply(WriteBatch(state={(NAMESPACE, KEY): dict(document)}))
