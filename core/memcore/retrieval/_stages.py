"""The basic pipeline stages: ``recall``, ``fuse``, ``filter``, ``threshold``, ``limit``.

Registered by :mod:`memcore.default_plugins.stages`.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, field_validator

from ..collection._reads import CollectionReader
from ..errors import ConfigError
from ..model._filters import matches, parse_filter
from ._fusion import Fusion
from ._pipeline import CUTS, RUNS_ALONE, PipelineContext, Stage
from ..model._hit import Hit
from ..model._query import Query
from .._plugins._registry import ComponentConfig


class RecallConfig(ComponentConfig):
    """``recall``: search one index and add its ranked list."""

    kind: str = "recall"
    index: str | None = Field(None, description="Name of the index to search (default: the collection's only index, else the one named vector).")
    k: int | None = Field(None, gt=0, description="Depth; default ceil(query k * over_fetch).")
    over_fetch: float = Field(1.0, ge=1.0, description="Depth multiplier over the query's k.")
    name: str | None = Field(None, description="Name of the produced list (default: the index name).")


class Recall(Stage):
    """Search one index with the query (filters and scope pushed down)."""

    def __init__(self, config: RecallConfig):
        self.config = config
        self.index = config.index
        self.name = config.name or config.index or "recall"

    def check(self, collection: CollectionReader) -> None:
        names = [i["name"] for i in collection.list_indexes()]
        if self.index is None:
            if len(names) == 1:
                self.index = names[0]
            elif "vector" in names:
                self.index = "vector"
            else:
                raise ConfigError(f"recall stage: name the index to search (index = ...); indexes: {names}", location="pipeline")
            self.name = self.config.name or self.index
        elif self.index not in names:
            raise ConfigError(f"recall stage: no index named {self.index!r}; indexes: {names}", location="pipeline")

    def run(self, ctx: PipelineContext) -> None:
        hits = self.search(ctx._source, ctx.query)  # the collection itself, not the stage's view: a builtin recall runs for every query
        ctx.add_list(self.name, hits)

    def search(self, collection: CollectionReader, query: Query) -> list[Hit]:
        """The list this stage adds for ``query``: its index searched to its depth (also
        what :meth:`Pipeline.run` calls when the recall is the whole pipeline, see
        :data:`memcore.retrieval._pipeline.RUNS_ALONE`)."""
        if self.index is None:
            self.check(collection.reader)
        assert self.index is not None  # check() names the index or raises
        config = self.config
        depth = config.k or (query.k if config.over_fetch == 1.0 else math.ceil(query.k * config.over_fetch))
        return collection.search_index(self.index, query, depth, list_name=self.name)


RUNS_ALONE[Recall] = Recall.search


class FuseConfig(ComponentConfig):
    """``fuse``: merge ranked lists through a fusion strategy."""

    kind: str = "fuse"
    fusion: str | dict[str, Any] = Field("rrf", description="Fusion kind (rrf: memcore-rrf; builtin: concat), or a table with kind and its options.")
    lists: list[str] | None = Field(None, description="Lists to fuse (default: every list so far).")
    k: int | None = Field(None, gt=0, description="Output depth (default: the fusion's default depth, the longest input list; every id for concat and union).")
    name: str = Field("fused", description="Name of the produced list.")


class Fuse(Stage):
    """Fuse lists; the fused list becomes the working list."""

    def __init__(self, config: FuseConfig):
        self.config = config
        self.name = config.name
        self._fusion: Fusion | None = None

    def check(self, collection: CollectionReader) -> None:
        self._fusion = collection.build_fusion(self.config.fusion)

    def run(self, ctx: PipelineContext) -> None:
        fusion = self._fusion or ctx.collection.build_fusion(self.config.fusion)
        names = self.config.lists or list(ctx.lists)
        missing = [n for n in names if n not in ctx.lists]
        if missing:
            raise ConfigError(f"fuse stage: no list(s) {missing}; lists so far: {list(ctx.lists)}", location="pipeline")
        lists = {n: ctx.lists[n] for n in names}
        depth = self.config.k or max(1, fusion.default_depth(lists))
        ctx.add_list(self.name, fusion(lists, depth))


class FilterConfig(ComponentConfig):
    """``filter``: keep hits whose stored metadata matches ``where``."""

    kind: str = "filter"
    where: dict[str, Any]

    @field_validator("where")
    @classmethod
    def _parse(cls, value: dict[str, Any]) -> dict[str, Any]:
        parse_filter(value)
        return value


class MetadataFilter(Stage):
    """Post-filter the working list on metadata (recall stages already push ``query.where`` down)."""

    def __init__(self, config: FilterConfig):
        self.config = config
        self.node = parse_filter(config.where)

    def run(self, ctx: PipelineContext) -> None:
        records = ctx.records([h.id for h in ctx.current])
        ctx.current = [h for h, r in zip(ctx.current, records) if r is not None and matches(self.node, r.metadata)]


class ThresholdConfig(ComponentConfig):
    """``threshold``: drop hits scoring below ``min_score``."""

    kind: str = "threshold"
    min_score: float


class Threshold(Stage):
    """Keep hits with ``score >= min_score``."""

    def __init__(self, config: ThresholdConfig):
        self.config = config

    def run(self, ctx: PipelineContext) -> None:
        ctx.current = [h for h in ctx.current if h.score >= self.config.min_score]


class LimitConfig(ComponentConfig):
    """``limit``: keep the first ``k`` hits (default: the query's k)."""

    kind: str = "limit"
    k: int | None = Field(None, gt=0)


class Limit(Stage):
    """Cut the working list."""

    def __init__(self, config: LimitConfig):
        self.config = config

    def run(self, ctx: PipelineContext) -> None:
        ctx.current = ctx.current[: self.keep(ctx.query)]

    def keep(self, query: Query) -> int:
        """How many hits this stage keeps for ``query`` (see :data:`memcore.retrieval._pipeline.CUTS`)."""
        return self.config.k or query.k


CUTS[Limit] = Limit.keep
