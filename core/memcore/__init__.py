"""memcore: a plugin-based memory and retrieval framework for LLM agents and RAG.

The core defines *what* a memory is made of (records, a store, indexes, pipelines,
services); plugins provide *how*. Start with :func:`memcore.open`.
"""

from __future__ import annotations

from .api import Memory, open
from .collection import Collection
from .embedder import Embedder
from .errors import (
    BrokenIndexError,
    ConfigError,
    CorruptError,
    DimensionError,
    DuplicateIdError,
    FilterError,
    IndexUpdateError,
    LockedError,
    MemcoreError,
    NotFoundError,
    PluginError,
    UnknownComponentError,
    ValidationError,
)
from .fusion import Fusion
from .hookspecs import hookimpl
from .index import Index, IndexContext, Requirements, SpaceInfo, query_mode
from .pipeline import Pipeline, PipelineContext, Stage
from .records import Contribution, Hit, Link, Query, Record, Scope
from .registry import ComponentConfig
from .service import Service
from .settings import MemcoreSettings, load_settings
from .store import Store, WriteBatch

__all__ = [
    "open", "Memory", "Collection", "MemcoreSettings", "load_settings",
    "Record", "Query", "Hit", "Link", "Scope", "Contribution",
    "Index", "IndexContext", "Requirements", "SpaceInfo", "query_mode", "Embedder", "Fusion", "Stage", "Pipeline", "PipelineContext",
    "Service", "Store", "WriteBatch", "ComponentConfig", "hookimpl",
    "MemcoreError", "ConfigError", "UnknownComponentError", "PluginError", "NotFoundError", "ValidationError",
    "DimensionError", "DuplicateIdError", "FilterError", "LockedError", "CorruptError", "IndexUpdateError",
    "BrokenIndexError",
]

try:
    from importlib.metadata import version as _version

    __version__ = _version("memcore")
except Exception:  # noqa: BLE001 - running from a source tree
    __version__ = "0.0.0+source"
