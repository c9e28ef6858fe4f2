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

import functools
import importlib
import os
import threading
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import Any, Callable, Iterable

import pluggy

from . import hookspecs
from ..errors import PluginError
from .._util.log import get_logger
from ._registry import CATEGORIES, Registration, Registry

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
    where: str | None = None
    """``file:line`` where the load error was raised (the innermost frame), when it failed."""
    traceback: str | None = None
    """The load error's full traceback, when it failed (``memcore plugins --verbose``)."""

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
            "where": self.where,
            "traceback": self.traceback,
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
            self.load(module_name, functools.partial(importlib.import_module, module_name), builtin=True, version=_core_version(), distribution="memcore")
        if load_entry_points:
            self._load_entry_points(deny)

    # -- loading ----------------------------------------------------------------------

    def _load_entry_points(self, deny: set[str]) -> None:
        allow = _env_list("MEMCORE_PLUGINS")
        first: dict[str, str | None] = {}  # entry-point name -> the distribution loaded under it
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, _dist_name(e) or "")):
            dist = getattr(ep, "dist", None)
            dist_name = _dist_name(ep)
            names = {ep.name, dist_name}
            if allow is not None and not names & set(allow):
                continue
            if names & deny:
                continue
            if ep.name in first:  # reported, never silently skipped
                key = f"{ep.name} ({dist_name})"
                info = PluginInfo(name=key, builtin=False, version=dist.version if dist else None, distribution=dist_name)
                info.error = (
                    f"PluginError: entry point {ep.name!r} of {dist_name or 'an unknown distribution'} is also provided by "
                    f"{first[ep.name] or 'another distribution'}, which was loaded under that name; uninstall one of them"
                )
                self.infos[key] = info
                log.warning("plugin.load_failed", plugin=key, error=info.error)
                continue
            first[ep.name] = dist_name
            self.load(ep.name, ep.load, builtin=False, version=dist.version if dist else None, distribution=dist_name)

    def load(
        self, name: str, loader: Callable[[], object], *, builtin: bool = False, version: str | None = None, distribution: str | None = None
    ) -> PluginInfo:
        """Import a plugin with ``loader()`` (an entry point's ``load``, an import) and
        :meth:`add` it. Never raises for a broken plugin: the error is in the returned info."""
        try:
            plugin = loader()
        except Exception as exc:  # noqa: BLE001 - isolation is the point
            return self._failed(PluginInfo(name=name, builtin=builtin, version=version, distribution=distribution), exc)
        return self.add(name, plugin, builtin=builtin, version=version, distribution=distribution)

    def add(self, name: str, plugin: object, *, builtin: bool = False, version: str | None = None, distribution: str | None = None) -> PluginInfo:
        """Register one plugin object (a module, or any object with ``@memcore.hookimpl``
        functions) and what its hooks provide.

        Never raises for a broken plugin: the error is recorded in the returned info and
        nothing of the plugin stays registered.
        """
        info = PluginInfo(name=name, builtin=builtin, version=version, distribution=distribution)
        try:
            self._register(name, plugin, info)
        except Exception as exc:  # noqa: BLE001 - isolation is the point
            return self._failed(info, exc)
        self.infos[name] = info
        return info

    def _failed(self, info: PluginInfo, exc: Exception) -> PluginInfo:
        info.error = f"{type(exc).__name__}: {exc}"
        frames = traceback.extract_tb(exc.__traceback__)
        info.where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None
        info.traceback = "".join(traceback.format_exception(exc))
        info.registers = {}
        self.infos[info.name] = info
        self.registry.failed[info.name] = (info.distribution, info.error)
        log.warning("plugin.load_failed", plugin=info.name, error=info.error, where=info.where)
        log.debug("plugin.load_failed.traceback", plugin=info.name, traceback=info.traceback)
        return info

    def hook_of(self, plugin: object, hook: str) -> pluggy.HookCaller:
        """pluggy's hook caller of ``hook`` restricted to one registered ``plugin``: calling
        it runs that plugin's implementation (and its wrappers) the way pluggy documents
        (``tryfirst``/``trylast``/``wrapper``), isolated from every other plugin's."""
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        return self.pm.subset_hook_caller(hook, remove_plugins=others)

    def _register(self, plugin_name: str, plugin: object, info: PluginInfo) -> None:
        if self.pm.has_plugin(plugin_name):
            raise PluginError(f"a plugin named {plugin_name!r} is already registered")
        plugin = _hashable(plugin, plugin_name)
        self.pm.register(plugin, name=plugin_name)  # validates hookimpl signatures
        try:
            callers = self.pm.get_hookcallers(plugin) or []
            unknown = [hc.name for hc in callers if hc.spec is None]
            if unknown:
                raise PluginError(f"unknown hook(s) {', '.join(sorted(unknown))}; known: {', '.join(_hook_names())}")
            info.hooks = sorted(hc.name for hc in callers)
            if not info.hooks:
                raise PluginError(f"{type(plugin).__name__} {plugin_name!r} implements no memcore hook (@memcore.hookimpl); known: {', '.join(_hook_names())}")
            implemented = set(info.hooks)
            staged: list[Registration] = []
            for category in CATEGORIES:
                hook = f"register_{category}"
                if hook not in implemented:
                    continue

                def register(name: Any, factory: Any, config_model: Any = None, *, deprecated_names: Any = (), _c: str = category) -> None:
                    staged.append(Registry.make_registration(_c, name, factory, config_model, plugin_name, deprecated_names, info.distribution))

                self.hook_of(plugin, hook)(register=register)
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
                    self.registry.discard(category, n)


def _hashable(plugin: object, name: str) -> object:
    """``plugin``, or a module holding its attributes when it is unhashable (a
    ``SimpleNamespace``): pluggy's subset hook callers keep plugins in sets."""
    try:
        hash(plugin)
        return plugin
    except TypeError:
        proxy = ModuleType(f"memcore-plugin:{name}")
        proxy.__dict__.update({attr: getattr(plugin, attr) for attr in dir(plugin) if not attr.startswith("__")})
        return proxy


def _dist_name(ep: metadata.EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    return dist.metadata["Name"] if dist is not None else None


def _hook_names() -> list[str]:
    return list(hookspecs.HOOK_NAMES)


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
