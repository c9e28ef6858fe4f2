"""Checking settings against the registry: every entry validated by its component's config
model, the pipeline built, the service's required indexes resolved -- before anything is
opened or built. The result is typed (:class:`CheckedSettings`).

Above :mod:`memcore.settings` and :mod:`memcore.retrieval._pipeline` in the import floors: settings
only declare and load, this module knows the components.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from ..embedders._default import AUTO, default_embedder
from ..errors import ConfigError, PluginError
from ..retrieval._pipeline import Pipeline
from .._plugins._registry import ComponentConfig, Registration, Registry

if TYPE_CHECKING:
    from ..settings import MemcoreSettings

__all__ = ["CheckedSettings", "IndexDefinition", "check_settings", "service_required_indexes"]


@dataclass(frozen=True)
class IndexDefinition:
    """One index a memory must have: its name, kind and validated config, and who asked for
    it (``"settings"`` or ``"service"``)."""

    name: str
    kind: str
    config: ComponentConfig
    source: str = "settings"
    populate: bool = False
    """Fill the index with every stored record when it is created (settings entries: true
    unless ``populate = false``; a service's indexes follow its policy: false)."""


@dataclass(frozen=True)
class CheckedSettings:
    """Validated settings: component configs by place, the built pipeline, every index.

    ``spaces`` holds the embedder config of each space that has an embedder (spaces of
    caller-given vectors have none); ``indexes`` the declared indexes then those the service
    requires, in that order.
    """

    store: ComponentConfig
    spaces: dict[str, ComponentConfig]
    indexes: dict[str, IndexDefinition]
    pipeline: Pipeline
    service: ComponentConfig
    llms: dict[str, ComponentConfig] = field(default_factory=dict)
    """The config of each ``[llms.<name>]`` entry."""
    registrations: dict[str, Registration] = field(default_factory=dict, repr=False)
    """The registration of ``store``, ``service``, each embedder (``spaces.<name>``) and each
    index (``indexes.<name>``): the factories ``memcore.open`` builds with, looked up once."""

    def __getitem__(self, key: str) -> Any:
        """Mapping-style access (``checked["store"]``), as the older dict result offered."""
        if key == "indexes":
            return {name: d.config for name, d in self.indexes.items() if d.source == "settings"}
        if key in ("store", "spaces", "pipeline", "service", "llms"):
            return getattr(self, key)
        raise KeyError(key)


def _without_kind(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "kind"}


def _populate(name: str, entry: Mapping[str, Any]) -> bool:
    value = entry.get("populate", True)
    if not isinstance(value, bool):
        raise ConfigError(f"populate must be true or false, not {value!r}", location=f"indexes.{name}.populate")
    return value


def service_required_indexes(registration: Registration, config: ComponentConfig) -> dict[str, dict[str, Any]]:
    """The indexes a service needs (``required_indexes(config)`` of its registered factory).

    A factory without ``required_indexes`` (a function building the service) requires none:
    :func:`check_built_service` then refuses a service whose class declares some, so they
    are never silently lost.
    """
    declare = getattr(registration.factory, "required_indexes", None)
    if declare is None:
        return {}
    required = declare(config)
    if not isinstance(required, Mapping) or not all(isinstance(e, Mapping) and "kind" in e for e in required.values()):
        raise PluginError(f"service {registration.name!r}: required_indexes must return {{name: {{'kind': ..., **options}}}}, got {required!r}")
    return {str(n): dict(e) for n, e in required.items()}


def check_built_service(registration: Registration, config: ComponentConfig, service: Any) -> None:
    """Refuse a service whose class requires indexes its registered factory did not declare."""
    if hasattr(registration.factory, "required_indexes"):
        return
    declared = getattr(type(service), "required_indexes", None)
    if declared is not None and declared(config):
        raise PluginError(
            f"service {registration.name!r} (plugin {registration.plugin}) requires indexes {sorted(declared(config))}, "
            "but its registered factory has no required_indexes, so memcore could not create them: "
            "register the Service class itself, or give the factory a required_indexes attribute"
        )


def check_settings(settings: MemcoreSettings, registry: Registry) -> CheckedSettings:
    """Validate every entry with its component's config model (nothing is built but the
    pipeline's stages); errors are :class:`ConfigError` naming the offending key."""
    store_entry = dict(settings.store)
    store_reg = registry.get("stores", store_entry["kind"], location="store.kind")
    store = store_reg.parse_config(_without_kind(store_entry), "store")
    spaces: dict[str, ComponentConfig] = {}
    registrations = {"store": store_reg}
    for name, space in settings.spaces.items():
        emb = space.get("embedder")
        if emb is not None:
            if emb.get("kind") == AUTO:  # validated as what a new memory gets (memcore.open resolves it against the store)
                emb = {**emb, "kind": default_embedder()[0]}
            reg = registrations[f"spaces.{name}"] = registry.get("embedders", emb["kind"], location=f"spaces.{name}.embedder.kind")
            spaces[name] = reg.parse_config(_without_kind(emb), f"spaces.{name}.embedder")
    indexes: dict[str, IndexDefinition] = {}
    for name, entry in settings.indexes.items():
        reg = registrations[f"indexes.{name}"] = registry.get("indexes", entry["kind"], location=f"indexes.{name}.kind")
        options = {k: v for k, v in entry.items() if k not in ("kind", "populate")}
        indexes[name] = IndexDefinition(name, reg.name, reg.parse_config(options, f"indexes.{name}"), populate=_populate(name, entry))
    llms: dict[str, ComponentConfig] = {}
    for name, entry in settings.llms.items():
        reg = registry.get("llms", entry["kind"], location=f"llms.{name}.kind")
        llms[name] = reg.parse_config(_without_kind(entry), f"llms.{name}")
    pipeline = Pipeline.from_config(settings.pipeline, registry)
    service_entry = dict(settings.service)
    service_reg = registry.get("services", service_entry["kind"], location="service.kind")
    service = service_reg.parse_config(_without_kind(service_entry), "service")
    required = service_required_indexes(service_reg, service)
    clash = sorted(set(required) & set(indexes))
    if clash:
        raise ConfigError(f"index name(s) {clash} are reserved by service {service.kind!r}", location="indexes")
    for name, entry in required.items():
        reg = registrations[f"indexes.{name}"] = registry.get("indexes", entry["kind"], location=f"service.indexes.{name}.kind")
        indexes[name] = IndexDefinition(name, reg.name, reg.parse_config(_without_kind(entry), f"indexes.{name}"), source="service")
    return CheckedSettings(store, spaces, indexes, pipeline, service, llms, {**registrations, "service": service_reg})
