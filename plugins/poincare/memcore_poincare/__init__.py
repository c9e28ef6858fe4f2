"""memcore-poincare: HyperAmy, a hyperbolic emotional memory on ChromaDB.

Emotion particles (:class:`Point`: a direction, an intensity ``v``, a temperature ``T``,
a birth time and links) live in a Chroma collection (:class:`HyperAmyStorage`, embedded
``PersistentClient`` or a Chroma server). At search time they are evolved in time
(:class:`TimePhysics`), projected into the Poincaré ball (:class:`ParticleProjector`) and
retrieved in four steps, cone -> shell -> neighbourhood -> aggregate
(:class:`HyperAmyRetrieval`).

chromadb is imported only when a storage is opened: loading this plugin stays cheap.
"""

from __future__ import annotations

from .connection import ChromaConnection
from .physics import EvolutionLaw, ParticleProjector, TimePhysics, poincare_distance
from .retrieval import HyperAmyRetrieval, default_cone_width
from .storage import HyperAmyStorage, UpsertReport
from .types import Point, SearchResult

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
]
__version__ = "0.1.0"
