"""memcore-fifo-kv: FIFO queue, sorted key-value and BM25 text indexes.

Registered through memcore's ``register_indexes`` hook:

- index kind ``fifo``: an arrival-ordered queue with an optional ``capacity`` and
  ``newest``/``oldest`` query modes (short-term memory); the Collection's ``evict`` drops
  what lies beyond the capacity (:mod:`memcore_fifo_kv.fifo`)
- index kind ``sorted``: records ordered by a metadata field, with ``range`` and ``top``
  query modes (:mod:`memcore_fifo_kv.sorted_index`)
- index kind ``bm25``: BM25 text search (:mod:`memcore_fifo_kv.bm25`)

The index modules use only the standard library and pydantic at import time; heavy
libraries are imported lazily inside the indexes that need them.
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
    from .bm25 import BM25Config, BM25Index  # bm25s itself is imported lazily, by the index

    register("bm25", BM25Index, BM25Config)
