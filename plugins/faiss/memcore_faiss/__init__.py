"""memcore-faiss: a vector database index on faiss-cpu.

Registers the index kind ``faiss`` (:class:`FaissIndex`, settings
:class:`FaissIndexConfig`): exact and approximate vector search with any faiss
``index_factory`` string (Flat, HNSW, IVF, PQ...), ``allowed`` id sets pushed down to
faiss as IDSelectors, tombstones plus compaction where faiss cannot remove ids (HNSW),
automatic training of IVF/PQ indexes once ``min_train`` vectors have arrived (exact
search until then), and native faiss files plus a JSON sidecar for persistence.

faiss itself is imported only when an index is built: loading this plugin (which every
``memcore`` start does) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import memcore
import memcore.plugin
from memcore.plugin import IndexFactory, Register

from .config import FaissIndexConfig, FaissQueryMode

if TYPE_CHECKING:
    from .index import FaissIndex

__all__ = ["FaissIndex", "FaissIndexConfig", "FaissQueryMode", "register_indexes"]
__version__ = "0.1.0"


def __getattr__(name: str) -> type[FaissIndex]:
    """``FaissIndex`` is imported on first access (its module imports no faiss, but is larger)."""
    if name == "FaissIndex":
        from .index import FaissIndex

        return FaissIndex
    raise AttributeError(name)


def _build(config: FaissIndexConfig, context: memcore.plugin.IndexContext) -> memcore.plugin.Index:
    """Factory of the ``faiss`` index kind."""
    from .index import FaissIndex

    return FaissIndex(config, context)


@memcore.hookimpl
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register the ``faiss`` index kind: ``register(name, factory, config_model)``."""
    register("faiss", _build, FaissIndexConfig)
