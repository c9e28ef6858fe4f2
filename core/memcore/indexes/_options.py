"""Build-time and search-time options of an index.

A component config lists its search-time fields in ``search_time`` (a class attribute of
:class:`memcore.ComponentConfig`, e.g. faiss ``ef_search`` / ``nprobe``): they may change
when a memory is reopened and take effect at once. Every other field is build-time: the
stored index was made with it, so a change needs a rebuild, and reopening with a changed
build-time option fails with an error that names the option, both values and the command.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import ConfigError
from .._plugins._registry import ComponentConfig

__all__ = ["search_time_fields", "build_time_part", "changed_options", "check_change", "with_defaults"]


def search_time_fields(config: ComponentConfig | type[ComponentConfig]) -> frozenset[str]:
    """The search-time field names of a config (model or instance)."""
    return frozenset(getattr(config, "search_time", frozenset()))


def with_defaults(config: Mapping[str, Any], model: ComponentConfig | type[ComponentConfig]) -> dict[str, Any]:
    """A dumped config as the current model reads it: an option added since it was saved
    (a new field of the plugin's config) reads as its default, so adding an option does not
    make every saved index or stored definition "changed". A config the model refuses (a
    removed option) stays as saved, and compares as changed."""
    cls = model if isinstance(model, type) else type(model)
    try:
        return cls.model_validate(dict(config)).model_dump(mode="json")
    except Exception:  # refused by the model: compared as saved
        return dict(config)


def build_time_part(config: Mapping[str, Any], model: ComponentConfig | type[ComponentConfig]) -> dict[str, Any]:
    """A dumped config without its search-time fields (what the stored index depends on)."""
    search = search_time_fields(model)
    return {k: v for k, v in config.items() if k not in search}


def changed_options(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Keys whose values differ between two dumped configs, sorted."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def check_change(name: str, kind: str, old: Mapping[str, Any], new: ComponentConfig, *, old_kind: str | None = None) -> list[str]:
    """The search-time options that change from ``old`` (a stored definition's config) to ``new``.

    Raises :class:`ConfigError` when the kind or a build-time option changes, naming the
    option, the stored and the new value, and how to rebuild.
    """
    if old_kind is not None and old_kind != kind:
        raise ConfigError(
            f"index {name!r} already exists with another kind or options: stored kind {old_kind!r}, new {kind!r}; "
            f"drop and re-create it: `memcore index drop {name} --path DIR` (or Collection.drop_index)",
            location=f"indexes.{name}.kind",
        )
    dumped = new.model_dump(mode="json")
    old = with_defaults(old, new)
    changed = changed_options(old, dumped)
    search = search_time_fields(new)
    build = [k for k in changed if k not in search]
    if build:
        key = build[0]
        more = f" (also {build[1:]})" if len(build) > 1 else ""
        raise ConfigError(
            f"index {name!r} already exists with another kind or options: build-time option {key!r} changed{more} "
            f"(stored {old.get(key)!r}, new {dumped.get(key)!r}); rebuild it "
            f"with the new options: `memcore index rebuild {name} --config FILE --path DIR` "
            f"(or Collection.rebuild_index({name!r}, {key}={dumped.get(key)!r}, ...))",
            location=f"indexes.{name}.{key}",
        )
    return changed
