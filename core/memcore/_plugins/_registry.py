"""Registries of named components (indexes, stages, fusions, services, embedders, stores, llms).

Plugins fill them through the ``register_*`` hooks; settings look components up by name.
"""

from __future__ import annotations

import difflib
import re
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar, Iterable, Mapping, cast

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from ..errors import ConfigError, MemcoreError, PluginError, UnknownComponentError
from .hookspecs import CATEGORIES, SINGULAR
from ._providers import distribution_of, install_hint, known_providers, provider_of

__all__ = ["ComponentConfig", "Registration", "Registry", "CATEGORIES"]

# CATEGORIES (re-exported): the kinds of component a plugin can register, one hook each
# (``register_<category>``), computed from the declarations in :mod:`memcore._plugins.hookspecs`.

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_.]*$")
"""A kind name: lowercase letters, digits, ``_`` and ``.``. One separator, ``_`` (as in TOML
option keys and Python names): ``token_hashing``, never ``token-hashing``."""

DEPRECATED_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_\-.]*$")
"""An old spelling a plugin keeps working as a deprecated alias (``deprecated_names=``):
``-`` is still accepted there, so the kinds spelled with ``-`` before the rule keep working."""


def unknown_key_message(key: str, valid: list[str]) -> str:
    """``unknown option; did you mean 'metric'?`` (or the valid options when none is close)."""
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        return f"unknown option; did you mean {close[0]!r}?"
    return f"unknown option; valid options: {', '.join(sorted(valid)) or '(none)'}"


class ComponentConfig(BaseModel):
    """Base of every component's config model: ``kind`` plus the component's own fields.

    Unknown fields are rejected so typos in settings surface as errors.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    search_time: ClassVar[frozenset[str]] = frozenset()
    """Fields that only matter at search time (faiss ``ef_search``...): changing them when a
    memory is reopened just works. Every other field is build-time (a change needs a rebuild)."""

    secret_fields: ClassVar[frozenset[str]] = frozenset()
    """Fields holding secrets (a password, a URL with credentials, a key): never written into
    the memory's stored settings. A ``SecretStr`` field or one declared with
    ``Field(json_schema_extra={"secret": True})`` is secret too. Prefer ``<name>_env``
    fields naming an environment variable: the name is stored, never the value."""

    url_schemes: ClassVar[frozenset[str]] = frozenset()
    """For a store: the URL schemes that name a store of this kind (``postgresql``), so a
    tool given a URL where a memory directory may stand (``memcore migrate --to
    postgresql://...``) opens this kind with the URL as its ``url`` option."""

    store_kinds: ClassVar[frozenset[str]] = frozenset()
    """For an index whose data lives in its store (``pgvector`` in PostgreSQL): the store kinds
    it works inside; empty (the default) for an index that works over any store.
    ``memcore migrate`` refuses to copy such an index to another kind of store."""

    kind: str


class EmptyConfig(ComponentConfig):
    """Config of a component without options."""


@dataclass(frozen=True)
class Registration:
    """One registered component: its name, factory, config model and owning plugin."""

    category: str
    name: str
    factory: Callable[..., Any]
    config_model: type[ComponentConfig]
    plugin: str
    deprecated_names: tuple[str, ...] = ()
    """Old spellings of ``name`` that still resolve to it, with a DeprecationWarning."""
    renames: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    """Every deprecated spelling of the registry it belongs to -> the current name (set by
    :meth:`Registry.add_all`): ``kind`` values nested in a settings entry (colbert's
    ``embedder = {kind = ...}``) are rewritten to the current name when parsed."""
    distribution: str | None = None
    """The distribution of the plugin that registered it (``memcore`` for the builtins), when known."""

    def build(self, *args: Any, **kwargs: Any) -> Any:
        """Call the factory (the component's constructor): what it raises on purpose, a
        :class:`memcore.MemcoreError` (ConfigError, ValidationError...), passes unchanged;
        any other exception becomes a :class:`PluginError` naming the plugin (and its
        distribution) and the component (category and kind), with the cause chained."""
        try:
            return self.factory(*args, **kwargs)
        except MemcoreError:
            raise
        except Exception as exc:
            origin = f"plugin {self.plugin!r}" + (f" (distribution {self.distribution})" if self.distribution else "")
            raise PluginError(f"{SINGULAR.get(self.category, self.category)} {self.name!r} of {origin} failed to build: {type(exc).__name__}: {exc}") from exc

    def parse_config(self, data: Any, location: str) -> ComponentConfig:
        """Validate a settings entry with this component's config model.

        Errors become :class:`ConfigError` pointing at the offending key
        (``indexes.dense.metric: ...``).
        """
        if isinstance(data, self.config_model):
            return data
        if isinstance(data, BaseModel):
            data = data.model_dump()
        data = {k: v for k, v in dict(data or {}).items() if k != "kind"}  # the kind is this registration's name
        data = {**canonical_kinds(data, self.renames, warn_at=location), "kind": self.name}
        try:
            return self.config_model.model_validate(data)
        except PydanticValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in (location, *first["loc"]))
            more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
            message = first["msg"]
            if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
                message = unknown_key_message(str(first["loc"][0]), [f for f in self.config_model.model_fields if f != "kind"])
            raise ConfigError(f"{message}{more}", location=loc) from None


@dataclass
class Registry:
    """All registered components, by category then name."""

    entries: dict[str, dict[str, Registration]] = field(default_factory=lambda: {c: {} for c in CATEGORIES})
    aliases: dict[str, dict[str, str]] = field(default_factory=lambda: {c: {} for c in CATEGORIES})
    """Deprecated spellings, by category: ``{"embedders": {"token-hashing": "token_hashing"}}``."""
    renames: dict[str, str] = field(default_factory=dict)
    """Every category's deprecated spellings -> current names, one dict shared with the
    registrations (a spelling deprecated in two categories for two names is left out)."""
    failed: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    """Plugins that failed to load: name -> (distribution, error), named by unknown-kind errors."""

    @staticmethod
    def make_registration(
        category: str, name: Any, factory: Any, config_model: Any, plugin: str, deprecated_names: Iterable[str] = (), distribution: str | None = None
    ) -> Registration:
        """Validate one ``register(...)`` call; raises PluginError when malformed.

        ``deprecated_names``: old spellings of ``name`` (``"token-hashing"`` for
        ``"token_hashing"``) that keep resolving to it with a DeprecationWarning;
        ``distribution``: the plugin's distribution, named when the factory fails.
        """
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise PluginError(_bad_name(category, name))
        if not callable(factory):
            raise PluginError(f"{category} {name!r}: factory is not callable")
        if config_model is None:
            config_model = EmptyConfig
        if not (isinstance(config_model, type) and issubclass(config_model, BaseModel)):
            raise PluginError(f"{category} {name!r}: config_model must be a pydantic model class")
        if "kind" not in config_model.model_fields:
            raise PluginError(f"{category} {name!r}: config_model must have a 'kind' field (subclass memcore.ComponentConfig)")
        for attribute in ("search_time", "secret_fields"):
            unknown = sorted(set(getattr(config_model, attribute, ())) - set(config_model.model_fields))
            if unknown:
                raise PluginError(f"{category} {name!r}: {attribute} names {unknown}, which are not fields of {config_model.__name__}")
        if isinstance(deprecated_names, str) or not all(isinstance(n, str) for n in deprecated_names):
            raise PluginError(f"{category} {name!r}: deprecated_names must be a tuple of names, e.g. ({name.replace('_', '-')!r},)")
        old = tuple(dict.fromkeys(deprecated_names))
        bad = [n for n in old if n == name or not DEPRECATED_NAME_PATTERN.match(n)]
        if bad:
            raise PluginError(f"{category} {name!r}: invalid deprecated name(s) {bad} (an old spelling, other than the name)")
        # any pydantic model with a ``kind`` field is accepted, not only ComponentConfig subclasses
        return Registration(category, name, factory, cast(type[ComponentConfig], config_model), plugin, old, distribution=distribution)

    def conflicts(self, registrations: list[Registration]) -> list[str]:
        """Messages for registrations whose names are already taken (or repeated)."""
        seen: set[tuple[str, str]] = set()
        problems = []
        for reg in registrations:
            for spelling in (reg.name, *reg.deprecated_names):
                key = (reg.category, spelling)
                owner = self.entries[reg.category].get(self.aliases[reg.category].get(spelling, spelling))
                if owner is not None:
                    problems.append(f"{reg.category} {spelling!r} is already registered by {owner.plugin!r}")
                elif key in seen:
                    problems.append(f"{reg.category} {spelling!r} is registered twice")
                seen.add(key)
        return problems

    def add_all(self, registrations: list[Registration]) -> None:
        """Accept registrations (callers check :meth:`conflicts` first)."""
        for reg in registrations:
            self.entries[reg.category][reg.name] = replace(reg, renames=self.renames)
            for old in reg.deprecated_names:
                self.aliases[reg.category][old] = reg.name
        self._update_renames()

    def discard(self, category: str, name: str) -> None:
        """Forget one registration and its deprecated spellings (a plugin being removed)."""
        self.entries[category].pop(name, None)
        self.aliases[category] = {old: new for old, new in self.aliases[category].items() if new != name}
        self._update_renames()

    def _update_renames(self) -> None:
        targets: dict[str, set[str]] = {}
        for aliases in self.aliases.values():
            for old, new in aliases.items():
                targets.setdefault(old, set()).add(new)
        self.renames.clear()  # the dict the registrations share: updated in place
        self.renames.update({old: new.pop() for old, new in targets.items() if len(new) == 1})

    def canonical(self, category: str, name: str) -> str:
        """The current name of a kind: ``name`` itself unless it is a deprecated spelling."""
        return self.aliases[category].get(name, name)

    def canonical_kinds(self, value: Any) -> Any:
        """``value`` (a stored index definition, a space pin, a manifest) with every ``kind``
        spelled the deprecated way replaced by its current name, silently: what a memory
        recorded before a kind was renamed opens as if written with the new name."""
        return canonical_kinds(value, self.renames)

    def names(self, category: str) -> list[str]:
        """Registered names of one category, sorted."""
        return sorted(self.entries[category])

    def get(self, category: str, name: str, *, location: str | None = None) -> Registration:
        """Look a component up; unknown names raise :class:`UnknownComponentError` with hints.

        A deprecated spelling (``deprecated_names=`` of its registration) returns the current
        kind's registration and emits a DeprecationWarning naming the new spelling.
        """
        try:
            return self.entries[category][name]
        except KeyError:
            pass
        current = self.aliases[category].get(name) if isinstance(name, str) else None
        if current is not None and current in self.entries[category]:
            where = f" ({location})" if location else ""
            warnings.warn(f"{SINGULAR.get(category, category)} kind {name!r}{where} is deprecated: write {current!r}", DeprecationWarning, stacklevel=2)
            return self.entries[category][current]
        installed = self.names(category)
        known = known_providers().get(category, {})  # from the plugin distributions' metadata
        extra = provider_of(category, str(name))
        provided = str(name)  # the name whose provider is hinted
        close = [] if extra else difflib.get_close_matches(str(name), installed + [n for n in known if n not in installed], n=1)
        if extra is None and close and close[0] not in installed:
            extra, provided = provider_of(category, close[0]), close[0]
        failed = self.failed_note(category, str(name))
        dist = distribution_of(extra) if extra is not None else None
        if dist is not None and install_hint(extra) is None and failed is None:  # installed: pip would change nothing
            failed = (
                f"the distribution {dist}, which provides {provided!r}, is installed but did not register it: plugin loading may be "
                "restricted (MEMCORE_PLUGINS / MEMCORE_DISABLE_PLUGINS) or the installed copy is outdated; see `memcore plugins`"
            )
        raise UnknownComponentError(
            category,
            str(name),
            installed,
            close[0] if close else None,
            extra,
            location,
            failed=failed,
            singular=SINGULAR.get(category),
            hint=install_hint(extra),
        )

    def failed_note(self, category: str, name: str) -> str | None:
        """Which failed plugin provides (or may provide) ``name``, with its error; None when none failed."""
        if not self.failed:
            return None
        provider = provider_of(category, name)
        if provider is not None:
            dist = distribution_of(provider) or f"memcore-{provider}"
            for plugin, (plugin_dist, error) in self.failed.items():
                if plugin == provider or _same_dist(plugin_dist, dist):
                    return f"plugin {plugin!r}, which provides it, failed to load ({error}); see `memcore plugins`"
            return None  # its provider is known and did not fail: the other failures are unrelated
        listed = "; ".join(f"{plugin!r} ({error})" for plugin, (_, error) in sorted(self.failed.items()))
        return f"plugin(s) that failed to load and may provide it: {listed}; see `memcore plugins`"


def canonical_kinds(value: Any, renames: Mapping[str, str], *, warn_at: str | None = None) -> Any:
    """``value`` with every ``"kind"`` entry of its mappings (at any depth) that is a key of
    ``renames`` replaced by the current name. ``warn_at`` (a settings location): the value
    is what a user wrote, so each replacement emits a DeprecationWarning; None: silent."""
    if not renames:
        return value
    if isinstance(value, Mapping):
        out = {key: canonical_kinds(item, renames, warn_at=f"{warn_at}.{key}" if warn_at else None) for key, item in value.items()}
        kind = out.get("kind")
        if isinstance(kind, str) and kind in renames:
            if warn_at:
                warnings.warn(f"kind {kind!r} ({warn_at}.kind) is deprecated: write {renames[kind]!r}", DeprecationWarning, stacklevel=2)
            out["kind"] = renames[kind]
        return out
    if isinstance(value, list):
        return [canonical_kinds(item, renames, warn_at=warn_at) for item in value]
    return value


def _bad_name(category: str, name: Any) -> str:
    """Why ``name`` cannot be a kind name, with the fix."""
    if isinstance(name, str) and "-" in name and DEPRECATED_NAME_PATTERN.match(name):
        new = name.replace("-", "_")
        return (
            f"{category}: invalid name {name!r}: kind names use '_', not '-': register {new!r} "
            f"(and keep the old spelling working with register({new!r}, ..., deprecated_names=({name!r},)))"
        )
    return f"{category}: invalid name {name!r} (lowercase letters, digits, '_', '.')"


def _same_dist(a: str | None, b: str) -> bool:
    """Distribution names equal after PEP 503 normalisation."""
    return a is not None and re.sub(r"[-_.]+", "-", a).lower() == re.sub(r"[-_.]+", "-", b).lower()
