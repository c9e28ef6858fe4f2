"""The ``rerank`` stage: rule-based re-scoring of the working list, dependency-free.

For each hit::

    score = base + keyword_weight * overlap + recency_weight * decay + sum(additive boosts)
    score = score * prod(multiplicative boosts)          (boost_mode = "multiply")

- ``base``: the incoming score, min-max normalised to [0, 1] within the list
  (``normalize = "minmax"``, the default) or as it is (``"none"``);
- ``overlap``: the fraction of the query's content words found in the record's text
  (``keyword_mode = "query_fraction"``) or the Jaccard similarity of their token sets;
- ``decay``: ``0.5 ** (age / half_life)`` of the metadata field ``time_field`` (numbers in
  the field's units, ISO-8601 strings as epoch seconds), 0 when the field is missing;
- ``boosts``: ``{where = <filter>, boost = <float>}`` entries; a hit whose metadata matches
  ``where`` gets ``+boost`` (``boost_mode = "add"``) or ``*boost`` (``"multiply"``).

With no signal configured the stage passes the list through unchanged (``top_n`` aside).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..model._filters import matches, parse_filter
from ._pipeline import PipelineContext, Stage
from ..model._hit import Hit
from .._plugins._registry import ComponentConfig
from ._hits import rescored, unique_hits
from ._signals import RecencyMode, minmax, parse_time, recency_decay, reference_time, term_overlap
from ..model._text import content_tokens, token_sets

__all__ = ["Boost", "RerankConfig", "RerankStage"]


class Boost(BaseModel):
    """One metadata boost: hits whose metadata matches ``where`` get ``boost``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    where: dict[str, Any] = Field(description="A metadata filter (same syntax as `where` in queries).")
    boost: float = Field(description="Added to the score (boost_mode add) or multiplied with it (multiply).")

    @field_validator("where")
    @classmethod
    def _parse(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise ValueError("a boost needs a non-empty where filter")
        parse_filter(value)
        return value


class RerankConfig(ComponentConfig):
    """``rerank``: rule-based re-scoring (recency decay, metadata boosts, keyword overlap)."""

    kind: str = "rerank"
    normalize: Literal["minmax", "none"] = Field("minmax", description="Base score: the incoming score min-max normalised within the list, or as is.")
    keyword_weight: float = Field(0.0, ge=0.0, description="Weight of the keyword overlap between the query text and the record text.")
    keyword_mode: Literal["query_fraction", "jaccard"] = Field(
        "query_fraction", description="query_fraction: share of the query's content words in the text; jaccard: token-set Jaccard."
    )
    time_field: str | None = Field(None, description="Metadata field holding the record's time (a number, or an ISO-8601 string).")
    half_life: float = Field(86400.0, gt=0.0, description="Age at which the recency signal halves, in the field's units (seconds for ISO strings).")
    recency_weight: float = Field(0.0, ge=0.0, description="Weight of the recency decay (needs time_field).")
    reference: Literal["newest", "now"] = Field("newest", description="Ages are measured from the newest candidate, or from the wall clock (epoch seconds).")
    boosts: list[Boost] = Field(default_factory=list, description="Metadata boosts: [{where = {...}, boost = 0.2}, ...].")
    boost_mode: Literal["add", "multiply"] = Field("add", description="Boosts are added to the score, or multiplied with it.")
    top_n: int | None = Field(None, gt=0, description="Keep only the best top_n after re-scoring (default: all).")
    name: str | None = Field(None, description="Name of the stage (the hits' source); default rerank.")

    @model_validator(mode="after")
    def _consistent(self) -> "RerankConfig":
        if self.recency_weight > 0 and not self.time_field:
            raise ValueError("recency_weight needs time_field (the metadata field holding each record's time)")
        if self.boost_mode == "multiply" and any(b.boost <= 0 for b in self.boosts):
            raise ValueError('with boost_mode = "multiply" every boost must be > 0 (1 = no change)')
        return self


class RerankStage(Stage):
    """Re-score and re-sort the working list with rule-based signals (see the module doc).

    Hits keep their provenance (the lists they came from); ``raw`` holds the incoming
    score, ``source`` the stage name. Ties are broken by id. The reference time of the
    recency signal can be set per query with ``Query.extras["recency"] = {"now": ...}``.
    """

    def __init__(self, config: RerankConfig | None = None):
        self.config = config or RerankConfig()
        self.name = self.config.name or "rerank"
        self._boosts = [(parse_filter(b.where), b.boost) for b in self.config.boosts]

    def applies(self, query_terms: set[str]) -> bool:
        """True when some configured signal applies to a query with these content words:
        the keyword signal needs words, so a query by vector or query mode alone passes
        through a keyword-only rerank with its recall order and scores."""
        c = self.config
        return bool((c.recency_weight > 0 and c.time_field) or self._boosts or (c.keyword_weight > 0 and query_terms))

    def scores(self, ctx: PipelineContext, hits: list[Hit], query_terms: set[str] | None = None) -> np.ndarray:
        """The new score of each hit (same order as ``hits``); ``query_terms`` are the
        query's content words when the caller already has them."""
        c = self.config
        base = np.fromiter((h.score for h in hits), dtype=np.float64, count=len(hits))
        total = minmax(base) if c.normalize == "minmax" else base
        ids = [h.id for h in hits]
        if c.keyword_weight > 0:
            texts = token_sets(ctx.texts(ids))
            terms = content_tokens(ctx.query.text) if query_terms is None else query_terms
            total += c.keyword_weight * term_overlap(terms, texts, c.keyword_mode)
        needs_metadata = (c.recency_weight > 0 and c.time_field) or self._boosts
        records = ctx.records(ids) if needs_metadata else []
        if c.recency_weight > 0 and c.time_field:
            mode = RecencyMode.from_extras(ctx.query.extras)
            times = np.asarray([parse_time(r.metadata.get(c.time_field)) if r is not None else np.nan for r in records])
            total += c.recency_weight * recency_decay(times, c.half_life, reference_time(times, c.reference, mode))
        if self._boosts:
            factor = np.ones(len(hits))
            for node, boost in self._boosts:
                hit_mask = np.asarray([r is not None and matches(node, r.metadata) for r in records], dtype=bool)
                if c.boost_mode == "add":
                    total += boost * hit_mask
                else:
                    factor[hit_mask] *= boost
            total *= factor
        return total

    def run(self, ctx: PipelineContext) -> None:
        """Replace the working list by its re-scored, re-sorted version."""
        hits = unique_hits(ctx.current)
        terms = content_tokens(ctx.query.text) if self.config.keyword_weight > 0 else set()
        if not hits or not self.applies(terms):
            ctx.current = hits[: self.config.top_n] if self.config.top_n else hits
            return
        ctx.current = rescored(hits, self.scores(ctx, hits, terms), self.name, self.config.top_n)
