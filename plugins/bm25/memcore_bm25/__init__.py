"""memcore-bm25: the BM25 text index (bm25s + PyStemmer).

Registered through memcore's ``register_indexes`` hook:

- index kind ``bm25``: BM25 text search with a bm25s base segment and a fresh segment,
  scores equal to a fresh bm25s index over the live records (:mod:`memcore_bm25.bm25`).

The kind was registered by memcore-fifo-kv before; its name and settings are unchanged.
Loading the plugin imports neither bm25s nor PyStemmer: building an index does.
"""

from __future__ import annotations

import memcore
from memcore.plugin import IndexFactory, Register

from .bm25 import BM25Config, BM25Index

__all__ = ["BM25Config", "BM25Index", "register_indexes"]
__version__ = "0.1.0"


@memcore.hookimpl
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register the index kind of this plugin: ``register(name, factory, config_model)``."""
    register("bm25", BM25Index, BM25Config)
