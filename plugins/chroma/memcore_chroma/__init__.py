"""memcore-chroma: a vector index kept in a ChromaDB collection.

Registers the index kind ``chroma`` (:class:`ChromaIndex`, settings
:class:`ChromaIndexConfig`): embedded (a ``PersistentClient`` inside the index folder) or
on a Chroma server (``HttpClient``: ``connection.mode = "http"``, host, port, tenant,
database), vectors taken from the collection's embedding space, ``allowed`` pushed down to
Chroma as ``ids``, adds batched by Chroma's maximum batch size, caught up from the store's
log like any index.

chromadb is imported only when a ``chroma`` index first touches its collection: loading
this plugin (which every ``memcore`` start does) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import memcore
import memcore.plugin
from memcore.plugin import IndexFactory, Register

from .config import ChromaIndexConfig
from memcore_chroma_support import ChromaConnection

if TYPE_CHECKING:
    from .index import ChromaIndex

__all__ = ["ChromaIndex", "ChromaIndexConfig", "ChromaConnection", "register_indexes"]
__version__ = "0.1.0"


def __getattr__(name: str) -> type[ChromaIndex]:
    """``ChromaIndex`` is imported on first access."""
    if name == "ChromaIndex":
        from .index import ChromaIndex

        return ChromaIndex
    raise AttributeError(name)


def _build(config: ChromaIndexConfig, context: memcore.plugin.IndexContext) -> memcore.plugin.Index:
    """Factory of the ``chroma`` index kind."""
    from .index import ChromaIndex

    return ChromaIndex(config, context)


@memcore.hookimpl
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register the ``chroma`` index kind: ``register(name, factory, config_model)``."""
    register("chroma", _build, ChromaIndexConfig)
