"""Registers the builtin pipeline stages: recall, fuse, filter, threshold, limit, rerank, intent,
relevance.

The implementations live in :mod:`memcore.retrieval._stages` and :mod:`memcore.retrieval._intent` (``intent``) and :mod:`memcore.retrieval._relevance`
(``relevance``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._plugins.hookspecs import hookimpl
from ..retrieval._stages import (
    Fuse,
    FuseConfig,
    Limit,
    LimitConfig,
    MetadataFilter,
    FilterConfig,
    Recall,
    RecallConfig,
    RerankConfig,
    RerankStage,
    Threshold,
    ThresholdConfig,
)
from ..retrieval._intent import IntentConfig, IntentStage
from ..retrieval._relevance import RelevanceConfig, RelevanceStage

if TYPE_CHECKING:
    from ..plugin import StageFactory, Register

__all__ = ["register_stages"]


@hookimpl
def register_stages(register: Register[StageFactory]) -> None:
    """Register the builtin stages."""
    register("recall", Recall, RecallConfig)
    register("fuse", Fuse, FuseConfig)
    register("filter", MetadataFilter, FilterConfig)
    register("threshold", Threshold, ThresholdConfig)
    register("limit", Limit, LimitConfig)
    register("rerank", RerankStage, RerankConfig)
    register("intent", IntentStage, IntentConfig)
    register("relevance", RelevanceStage, RelevanceConfig)
