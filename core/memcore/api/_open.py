"""``memcore.open``: build a whole memory (store, spaces, indexes, pipeline, service) from settings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from ..collection._collection import Collection
from ..embedders._embedder import Embedder, Space
from ..errors import ConfigError
from ..llms._llm import LLMs
from .._plugins._host import get_registry
from ._memory import Memory
from ..services._service import Service
from ..settings import MemcoreSettings, load_settings
from ._check import CheckedSettings, check_built_service, check_settings

__all__ = ["open", "Memory"]


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
        return settings
    if isinstance(settings, Mapping):
        return load_settings(None, **{**settings, **overrides})
    return load_settings(settings, **overrides)


def open(
    settings: MemcoreSettings | str | os.PathLike[str] | Mapping[str, Any] | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> Memory:
    """Build the memory declared by ``settings`` (an object, a TOML/YAML path, a dict, or None
    for environment + defaults) at the collection directory ``path``.

    Indexes declared in settings or required by the service are created when missing;
    existing ones are loaded and caught up from the store. Each index is built once.
    """
    resolved = _resolve(settings, overrides)
    registry = get_registry()
    checked = check_settings(resolved, registry)  # every entry validated before anything opens
    directory = Path(path) if path is not None else (Path(resolved.path) if resolved.path else None)
    spaces = _build_spaces(resolved, checked)
    llms = LLMs(checked.llms, registry)  # each built on first use; indexes with an LLM step get them too
    store = checked.registrations["store"].build(checked.store, directory)
    try:
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
    except BaseException:
        store.close()
        llms.close()
        raise
    memory = Memory(resolved, collection, checked.pipeline, service, llms)
    memory.pipeline_error = pipeline_error
    return memory
