"""memcore-services: the agent-memory services of docs/architecture.md §2, registered
through ``register_services``:

- ``short_term_memory``: a window of the last N entries;
- ``memoryos``: STM queue -> MTM segments (page chains, heat) -> LTM profile and knowledge;
- ``hierarchical``: two-tier, three-tier or functional tiers with capacities and a
  migration policy (fifo, heat, age);
- ``vector_hash``: TiM-style thoughts (triple sentences) in an LSH index;
- ``hybrid``: several indexes + fusion, a declared pipeline behind the service interface,
  optionally over two granularities (entries and windows of entries, the ``expand`` stage).

They create their indexes by kind (``fifo`` of memcore-fifo-kv, ``lsh`` of memcore-lsh,
``bm25`` of memcore-bm25, the ``rrf`` fusion...): ``pip install -c constraints.txt "memcore[services]"`` brings them.
"""

from __future__ import annotations

import memcore
from memcore.plugin import Register, ServiceFactory, StageFactory

from .hierarchical import HierarchicalConfig, HierarchicalMemory
from .granularity import ExpandConfig, ExpandStage, WindowsConfig
from .hybrid import HybridConfig, HybridService
from .memoryos import MemoryOS, MemoryOSConfig
from .short_term import ShortTermMemory, ShortTermMemoryConfig
from .vector_hash import VectorHashConfig, VectorHashMemory

__all__ = [
    "ShortTermMemory",
    "ShortTermMemoryConfig",
    "MemoryOS",
    "MemoryOSConfig",
    "HierarchicalMemory",
    "HierarchicalConfig",
    "VectorHashMemory",
    "VectorHashConfig",
    "HybridService",
    "HybridConfig",
    "WindowsConfig",
    "ExpandStage",
    "ExpandConfig",
    "register_services",
    "register_stages",
]
__version__ = "0.1.0"


@memcore.hookimpl
def register_services(register: Register[ServiceFactory]) -> None:
    """Register the five services: ``register(name, factory, config_model)``."""
    register("short_term_memory", ShortTermMemory, ShortTermMemoryConfig)
    register("memoryos", MemoryOS, MemoryOSConfig)
    register("hierarchical", HierarchicalMemory, HierarchicalConfig)
    register("vector_hash", VectorHashMemory, VectorHashConfig)
    register("hybrid", HybridService, HybridConfig)


@memcore.hookimpl
def register_stages(register: Register[StageFactory]) -> None:
    """Register the ``expand`` stage (window hits -> their member entries)."""
    register("expand", ExpandStage, ExpandConfig)
