"""memcore-fifo-kv: FIFO queue and sorted key-value indexes.

Registered through memcore's ``register_indexes`` hook:

- index kind ``fifo``: an arrival-ordered queue with an optional ``capacity`` and
  ``newest``/``oldest`` query modes (short-term memory); the Collection's ``evict`` drops
  what lies beyond the capacity (:mod:`memcore_fifo_kv.fifo`)
- index kind ``sorted``: records ordered by a metadata field, with ``range`` and ``top``
  query modes (:mod:`memcore_fifo_kv.sorted_index`)

The ``bm25`` index moved to its own distribution, memcore-bm25 (``memcore_bm25``); the
``fifo-kv`` extra of memcore still installs it for one release. Both indexes use only the
standard library and pydantic.
"""

from __future__ import annotations

import memcore
from memcore.plugin import IndexFactory, Register

from .fifo import FifoIndex, FifoIndexConfig
from .sorted_index import SortedIndex, SortedIndexConfig

__all__ = ["FifoIndex", "FifoIndexConfig", "SortedIndex", "SortedIndexConfig", "register_indexes"]
__version__ = "0.1.0"


@memcore.hookimpl
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register the index kinds of this plugin: ``register(name, factory, config_model)``."""
    register("fifo", FifoIndex, FifoIndexConfig)
    register("sorted", SortedIndex, SortedIndexConfig)
