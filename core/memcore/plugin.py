"""What a plugin author imports: the component interfaces, the hook typing, the helpers.

A plugin module imports from here (and its tests from :mod:`memcore.testing`)::

    from memcore.plugin import Index, IndexFactory, Register, hookimpl

    @hookimpl
    def register_indexes(register: Register[IndexFactory]) -> None:
        register("keyword", KeywordIndex, KeywordIndexConfig)

Applications import from :mod:`memcore` (``memcore.open``, ``Memory``, the data types and
the errors, which this module re-exports too, so a plugin module needs only this one).

The factory protocols below are the typed signature of every hook's ``register`` and of the
factories it takes: a class whose ``__init__`` takes the listed arguments is a factory
(``KeywordIndex`` above); so is any function or callable object with that signature. A
factory receives its config already validated by the config model it was registered with.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Protocol

from ._plugins._registry import ComponentConfig
from ._plugins.hookspecs import COMPONENTS, Register, hookimpl
from ._util.http import EndpointConfig, JsonHttpClient, RequestStats
from ._util.api_keys import ApiKey, ApiKeyRing, hash_api_key
from ._util.atomic import atomic_write_bytes, atomic_write_json, atomic_write_with
from ._util.log import get_logger
from .collection._collection import Collection
from .collection._reads import CollectionReader
from .embedders._embedder import Embedder, build_embedder, unit_token_rows
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
from .indexes._allowed import AllowedIds, AllowedRows, GatheredRows, merge_sorted
from .indexes._payload import npy_bytes, read_json, read_json_object, read_npy, read_npz, write_npz
from .indexes._index import Index, IndexContext, Requirements, SpaceInfo
from .indexes._vector import VectorIndex
from .indexes._query_modes import query_mode
from .indexes._vector_reader import VectorReader
from .llms._llm import LLM, LLMs, StepReport, run_llm_step
from .llms._triples import TRIPLE_FALLBACK, parse_triples, refactor_triple, rule_triples, triple_prompt
from .model._checks import validate_k
from .model._document import DocumentFilter, document_matches, parse_where_document
from .model._filters import BoolNode, Cond, Filter, matches, parse_filter
from .model._query import Contribution, Hit
from .model._query import Query
from .model._record import Link, Record, Scope
from .model._text import (
    ASCII_WORD,
    HYPHENATED_WORD,
    LETTER_WORD,
    NAME_WORD,
    STOPWORDS,
    STOPWORDS_EXTENDED,
    STOPWORDS_KEYWORDS,
    STOPWORDS_SHORT,
    UTTERANCE_OPENERS,
    WORD,
    content_tokens,
    token_set,
    token_sets,
    tokenize,
    words,
)
from .retrieval._fusion import Fusion, distinct_ids, merge_provenance
from .retrieval._pipeline import Pipeline, PipelineContext, Stage
from .retrieval._stages import minmax, rescored, term_overlap, unique_hits
from .services._problems import ServiceProblem
from .services._service import Service, hit_to_dict
from .stores._store import TAIL_RECORDS_MAX, Applied, LogRead, LogTail, Op, Store, Version, WriteBatch, involved_ids, plan_ops

__all__ = [
    # -- interfaces --
    "Index",
    "VectorIndex",
    "IndexContext",
    "Requirements",
    "SpaceInfo",
    "VectorReader",
    "Embedder",
    "Fusion",
    "Stage",
    "Pipeline",
    "PipelineContext",
    "CollectionReader",
    "Collection",
    "Service",
    "ServiceProblem",
    "Store",
    "WriteBatch",
    "GatheredRows",
    "ComponentConfig",
    "LLM",
    "LLMs",
    "StepReport",
    # -- hooks and their typing --
    "hookimpl",
    "Register",
    "StoreFactory",
    "EmbedderFactory",
    "IndexFactory",
    "StageFactory",
    "FusionFactory",
    "ServiceFactory",
    "LLMFactory",
    "FACTORY_PROTOCOLS",
    # -- helpers for index authors --
    "validate_k",
    "query_mode",
    "AllowedIds",
    "AllowedRows",
    "merge_sorted",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_with",
    "get_logger",
    "read_json",
    "read_json_object",
    "read_npy",
    "npy_bytes",
    "write_npz",
    "read_npz",
    # -- an OpenAI-compatible HTTP client (embeddings, chat) --
    "EndpointConfig",
    "JsonHttpClient",
    "RequestStats",
    # -- API keys for servers (SHA-256 digests, constant-time lookup) --
    "ApiKey",
    "ApiKeyRing",
    "hash_api_key",
    # -- helpers for embedder authors --
    "build_embedder",
    "unit_token_rows",
    # -- helpers for stage and fusion authors --
    "merge_provenance",
    "distinct_ids",
    "unique_hits",
    "rescored",
    "minmax",
    "term_overlap",
    "hit_to_dict",
    # -- text --
    "tokenize",
    "content_tokens",
    "token_set",
    "token_sets",
    "WORD",
    "ASCII_WORD",
    "HYPHENATED_WORD",
    "LETTER_WORD",
    "NAME_WORD",
    "words",
    "STOPWORDS",
    "STOPWORDS_EXTENDED",
    "STOPWORDS_KEYWORDS",
    "STOPWORDS_SHORT",
    "UTTERANCE_OPENERS",
    # -- LLM steps --
    "run_llm_step",
    "TRIPLE_FALLBACK",
    "parse_triples",
    "refactor_triple",
    "rule_triples",
    "triple_prompt",
    # -- store helpers --
    "Applied",
    "Op",
    "plan_ops",
    "involved_ids",
    "Filter",
    "parse_filter",
    "matches",
    "Version",
    "DocumentFilter",
    "parse_where_document",
    "document_matches",
    "Cond",
    "BoolNode",
    "LogRead",
    "LogTail",
    "TAIL_RECORDS_MAX",
    # -- data --
    "Record",
    "Query",
    "Hit",
    "Link",
    "Scope",
    "Contribution",
    # -- errors --
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
"""Every name a plugin module may import from memcore (plus ``memcore.testing`` in its tests)."""


class StoreFactory(Protocol):
    """``factory(config, path) -> Store``: ``path`` is the collection directory, None in memory."""

    def __call__(self, config: Any, path: Path | None, /) -> Store: ...


class EmbedderFactory(Protocol):
    """``factory(config) -> Embedder``."""

    def __call__(self, config: Any, /) -> Embedder: ...


class IndexFactory(Protocol):
    """``factory(config, context) -> Index``: ``context`` names the index, its kind (the key
    of its query modes in ``Query.extras``) and the declared embedding spaces."""

    def __call__(self, config: Any, context: IndexContext, /) -> Index: ...


class StageFactory(Protocol):
    """``factory(config) -> Stage``."""

    def __call__(self, config: Any, /) -> Stage: ...


class FusionFactory(Protocol):
    """``factory(config) -> Fusion``."""

    def __call__(self, config: Any, /) -> Fusion: ...


class ServiceFactory(Protocol):
    """``factory(config, collection, pipeline) -> Service``.

    The indexes a service needs are read from the factory's ``required_indexes(config)``
    (a :class:`memcore.Service` subclass has it): register the class itself, or give a
    factory function that attribute; a service whose class requires indexes its factory
    does not declare is refused when the memory is opened, never silently left without them.
    """

    def __call__(self, config: Any, collection: Collection, pipeline: Pipeline | None, /) -> Service: ...


class LLMFactory(Protocol):
    """``factory(config) -> LLM``, built on first use from an ``[llms.<name>]`` entry."""

    def __call__(self, config: Any, /) -> LLM: ...


FACTORY_PROTOCOLS: dict[str, type] = {c.category: globals()[c.factory] for c in COMPONENTS}
"""The factory protocol of each registry category (``register_<category>``), as named by
its declaration in the hookspecs (``memcore._plugins.hookspecs``)."""


def __getattr__(name: str) -> Any:
    """``CollectionView``: the former name of :class:`CollectionReader`, for one release (with a warning)."""
    if name == "CollectionView":
        warnings.warn("memcore.plugin.CollectionView is now memcore.plugin.CollectionReader; import it by that name", DeprecationWarning, stacklevel=2)
        return CollectionReader
    raise AttributeError(f"module 'memcore.plugin' has no attribute {name!r}")
