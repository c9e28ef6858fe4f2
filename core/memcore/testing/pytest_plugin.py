"""A pytest plugin with memcore fixtures for plugin authors.

Enable it in a test module or in the root ``conftest.py`` of your tests::

    pytest_plugins = ["memcore.testing.pytest_plugin"]

Fixtures:

- ``memcore_plugin``: a function ``register(obj, name="test-plugin") -> PluginInfo`` that
  adds an in-test plugin object to memcore's plugin host until the end of the test (see
  :func:`memcore.testing.register_plugin`)::

      def test_my_index(memcore_plugin):
          memcore_plugin(my_plugin_module)
          collection = memcore.Collection.create()
          collection.create_index("mine", "my_index")
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any, Callable, Iterator

import pytest

from .._plugins._host import PluginInfo
from .plugin import register_plugin


@pytest.fixture
def memcore_plugin() -> Iterator[Callable[..., PluginInfo]]:
    """Register in-test plugins for one test; each is removed at teardown (last first)."""
    with ExitStack() as stack:

        def register(obj: Any, name: str = "test-plugin") -> PluginInfo:
            return stack.enter_context(register_plugin(obj, name))

        yield register
