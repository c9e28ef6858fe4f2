"""The ``graph_recall`` pipeline stage: expand the hits of earlier stages along the graph.

It takes the top ``seeds`` hits of a list (the working list by default), turns their
scores into seed scores, runs an ``expand`` query (``extras["graph"]``) on a graph index
(with the pipeline query's text, ``where`` filter and scope) and adds the result as a new
ranked list, which becomes the working list — typically followed by a ``fuse`` stage.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field

from memcore.plugin import CollectionReader, ComponentConfig, ConfigError, Hit, PipelineContext, Query, Stage

from .modes import QUERY_MODE_KEY

__all__ = ["GraphRecall", "GraphRecallConfig", "SEED_SCORES", "seed_scores"]


class GraphRecallConfig(ComponentConfig):
    """``graph_recall``: the graph neighbourhood of earlier hits, as a new ranked list."""

    kind: str = "graph_recall"
    index: str | None = Field(None, description="Graph index to expand on (default: the collection's only index of kind graph).")
    source: str | None = Field(None, description="List whose hits are the seeds (default: the working list).")
    seeds: int = Field(10, gt=0, description="How many of the source's best hits seed the expansion.")
    seed_score: Literal["rank", "minmax", "score"] = Field(
        "rank",
        description="Seed score of the hit at rank r: 1/r ('rank'), its score min-max scaled to [0, 1] ('minmax'), or its score as is, negatives as 0 ('score').",
    )
    max_depth: int | None = Field(None, ge=0, le=64, description="Hops (default: the index's max_depth).")
    max_nodes: int | None = Field(None, ge=1, le=10_000_000, description="Nodes visited at most (default: the index's max_nodes).")
    relations: list[str] | None = Field(None, min_length=1, description="Follow only these relations.")
    direction: Literal["out", "in", "both"] = Field("out", description="Directed graphs: links forwards, backwards or both.")
    include_seeds: bool = Field(True, description="Keep the seeds in the produced list (with their seed scores).")
    k: int | None = Field(None, gt=0, description="Depth of the produced list (default: ceil(query k x over_fetch)).")
    over_fetch: float = Field(1.0, ge=1.0, description="Depth multiplier over the query's k.")
    name: str = Field("graph_recall", min_length=1, description="Name of the produced list.")


def _by_rank(scores: dict[str, float]) -> dict[str, float]:
    return {rid: 1.0 / rank for rank, rid in enumerate(scores, start=1)}


def _by_score(scores: dict[str, float]) -> dict[str, float]:
    return {rid: max(s, 0.0) if math.isfinite(s) else 0.0 for rid, s in scores.items()}


def _by_minmax(scores: dict[str, float]) -> dict[str, float]:
    finite = [s for s in scores.values() if math.isfinite(s)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    span = high - low
    return {rid: ((s - low) / span if span > 0 else 1.0) if math.isfinite(s) else 0.0 for rid, s in scores.items()}


SEED_SCORES = {"rank": _by_rank, "score": _by_score, "minmax": _by_minmax}
"""``seed_score`` name -> function from {id: score} (rank order) to seed scores >= 0."""


def seed_scores(hits: list[Hit], how: str) -> dict[str, float]:
    """Seed scores (>= 0) for ``hits`` in rank order; the first occurrence of an id wins."""
    unique: dict[str, float] = {}
    for hit in hits:
        unique.setdefault(hit.id, float(hit.score))
    return SEED_SCORES[how](unique)


class GraphRecall(Stage):
    """Expand the best hits so far along a graph index; adds one list named ``name``."""

    def __init__(self, config: GraphRecallConfig):
        self.config = config
        self.name = config.name
        self.index = config.index

    def check(self, collection: CollectionReader) -> None:
        """The graph index exists (or there is exactly one to default to)."""
        self.index = self._graph_index(collection)

    def _graph_index(self, collection: CollectionReader) -> str:
        """The name of the graph index to expand on (ConfigError when there is none to use)."""
        indexes: dict[str, str] = {i["name"]: i["kind"] for i in collection.list_indexes()}
        if self.config.index is None:
            graphs = sorted(n for n, kind in indexes.items() if kind == "graph")
            if len(graphs) != 1:
                raise ConfigError(f"graph_recall stage: name the graph index (index = ...); graph indexes: {graphs or '(none)'}", location="pipeline")
            return graphs[0]
        if indexes.get(self.config.index) != "graph":
            what = f"is a {indexes[self.config.index]!r} index" if self.config.index in indexes else "does not exist"
            raise ConfigError(
                f"graph_recall stage: index {self.config.index!r} {what}; graph indexes: {sorted(n for n, k in indexes.items() if k == 'graph') or '(none)'}",
                location="pipeline",
            )
        return self.config.index

    def run(self, ctx: PipelineContext) -> None:
        """Seed from the source list, expand, add the new list (it becomes the working list)."""
        index = self.index
        if index is None:
            index = self.index = self._graph_index(ctx.collection)
        c = self.config
        if c.source is not None and c.source not in ctx.lists:
            raise ConfigError(f"graph_recall stage: no list {c.source!r}; lists so far: {list(ctx.lists)}", location="pipeline")
        source = ctx.lists[c.source] if c.source is not None else ctx.current
        seeds = seed_scores(source[: c.seeds], c.seed_score)
        if not seeds:
            ctx.add_list(self.name, [])
            return
        mode: dict[str, Any] = {"mode": "expand", "seeds": seeds, "direction": c.direction, "include_seeds": c.include_seeds}
        for key in ("max_depth", "max_nodes", "relations"):
            value = getattr(c, key)
            if value is not None:
                mode[key] = value
        depth = c.k or math.ceil(ctx.query.k * c.over_fetch)
        # the graph index reads its mode from extras["graph"] only; the pipeline query's
        # other extras (modes of other indexes) are not passed on
        query = Query(text=ctx.query.text, extras={QUERY_MODE_KEY: mode}, k=depth, where=ctx.query.where, scope=ctx.query.scope)
        ctx.add_list(self.name, ctx.collection.search_index(index, query, depth, list_name=self.name))
