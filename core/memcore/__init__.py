"""memcore: a plugin-based memory and retrieval framework for LLM agents and RAG.

The core defines *what* a memory is made of (records, a store, indexes, pipelines,
services); plugins provide *how*. Start with :func:`memcore.open`.

The plugin API: everything a plugin may import from memcore is listed in ``__all__``
below (plus the package :mod:`memcore.testing` for its tests).
:class:`memcore.testing.PluginRegistrationContract` rejects a plugin module that imports
any other memcore module or name (see docs/plugins/writing.md, "What a plugin may import").
"""

from __future__ import annotations

from .allowed import AllowedIds, GatheredRows, merge_sorted
from .api import Memory, open
from .atomic import atomic_write_bytes, atomic_write_json, atomic_write_with
from .collection import Collection
from .collection_view import CollectionView
from .embedder import Embedder, build_embedder, unit_token_rows
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
    ScopeError,
    UnknownComponentError,
    ValidationError,
)
from .factories import (
    EmbedderFactory,
    FusionFactory,
    IndexFactory,
    LLMFactory,
    Register,
    ServiceFactory,
    StageFactory,
    StoreFactory,
)
from .filters import Filter, matches, parse_filter
from .fusion import Fusion, distinct_ids, merge_provenance
from .hookspecs import hookimpl
from .index import Index, IndexContext, Requirements, SpaceInfo
from .llm import LLM, LLMs, StepReport, run_llm_step
from .logging import get_logger
from .pipeline import Pipeline, PipelineContext, Stage
from .query_modes import query_mode
from .records import Contribution, Hit, Link, Query, Record, Scope, validate_k
from .registry import ComponentConfig
from .service import Service, hit_to_dict
from .settings import MemcoreSettings, load_settings
from .stages.hits import rescored, unique_hits
from .stages.signals import minmax, term_overlap
from .stages.text import content_tokens, token_set, token_sets, tokenize
from .store import Applied, Op, Store, WriteBatch, involved_ids, plan_ops
from .triples import TRIPLE_FALLBACK, parse_triples, refactor_triple, rule_triples, triple_prompt
from .vector_reader import VectorReader

# -- issue 21 VectorIndex --
from .indexes._vector import VectorIndex

__all__ = [
    # -- using a memory -------------------------------------------------------------------
    "open",
    "Memory",
    "Collection",
    "CollectionView",
    "MemcoreSettings",
    "load_settings",
    # -- data -----------------------------------------------------------------------------
    "Record",
    "Query",
    "Hit",
    "Link",
    "Scope",
    "Contribution",
    # -- the component interfaces a plugin implements -------------------------------------
    "Index",
    "IndexContext",
    "Requirements",
    "SpaceInfo",
    "VectorReader",
    "Embedder",
    "Fusion",
    "Stage",
    "Pipeline",
    "PipelineContext",
    "Service",
    "Store",
    "WriteBatch",
    "ComponentConfig",
    "hookimpl",
    "AllowedIds",
    "merge_sorted",
    "GatheredRows",
    "LLM",
    "LLMs",
    "StepReport",
    "run_llm_step",
    # -- issue 21 VectorIndex --
    "VectorIndex",
    "Register",
    "StoreFactory",
    "EmbedderFactory",
    "IndexFactory",
    "StageFactory",
    "FusionFactory",
    "ServiceFactory",
    "LLMFactory",
    # -- helpers for plugin authors -------------------------------------------------------
    "build_embedder",
    "unit_token_rows",
    "validate_k",
    "query_mode",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_with",
    "get_logger",
    "merge_provenance",
    "distinct_ids",
    "unique_hits",
    "rescored",
    "minmax",
    "term_overlap",
    "tokenize",
    "content_tokens",
    "token_set",
    "token_sets",
    "hit_to_dict",
    "TRIPLE_FALLBACK",
    "parse_triples",
    "refactor_triple",
    "rule_triples",
    "triple_prompt",
    # -- helpers for store authors --------------------------------------------------------
    "Applied",
    "Op",
    "plan_ops",
    "involved_ids",
    "Filter",
    "parse_filter",
    "matches",
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
]
"""The plugin API: every name a plugin module may import from memcore (plus ``memcore.testing``)."""

try:
    from importlib.metadata import version as _version

    __version__ = _version("memcore")
except Exception:  # noqa: BLE001 - running from a source tree
    __version__ = "0.0.0+source"
