"""Settings: a whole memory declared in one place (TOML, YAML, environment or code).

Precedence: init kwargs > environment (``MEMCORE_`` prefix, ``__`` nesting, e.g.
``MEMCORE_INDEXES__DENSE__METRIC=ip``) > a TOML or YAML file.

Each store / embedder / index / stage / service / llm entry is ``{kind = "<registered name>",
...its own fields}``, validated by that component's config model when the memory is built
(:func:`memcore.api._check.check_settings`), with errors pointing at the offending key.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

import yaml
from pydantic import Field, ValidationError as PydanticValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
    YamlConfigSettingsSource,
)

from .errors import ConfigError
from ._plugins._registry import unknown_key_message
from ._util.merge import merge_layers

__all__ = ["MemcoreSettings", "load_settings", "with_overrides", "merge_layers", "DEFAULTS"]


DEFAULTS: dict[str, Any] = {
    "store": {"kind": "sqlite"},
    "spaces": {"default": {"embedder": {"kind": "auto"}}},
    "indexes": {"vector": {"kind": "exact", "space": "default"}},
    "service": {"kind": "default"},
}
"""The embedded defaults. An entry given without ``kind`` whose name has a default is
completed from it, so ``MEMCORE_INDEXES__VECTOR__METRIC=ip`` tunes the default index.

The default space's embedder ``auto`` is resolved when a memory is opened
(:mod:`memcore.embedders._default`): the embedder an existing space was created with, else
``minilm`` when memcore-embed and its model are installed, else ``hashing``."""


def _kind_entry(value: Any, what: str, default: Mapping[str, Any] | None = None) -> dict[str, Any]:
    if isinstance(value, str):
        return {"kind": value}
    if isinstance(value, Mapping):
        if "kind" not in value:
            if default is None:
                raise ValueError(f"{what} needs a 'kind'")
            return {**default, **value}
        return dict(value)
    raise ValueError(f"{what} must be a kind name or a table with 'kind'")


class MemcoreSettings(BaseSettings):
    """The declared memory: store, embedding spaces, indexes, pipeline, service and LLMs."""

    settings_file: ClassVar[Path | None] = None
    """The TOML/YAML file read by this settings class (set by :func:`load_settings`)."""

    base_layer: ClassVar[Mapping[str, Any] | None] = None
    """The lowest layer, under the file (set by :func:`load_settings`): the settings a memory
    keeps about itself, when it is reopened without settings."""

    model_config = SettingsConfigDict(env_prefix="MEMCORE_", env_nested_delimiter="__", extra="forbid", nested_model_default_partial_update=False)

    path: str | None = Field(None, description="Collection directory (needed by file-backed stores).")
    store: dict[str, Any] = Field(default_factory=lambda: copy.deepcopy(DEFAULTS["store"]), description='Store entry, e.g. {kind = "sqlite"}.')
    spaces: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: copy.deepcopy(DEFAULTS["spaces"]),
        description='Embedding spaces: name -> {embedder = kind or table, dim = n (only without embedder)}; embedder "auto": minilm when installed, else hashing.',
    )
    indexes: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: copy.deepcopy(DEFAULTS["indexes"]),
        description="Named indexes: name -> {kind = ..., options}.",
    )
    pipeline: str | list[dict[str, Any]] | dict[str, Any] = Field(
        "basic", description="A preset name, {preset = ..., overrides = {...}}, or a list of stage entries."
    )
    service: dict[str, Any] = Field(default_factory=lambda: copy.deepcopy(DEFAULTS["service"]), description="Service entry.")
    llms: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description='Named LLMs (chat models) of the LLM steps: name -> {kind = ..., options}; services and stages name theirs (llm = "default").',
    )
    server: dict[str, Any] = Field(
        default_factory=dict,
        description="Settings of `memcore serve` (memcore-server): host, port, limits, [server.keys.<name>]; validated by the server when it starts.",
    )

    @field_validator("store", "service", mode="before")
    @classmethod
    def _entry(cls, value: Any, info: Any) -> dict[str, Any]:
        return _kind_entry(value, info.field_name, DEFAULTS[info.field_name])

    @field_validator("indexes", mode="before")
    @classmethod
    def _indexes(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {name: _kind_entry(entry, f"indexes.{name}", DEFAULTS["indexes"].get(name)) for name, entry in value.items()}
        return value

    @field_validator("llms", mode="before")
    @classmethod
    def _llms(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {name: _kind_entry(entry, f"llms.{name}") for name, entry in value.items()}
        return value

    @field_validator("spaces", mode="before")
    @classmethod
    def _spaces(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        out = {}
        for name, entry in value.items():
            entry = {"embedder": entry} if isinstance(entry, str) else dict(entry)
            if "embedder" not in entry and "dim" not in entry and name in DEFAULTS["spaces"]:
                entry = {**DEFAULTS["spaces"][name], **entry}
            unknown = set(entry) - {"embedder", "dim"}
            if unknown:
                key = sorted(unknown)[0]
                raise ValueError(f"spaces.{name}.{key}: {unknown_key_message(key, ['embedder', 'dim'])}")
            if entry.get("embedder") is not None:
                default_emb = DEFAULTS["spaces"].get(name, {}).get("embedder")
                entry["embedder"] = _kind_entry(entry["embedder"], f"spaces.{name}.embedder", default_emb)
            elif not isinstance(entry.get("dim"), int) or entry["dim"] <= 0:
                raise ValueError(f"spaces.{name}: give an embedder, or a positive dim for caller-given vectors")
            out[name] = entry
        return out

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """init > env > TOML/YAML file (set by :func:`load_settings`), merged by :func:`merge_layers`."""
        layers: list[tuple[str, Callable[[], PydanticBaseSettingsSource]]] = []
        base = getattr(settings_cls, "base_layer", None)
        if base is not None:
            layers.append(("the memory's stored settings", lambda: InitSettingsSource(settings_cls, init_kwargs=copy.deepcopy(dict(base)))))
        file = getattr(settings_cls, "settings_file", None)
        if file is not None:
            source_cls = TomlConfigSettingsSource if file.suffix.lower() == ".toml" else YamlConfigSettingsSource
            layers.append((f"settings file {file}", lambda: source_cls(settings_cls, file)))
        layers += [("MEMCORE_ environment variables", lambda: env_settings), ("arguments", lambda: init_settings)]
        return (_LayeredSource(settings_cls, layers),)


class _LayeredSource(PydanticBaseSettingsSource):
    """One source merging the layers (lowest first) and naming the layer that fails to read."""

    def __init__(self, settings_cls: type[BaseSettings], layers: list[tuple[str, Callable[[], PydanticBaseSettingsSource]]]):
        super().__init__(settings_cls)
        self.layers = layers

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        """Unused: values come from the layers in :meth:`__call__`."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for what, make in self.layers:
            try:
                values = make()()
            except (ValueError, OSError, yaml.YAMLError, RecursionError) as exc:
                raise ConfigError(f"cannot read {what}: {type(exc).__name__ if isinstance(exc, RecursionError) else exc}") from None
            if not isinstance(values, dict):  # e.g. a YAML file whose top level is a list
                raise ConfigError(f"cannot read {what}: the top level must be a table/mapping, got {type(values).__name__}")
            merged = merge_layers(merged, values)
        return merged


def load_settings(path: str | os.PathLike[str] | None = None, /, *, base: Mapping[str, Any] | None = None, **overrides: Any) -> MemcoreSettings:
    """Settings from a TOML/YAML file (optional), the environment and ``overrides``.

    The file is positional so that ``path=...`` among the overrides sets the collection
    directory (the ``path`` setting), as in a settings dict given to :func:`memcore.open`.
    ``base``: a lowest layer under everything else (the settings a memory stored about
    itself, see :func:`memcore.open`).

    Invalid settings raise :class:`ConfigError` naming the offending key.
    """
    cls: type[MemcoreSettings] = MemcoreSettings
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"settings file {p} does not exist")
        if p.suffix.lower() not in (".toml", ".yaml", ".yml"):
            raise ConfigError(f"settings file {p} must end in .toml, .yaml or .yml")
        cls = type("MemcoreSettingsFromFile", (MemcoreSettings,), {"settings_file": p})
    if base is not None:
        cls = type("MemcoreSettingsOverStored", (cls,), {"base_layer": dict(base)})
    try:
        return cls(**overrides)
    except PydanticValidationError as exc:
        raise _config_error(exc) from None


def with_overrides(settings: MemcoreSettings, **overrides: Any) -> MemcoreSettings:
    """``settings`` with top-level ``overrides`` (``store={...}``, ``pipeline=[...]``) in place
    of its own, validated as :func:`load_settings` validates (the environment and the file are
    not read again: ``settings`` already holds what they said).

    :raises ConfigError: an override is invalid (naming its key)."""
    if not overrides:
        return settings
    try:
        return type(settings).model_validate({**settings.model_dump(), **overrides})
    except PydanticValidationError as exc:
        raise _config_error(exc) from None


def _config_error(exc: PydanticValidationError) -> ConfigError:
    """The ConfigError naming the first invalid key of a settings validation error."""
    first = exc.errors()[0]
    loc = ".".join(str(x) for x in first["loc"]) or None
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    message = first["msg"]
    if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
        message = unknown_key_message(str(first["loc"][0]), list(MemcoreSettings.model_fields))
    return ConfigError(f"{message}{more}", location=loc)
