"""memcore-poincare: HyperAmy, a hyperbolic emotional memory on ChromaDB.

Emotion particles (:class:`Point`: a direction, an intensity ``v``, a temperature ``T``,
a birth time and links) live in a Chroma collection (:class:`HyperAmyStorage`, embedded
``PersistentClient`` or a Chroma server). At search time they are evolved in time
(:class:`TimePhysics`), projected into the Poincaré ball (:class:`ParticleProjector`) and
retrieved in four steps, cone -> shell -> neighbourhood -> aggregate
(:class:`HyperAmyRetrieval`).

Registered with memcore: the index kind ``poincare`` (:class:`PoincareIndex`, scores
``-distance``) and the service ``hyperamy`` (:class:`HyperAmyService`). chromadb is
imported only when a storage or an index opens its collection: loading this plugin stays
cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import memcore
import memcore.plugin
from memcore.plugin import IndexFactory, Register, ServiceFactory

from .config import HyperAmyServiceConfig, PoincareIndexConfig, PoincareQueryMode
from memcore_chroma_support import ChromaConnection
from .physics import EvolutionLaw, ParticleProjector, TimePhysics, poincare_distance
from .retrieval import HyperAmyRetrieval, default_cone_width
from .service import HyperAmyService
from .storage import HyperAmyStorage, UpsertReport
from .types import Point, SearchResult

if TYPE_CHECKING:
    from .index import PoincareIndex

__all__ = [
    "Point",
    "SearchResult",
    "TimePhysics",
    "EvolutionLaw",
    "ParticleProjector",
    "poincare_distance",
    "HyperAmyStorage",
    "UpsertReport",
    "HyperAmyRetrieval",
    "default_cone_width",
    "ChromaConnection",
    "PoincareIndex",
    "PoincareIndexConfig",
    "PoincareQueryMode",
    "HyperAmyService",
    "HyperAmyServiceConfig",
    "register_indexes",
    "register_services",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> type[PoincareIndex]:
    """``PoincareIndex`` is imported on first access."""
    if name == "PoincareIndex":
        from .index import PoincareIndex

        return PoincareIndex
    raise AttributeError(name)


def _build_index(config: PoincareIndexConfig, context: memcore.plugin.IndexContext) -> memcore.plugin.Index:
    """Factory of the ``poincare`` index kind."""
    from .index import PoincareIndex

    return PoincareIndex(config, context)


@memcore.hookimpl
def register_indexes(register: Register[IndexFactory]) -> None:
    """Register the ``poincare`` index kind."""
    register("poincare", _build_index, PoincareIndexConfig)


@memcore.hookimpl
def register_services(register: Register[ServiceFactory]) -> None:
    """Register the ``hyperamy`` service."""
    register("hyperamy", HyperAmyService, HyperAmyServiceConfig)  # the class: memcore.open reads its required_indexes
