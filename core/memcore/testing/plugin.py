"""Register an in-test plugin object for the duration of a ``with`` block."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import PluginError
from .._plugins._host import PluginInfo, get_host

__all__ = ["register_plugin"]


@contextmanager
def register_plugin(obj: Any, name: str = "test-plugin") -> Iterator[PluginInfo]:
    """Add ``obj`` (a module or any object with ``@memcore.hookimpl`` functions) to the
    process-wide plugin host as plugin ``name``; remove it and everything it registered on exit.

    Yields the plugin's :class:`memcore._plugins._host.PluginInfo`. Raises :class:`memcore.PluginError`
    when the plugin fails to register (bad hook, duplicate component name...) or when a
    plugin called ``name`` is already loaded; nothing is left registered in either case::

        from types import SimpleNamespace
        from memcore import hookimpl
        from memcore.testing import register_plugin

        @hookimpl
        def register_indexes(register):
            register("my_index", MyIndex, MyIndexConfig)

        with register_plugin(SimpleNamespace(register_indexes=register_indexes)):
            collection.create_index("mine", "my_index")
    """
    host = get_host()
    if name in host.infos or host.pm.has_plugin(name):
        raise PluginError(f"a plugin named {name!r} is already loaded; give the test plugin another name")
    info = host.add(name, obj)
    try:
        if info.error is not None:
            raise PluginError(f"test plugin {name!r} failed to register: {info.error}")
        yield info
    finally:
        host.remove(name)
