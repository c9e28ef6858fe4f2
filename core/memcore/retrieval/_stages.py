"""The builtin pipeline stages and the helpers of re-scoring stages.

- stages: ``recall``, ``fuse``, ``filter``, ``threshold``, ``limit`` (the basic ones) and
  ``rerank`` (rule-based re-scoring, see :class:`RerankStage`); registered by
  :mod:`memcore.default_plugins.stages` (``intent`` lives in :mod:`._intent`);
- helpers that stages re-scoring the working list share, public through
  :mod:`memcore.plugin` (``unique_hits``, ``rescored``, ``minmax``, ``term_overlap``) and
  used by ``rerank``, ``intent`` and plugin stages (``mmr``):

  - :func:`unique_hits` / :func:`rescored`: de-duplicate the working list, emit re-scored hits;
  - :func:`minmax`: scores mapped to [0, 1] within the list;
  - :func:`parse_time` / :func:`recency_decay`: a metadata timestamp (a number in the field's
    own units, or an ISO-8601 string read as epoch seconds) turned into
    ``0.5 ** (age / half_life)``;
  - :func:`term_overlap` / :func:`phrase_fraction`: how much of the query's terms a text holds;
  - :class:`RecencyMode`: the query mode ``Query.extras["recency"] = {"now": ...}``, the
    reference time of a query (validated; a bad value is a :class:`memcore.ValidationError`).
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timezone
from typing import Any, Literal, Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from ..collection._reads import CollectionReader
from ..errors import ConfigError, ValidationError
from ..model._filters import matches, parse_filter
from ..model._query import Hit
from ..model._query import Query
from ..model._text import content_tokens, token_sets
from .._plugins._registry import ComponentConfig
from ._fusion import Fusion
from ._pipeline import PipelineContext, Stage

__all__ = [
    "RecallConfig",
    "Recall",
    "FuseConfig",
    "Fuse",
    "FilterConfig",
    "MetadataFilter",
    "ThresholdConfig",
    "Threshold",
    "LimitConfig",
    "Limit",
    "Boost",
    "RerankConfig",
    "RerankStage",
    "unique_hits",
    "rescored",
    "minmax",
    "parse_time",
    "recency_decay",
    "reference_time",
    "term_overlap",
    "phrase_fraction",
    "RecencyMode",
    "RECENCY_KEY",
]


# -- helpers of re-scoring stages ---------------------------------------------------------


def unique_hits(hits: Sequence[Hit]) -> list[Hit]:
    """The hits with repeated ids dropped (the first occurrence is kept), in their order.

    A stage's working list (``ctx.current``) can hold an id more than once (after a
    ``concat`` fusion, for example); a stage that scores each record once starts here.
    """
    if len({hit.id for hit in hits}) == len(hits):  # the usual case: nothing to drop
        return list(hits)
    seen: set[str] = set()
    out = []
    for hit in hits:
        if hit.id not in seen:
            seen.add(hit.id)
            out.append(hit)
    return out


def rescored(hits: Sequence[Hit], scores: np.ndarray, source: str, top_n: int | None = None) -> list[Hit]:
    """New hits sorted by ``scores`` (higher first, ties by id), cut to ``top_n``.

    Each keeps its id, provenance and record; ``raw`` is its incoming score and ``source``
    the stage that re-scored it.
    """
    values = np.asarray(scores, dtype=np.float64).tolist()
    ids = [h.id for h in hits]
    # two C-level sorts instead of a key tuple per hit: by id, then (stable) by score
    order = sorted(sorted(range(len(hits)), key=ids.__getitem__), key=values.__getitem__, reverse=True)
    if top_n is not None:
        order = order[:top_n]
    out = []
    for i in order:
        hit = hits[i]
        out.append(Hit(hit.id, values[i], float(hit.score), source, hit.provenance, hit.record))
    return out


RECENCY_KEY = "recency"
"""The ``Query.extras`` key holding the recency query mode."""


def minmax(scores: np.ndarray) -> np.ndarray:
    """``(s - min) / (max - min)``; all ones when every score is equal (or there is one)."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    lo, hi = float(scores.min()), float(scores.max())
    return (scores - lo) / (hi - lo) if hi > lo else np.ones_like(scores)


def parse_time(value: Any) -> float:
    """A timestamp as a float: numbers as they are (the field's units), ISO-8601 strings
    (``2024-03-16``, ``2024-03-16T10:30:00Z``, naive times read as UTC) as epoch seconds;
    NaN for anything else (missing, booleans, unparsable text)."""
    if isinstance(value, bool) or value is None:
        return math.nan
    if isinstance(value, (int, float)):
        number = float(value)
        return number if math.isfinite(number) else math.nan
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return math.nan
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return math.nan
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp()
    return math.nan


class RecencyMode(BaseModel):
    """``Query.extras["recency"]``: ``{"now": <number or ISO-8601 string>}``, the time that
    ages are measured from for this query (default: the stage's ``reference``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    now: float | str

    @classmethod
    def from_extras(cls, extras: Mapping[str, Any] | None) -> "RecencyMode | None":
        """The mode in ``extras`` (None when absent); ValidationError when malformed."""
        raw = (extras or {}).get(RECENCY_KEY)
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            raise ValidationError(f'Query.extras["{RECENCY_KEY}"] must be a dict like {{"now": 1700000000}}, got {type(raw).__name__}')
        try:
            mode = cls.model_validate(dict(raw))
        except PydanticValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "now"
            raise ValidationError(f'Query.extras["{RECENCY_KEY}"].{where}: {first["msg"]}') from None
        if math.isnan(parse_time(mode.now)):
            raise ValidationError(f'Query.extras["{RECENCY_KEY}"].now: {mode.now!r} is not a finite number or an ISO-8601 time')
        return mode


def reference_time(times: np.ndarray, reference: Literal["newest", "now"], mode: RecencyMode | None) -> float:
    """The time ages are measured from: the query mode's ``now`` when given, else the newest
    candidate time (``"newest"``) or the wall clock in epoch seconds (``"now"``)."""
    if mode is not None:
        return parse_time(mode.now)
    if reference == "now":
        return time.time()
    finite = times[np.isfinite(times)]
    return float(finite.max()) if finite.size else math.nan


def recency_decay(times: np.ndarray, half_life: float, reference: float) -> np.ndarray:
    """``0.5 ** (max(0, reference - t) / half_life)`` per candidate; 0 where the time is missing.

    Times after the reference count as age 0 (decay 1)."""
    times = np.asarray(times, dtype=np.float64)
    out = np.zeros(times.shape[0])
    ok = np.isfinite(times)
    if not math.isfinite(reference) or not ok.any():
        return out
    age = np.maximum(reference - times[ok], 0.0)
    out[ok] = np.power(0.5, age / float(half_life))
    return out


def term_overlap(query_terms: set[str], texts: Sequence[frozenset[str] | set[str]], mode: Literal["query_fraction", "jaccard"]) -> np.ndarray:
    """Per text: the fraction of ``query_terms`` it contains (``query_fraction``), or the
    Jaccard similarity of the two token sets (``jaccard``); 0 when the query has no terms."""
    if not query_terms:
        return np.zeros(len(texts))
    common = np.fromiter((len(query_terms & tokens) for tokens in texts), dtype=np.float64, count=len(texts))
    if mode == "query_fraction":
        return common / len(query_terms)
    union = np.fromiter((len(query_terms | tokens) for tokens in texts), dtype=np.float64, count=len(texts))
    return np.divide(common, union, out=np.zeros_like(common), where=union > 0)


def phrase_fraction(phrases: Sequence[Sequence[str]], texts: Sequence[frozenset[str] | set[str]]) -> np.ndarray:
    """Per text: the fraction of ``phrases`` (each a list of tokens) whose tokens all occur in
    it; 0 when there are no phrases."""
    out = np.zeros(len(texts))
    wanted = [set(p) for p in phrases if p]
    if not wanted:
        return out
    for i, tokens in enumerate(texts):
        out[i] = sum(1 for p in wanted if p <= tokens) / len(wanted)
    return out


# -- basic stages --------------------------------------------------------------------------


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
        ctx.add_list(self.name, self.search(ctx.collection, ctx.query))

    def alone(self, collection: CollectionReader, query: Query) -> list[Hit]:
        """The recall's list, without a context (see :meth:`Stage.alone`)."""
        return self.search(collection, query)

    def run_many(self, contexts: Sequence[PipelineContext]) -> None:
        """:meth:`run` on each context, the index searched once for all of their queries
        (:meth:`memcore.plugin.CollectionReader.search_index_many`) when they share a reader and a depth."""
        if not contexts:
            return
        collection = contexts[0].collection
        depths = {self.depth(ctx.query) for ctx in contexts}
        if len(depths) != 1 or any(ctx.collection is not collection for ctx in contexts):
            for ctx in contexts:
                self.run(ctx)
            return
        if self.index is None:
            self.check(collection)
        assert self.index is not None  # check() names the index or raises
        lists = collection.search_index_many(self.index, [ctx.query for ctx in contexts], depths.pop(), list_name=self.name)
        for ctx, hits in zip(contexts, lists):
            ctx.add_list(self.name, hits)

    def depth(self, query: Query) -> int:
        """How deep this stage searches for ``query``: its ``k``, else the query's k times ``over_fetch``."""
        config = self.config
        return config.k or (query.k if config.over_fetch == 1.0 else math.ceil(query.k * config.over_fetch))

    def search(self, collection: CollectionReader, query: Query) -> list[Hit]:
        """The list this stage adds for ``query``: its index searched to its depth."""
        if self.index is None:
            self.check(collection)
        assert self.index is not None  # check() names the index or raises
        return collection.search_index(self.index, query, self.depth(query), list_name=self.name)


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
    where: dict[str, Any] = Field(description="A metadata filter (same syntax as `where` in queries); hits whose record does not match are dropped.")

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
    min_score: float = Field(description="Hits scoring below this (the score of the working list at this stage) are dropped.")


class Threshold(Stage):
    """Keep hits with ``score >= min_score``."""

    def __init__(self, config: ThresholdConfig):
        self.config = config

    def run(self, ctx: PipelineContext) -> None:
        ctx.current = [h for h in ctx.current if h.score >= self.config.min_score]


class LimitConfig(ComponentConfig):
    """``limit``: keep the first ``k`` hits (default: the query's k)."""

    kind: str = "limit"
    k: int | None = Field(None, gt=0, description="How many hits to keep (default: the query's k).")


class Limit(Stage):
    """Cut the working list."""

    def __init__(self, config: LimitConfig):
        self.config = config

    def run(self, ctx: PipelineContext) -> None:
        ctx.current = ctx.current[: self.cut(ctx.query)]

    def cut(self, query: Query) -> int:
        """How many hits this stage keeps for ``query``: its ``k``, else the query's (see :meth:`Stage.cut`)."""
        return self.config.k or query.k


# -- rerank ---------------------------------------------------------------------------------


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
    """``rerank``: re-score and re-sort the working list with rule-based signals, dependency-free.

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
