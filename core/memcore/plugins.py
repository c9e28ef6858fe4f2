"""The plugin manager: builtin plugins plus third-party ones from the entry-point group ``memcore``.

Loading is failure-isolated: a plugin that raises at import, has a malformed hook, or
registers a name that is already taken is reported (see :func:`plugin_infos`, ``memcore
plugins``) and skipped as a whole; memcore and every other plugin keep working.

Environment:

- ``MEMCORE_PLUGINS``: comma-separated allow-list of third-party plugin names (entry-point
  names or distribution names). Set but empty: no third-party plugin is loaded.
- ``MEMCORE_DISABLE_PLUGINS``: comma-separated deny-list (builtins included, by name).
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import Any, Iterable

import pluggy

from . import hookspecs
from .errors import PluginError
from .logging import get_logger
from .registry import CATEGORIES, Registration, Registry

__all__ = ["PluginInfo", "PluginHost", "get_host", "get_registry", "plugin_infos", "reset_plugins", "DEFAULT_PLUGINS"]

DEFAULT_PLUGINS: tuple[str, ...] = (
    "memcore.default_plugins.stores",
    "memcore.default_plugins.embedders",
    "memcore.default_plugins.indexes",
    "memcore.default_plugins.fusions",
    "memcore.default_plugins.stages",
    "memcore.default_plugins.services",
)
"""Builtin plugin modules, registered through the same hooks as third-party plugins."""

ENTRY_POINT_GROUP = "memcore"

log = get_logger("memcore.plugins")


@dataclass
class PluginInfo:
    """What ``memcore plugins`` reports about one plugin."""

    name: str
    builtin: bool
    version: str | None = None
    distribution: str | None = None
    registers: dict[str, list[str]] = field(default_factory=dict)
    hooks: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict."""
        return {
            "name": self.name,
            "builtin": self.builtin,
            "version": self.version,
            "distribution": self.distribution,
            "hooks": self.hooks,
            "registers": self.registers,
            "error": self.error,
        }


def _env_list(name: str) -> list[str] | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    return [part.strip() for part in raw.split(",") if part.strip()]


class PluginHost:
    """A pluggy manager plus the registry its plugins filled and a report per plugin."""

    def __init__(self, *, load_entry_points: bool = True, builtins: Iterable[str] = DEFAULT_PLUGINS):
        self.pm = pluggy.PluginManager("memcore")
        self.pm.add_hookspecs(hookspecs)
        self.registry = Registry()
        self.infos: dict[str, PluginInfo] = {}
        deny = set(_env_list("MEMCORE_DISABLE_PLUGINS") or ())
        for module_name in builtins:
            if module_name in deny or module_name.rsplit(".", 1)[-1] in deny:
                continue
            self.add(module_name, lambda m=module_name: importlib.import_module(m), builtin=True, version=_core_version(), distribution="memcore")
        if load_entry_points:
            self._load_entry_points(deny)

    # -- loading ----------------------------------------------------------------------

    def _load_entry_points(self, deny: set[str]) -> None:
        allow = _env_list("MEMCORE_PLUGINS")
        seen: set[str] = set()
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else None
            names = {ep.name, dist_name}
            if ep.name in seen:
                continue
            seen.add(ep.name)
            if allow is not None and not names & set(allow):
                continue
            if names & deny:
                continue
            self.add(ep.name, ep.load, builtin=False, version=dist.version if dist else None, distribution=dist_name)

    def add(self, name: str, load: Any, *, builtin: bool = False, version: str | None = None, distribution: str | None = None) -> PluginInfo:
        """Load one plugin (``load()`` returns the module or object) and register what it provides.

        Never raises for a broken plugin: the error is recorded in the returned info.
        """
        info = PluginInfo(name=name, builtin=builtin, version=version, distribution=distribution)
        self.infos[name] = info
        try:
            plugin = load() if callable(load) and not isinstance(load, ModuleType) else load
            self._register(name, plugin, info)
        except Exception as exc:  # noqa: BLE001 - isolation is the point
            info.error = f"{type(exc).__name__}: {exc}"
            info.registers = {}
            self.registry.failed[name] = (distribution, info.error)
            log.warning("plugin.load_failed", plugin=name, error=info.error)
        return info

    def _register(self, plugin_name: str, plugin: Any, info: PluginInfo) -> None:
        if self.pm.has_plugin(plugin_name):
            raise PluginError(f"a plugin named {plugin_name!r} is already registered")
        self.pm.register(plugin, name=plugin_name)  # validates hookimpl signatures
        try:
            callers = self.pm.get_hookcallers(plugin) or []
            unknown = [hc.name for hc in callers if hc.spec is None]
            if unknown:
                raise PluginError(f"unknown hook(s) {', '.join(sorted(unknown))}; known: {', '.join(_hook_names())}")
            info.hooks = sorted(hc.name for hc in callers)
            staged: list[Registration] = []
            for category in CATEGORIES:
                caller = getattr(self.pm.hook, f"register_{category}")
                for impl in caller.get_hookimpls():
                    if impl.plugin is not plugin:
                        continue

                    def register(name: Any, factory: Any, config_model: Any = None, _c: str = category) -> None:
                        staged.append(Registry.make_registration(_c, name, factory, config_model, plugin_name))

                    args = {"register": register}
                    impl.function(*(args[a] for a in impl.argnames))
            problems = self.registry.conflicts(staged)
            if problems:
                raise PluginError("; ".join(problems))
            self.registry.add_all(staged)
            for reg in staged:
                info.registers.setdefault(reg.category, []).append(reg.name)
        except Exception:
            self.pm.unregister(plugin)
            raise

    def remove(self, name: str) -> None:
        """Unregister a plugin and everything it registered (used by test fixtures)."""
        info = self.infos.pop(name, None)
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        if info:
            for category, names in info.registers.items():
                for n in names:
                    self.registry.entries[category].pop(n, None)


def _hook_names() -> list[str]:
    return [f"register_{c}" for c in CATEGORIES]


def _core_version() -> str | None:
    try:
        return metadata.version("memcore")
    except metadata.PackageNotFoundError:
        return None


_lock = threading.Lock()
_host: PluginHost | None = None


def get_host() -> PluginHost:
    """The process-wide plugin host, loaded on first use."""
    global _host
    with _lock:
        if _host is None:
            _host = PluginHost()
        return _host


def get_registry() -> Registry:
    """The process-wide component registry."""
    return get_host().registry


def plugin_infos() -> list[PluginInfo]:
    """A report per plugin (builtins first), load errors included."""
    return list(get_host().infos.values())


def reset_plugins() -> None:
    """Forget the loaded plugins; the next use reloads them (honours changed env vars)."""
    global _host
    with _lock:
        _host = None
