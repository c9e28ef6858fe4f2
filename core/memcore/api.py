"""``memcore.open``: build a whole memory (store, spaces, indexes, pipeline, service) from settings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from .collection import Collection
from .embedder import Embedder
from .errors import ConfigError
from .pipeline import Pipeline
from .plugins import get_registry
from .memory import Memory
from .registry import Registry
from .service import Service
from .settings import MemcoreSettings, check_settings, load_settings
from .spaces import Space

__all__ = ["open", "Memory"]


def declared_populate(name: str, entry: dict[str, Any], *, owned: bool) -> bool:
    """Pop ``populate`` from an index entry: whether a newly created index is filled from the
    store (default true; service-owned indexes follow their service's policy: false)."""
    value = entry.pop("populate", not owned)
    if not isinstance(value, bool):
        raise ConfigError(f"populate must be true or false, not {value!r}", location=f"indexes.{name}.populate")
    return value


def _build_spaces(settings: MemcoreSettings, parsed: dict[str, Any], registry: Registry) -> dict[str, Space]:
    spaces = {}
    for name, entry in settings.spaces.items():
        config = parsed["spaces"].get(name)
        if config is None:
            spaces[name] = Space(name, int(entry["dim"]), None, "none")
            continue
        embedder = registry.get("embedders", config.kind).factory(config)
        if not isinstance(embedder, Embedder):
            raise ConfigError(f"embedder {config.kind!r} built a {type(embedder).__name__}, not a memcore.Embedder", location=f"spaces.{name}")
        if entry.get("dim") is not None and entry["dim"] != embedder.dim:
            raise ConfigError(f"dim {entry['dim']} differs from the embedder's {embedder.dim}", location=f"spaces.{name}.dim")
        spaces[name] = Space(name, int(embedder.dim), embedder, config.kind)
    return spaces


def open(
    settings: MemcoreSettings | str | os.PathLike[str] | Mapping[str, Any] | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> Memory:
    """Build the memory declared by ``settings`` (an object, a TOML/YAML path, a dict, or None
    for environment + defaults) at the collection directory ``path``.

    Indexes declared in settings or required by the service are created when missing;
    existing ones are loaded and caught up from the store.
    """
    if isinstance(settings, MemcoreSettings):
        resolved = settings
    elif isinstance(settings, Mapping):
        resolved = load_settings(None, **{**settings, **overrides})
    else:
        resolved = load_settings(settings, **overrides)
    registry = get_registry()
    parsed = check_settings(resolved, registry)
    directory = Path(path) if path is not None else (Path(resolved.path) if resolved.path else None)
    store_reg = registry.get("stores", parsed["store"].kind)
    spaces = _build_spaces(resolved, parsed, registry)
    store = store_reg.factory(parsed["store"], directory)
    try:
        collection = Collection(store, spaces, registry, directory)
        service_reg = registry.get("services", parsed["service"].kind)
        required = getattr(service_reg.factory, "required_indexes", lambda config: {})(parsed["service"])
        clash = sorted(set(required) & set(resolved.indexes))
        if clash:
            raise ConfigError(f"index name(s) {clash} are reserved by service {parsed['service'].kind!r}", location="indexes")
        declared = {**{n: dict(e) for n, e in resolved.indexes.items()}, **{n: dict(e) for n, e in required.items()}}
        populate = {name: declared_populate(name, entry, owned=name in required) for name, entry in declared.items()}
        for name, entry in declared.items():  # validate every definition before creating any
            collection.check_index(name, **entry)
        for name, entry in declared.items():
            kind = entry.pop("kind")
            if collection.has_index(name):
                collection.create_index(name, kind, exist_ok=True, **entry)  # search-time changes apply; build-time ones raise
            elif not store.read_only:
                collection.create_index(name, kind, populate=populate[name], **entry)
        pipeline = parsed["pipeline"]
        pipeline.check(collection)
        service = service_reg.factory(parsed["service"], collection, pipeline)
        if not isinstance(service, Service):
            raise ConfigError(f"service {parsed['service'].kind!r} built a {type(service).__name__}, not a memcore.Service", location="service")
    except BaseException:
        store.close()
        raise
    return Memory(resolved, collection, pipeline, service)
