"""memcore: a plugin-based memory and retrieval framework for LLM agents and RAG.

The core defines *what* a memory is made of (records, a store, indexes, pipelines,
services); plugins provide *how*. Start with :func:`memcore.open`.

This module is the application's face: opening a memory, the data types and the errors.
Plugin authors import from :mod:`memcore.plugin` (interfaces, hook typing, helpers) and
test with :mod:`memcore.testing`. The layout of the package is described in
docs/architecture.md.
"""

from __future__ import annotations

import warnings
from typing import Any

from ._plugins.hookspecs import hookimpl
from .api._open import Memory, open
from .api._async import AsyncMemory, open_async
from .collection._collection import Collection
from .errors import (
    BrokenIndexError,
    ConfigError,
    CorruptError,
    DimensionError,
    DuplicateIdError,
    EndpointError,
    AuthenticationError,
    PermissionDeniedError,
    StorageFullError,
    StoreError,
    StoreUnavailableError,
    FilterError,
    IndexUpdateError,
    LockedError,
    MemcoreError,
    NotFoundError,
    PluginError,
    ScopeError,
    UnknownComponentError,
    ValidationError,
)
from .model._query import Contribution, Hit
from .model._query import Query
from .model._record import Link, Record, Scope
from .retrieval._pipeline import Pipeline
from .services._service import Service
from .settings import MemcoreSettings, load_settings

__all__ = [
    # -- using a memory -------------------------------------------------------------------
    "open",
    "Memory",
    "open_async",
    "AsyncMemory",
    "Collection",
    "MemcoreSettings",
    "load_settings",
    "Pipeline",
    "Service",
    # -- data -----------------------------------------------------------------------------
    "Record",
    "Query",
    "Hit",
    "Link",
    "Scope",
    "Contribution",
    # -- plugins (the rest of the plugin surface is memcore.plugin) ------------------------
    "hookimpl",
    # -- errors ---------------------------------------------------------------------------
    "MemcoreError",
    "ConfigError",
    "UnknownComponentError",
    "PluginError",
    "NotFoundError",
    "ValidationError",
    "DimensionError",
    "DuplicateIdError",
    "FilterError",
    "ScopeError",
    "LockedError",
    "CorruptError",
    "IndexUpdateError",
    "BrokenIndexError",
    "EndpointError",
    "StoreError",
    "StoreUnavailableError",
    "StorageFullError",
    "AuthenticationError",
    "PermissionDeniedError",
]
"""What an application uses: :func:`open`, the data types, the errors (and ``hookimpl``)."""

_MOVED_TO_PLUGIN = frozenset(
    [
        "Applied",
        "Op",
        "plan_ops",
        "involved_ids",
        "AllowedIds",
        "CollectionView",
        "ComponentConfig",
        "Embedder",
        "EmbedderFactory",
        "FACTORY_PROTOCOLS",
        "Filter",
        "Fusion",
        "FusionFactory",
        "GatheredRows",
        "Index",
        "IndexContext",
        "IndexFactory",
        "LLM",
        "LLMFactory",
        "LLMs",
        "PipelineContext",
        "Register",
        "Requirements",
        "ServiceFactory",
        "SpaceInfo",
        "Stage",
        "StageFactory",
        "StepReport",
        "Store",
        "StoreFactory",
        "TRIPLE_FALLBACK",
        "VectorReader",
        "WriteBatch",
        "atomic_write_bytes",
        "atomic_write_json",
        "atomic_write_with",
        "build_embedder",
        "content_tokens",
        "distinct_ids",
        "get_logger",
        "hit_to_dict",
        "matches",
        "merge_provenance",
        "merge_sorted",
        "minmax",
        "parse_filter",
        "parse_triples",
        "query_mode",
        "refactor_triple",
        "rescored",
        "rule_triples",
        "run_llm_step",
        "term_overlap",
        "token_set",
        "token_sets",
        "tokenize",
        "triple_prompt",
        "unique_hits",
        "unit_token_rows",
        "validate_k",
    ]
)
"""Names ``memcore`` exported before 0.2 that now live in :mod:`memcore.plugin`."""


def __getattr__(name: str) -> Any:
    """The names that left ``memcore.__all__``: still importable for one release, with a warning."""
    if name in _MOVED_TO_PLUGIN:
        from . import plugin as face

        warnings.warn(f"memcore.{name} moved to memcore.plugin.{name}; import it from there", DeprecationWarning, stacklevel=2)
        return getattr(face, name)
    raise AttributeError(f"module 'memcore' has no attribute {name!r}")


try:
    from importlib.metadata import version as _version

    __version__ = _version("memcore")
except Exception:  # noqa: BLE001 - running from a source tree
    __version__ = "0.0.0+source"
