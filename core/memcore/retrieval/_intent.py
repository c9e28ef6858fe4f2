"""The ``intent`` stage: classify the query (:mod:`.intent_rules`) and re-score the working
list with that intent's settings.

Per intent (``temporal``, ``entity``, ``factual``, ``default``) an :class:`IntentAction`::

    score = base + match_weight * matched + recency_weight * decay

- ``base``: the incoming score, min-max normalised within the list (``normalize``);
- ``matched``: the fraction of the intent's key terms found in the record's text (time
  expressions for ``temporal``, entities for ``entity``, content words otherwise);
- ``decay``: the recency of the metadata field ``time_field`` (as in ``rerank``; ignored
  while ``time_field`` is unset).

An intent whose weights are all 0 (``factual`` and ``default`` by default) keeps the list
as it is: relevance order and scores. Whatever the intent, the stage records it in
``ctx.query.extras["intent"]`` (``{"name", "terms", "times", "entities", "question"}``) for
the stages after it. A caller can force an intent with ``Query.extras["intent"] = {"name":
"temporal"}``.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from ..errors import ValidationError
from ._pipeline import PipelineContext, Stage
from ..model._query import Hit
from .._plugins._registry import ComponentConfig
from ._intent_rules import INTENTS, QueryIntent, classify
from ._stages import RecencyMode, minmax, parse_time, phrase_fraction, recency_decay, reference_time, rescored, unique_hits
from ..model._text import token_sets

__all__ = ["IntentAction", "IntentConfig", "IntentStage", "DEFAULT_ACTIONS", "INTENT_KEY"]

INTENT_KEY = "intent"
"""The ``Query.extras`` key the stage writes (and reads a forced intent from)."""


class IntentAction(BaseModel):
    """What an intent does to the working list."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match_weight: float = Field(0.0, ge=0.0, description="Weight of the fraction of the intent's key terms found in a hit's text.")
    recency_weight: float = Field(0.0, ge=0.0, description="Weight of the recency decay of time_field (ignored without time_field).")

    @property
    def active(self) -> bool:
        """True when the action changes scores."""
        return self.match_weight > 0 or self.recency_weight > 0


DEFAULT_ACTIONS: dict[str, dict[str, float]] = {
    "temporal": {"match_weight": 0.3, "recency_weight": 0.2},
    "entity": {"match_weight": 0.3},
    "factual": {},
    "default": {},
}
"""Built-in actions; a settings entry for an intent is merged over its default."""


class IntentConfig(ComponentConfig):
    """``intent``: route the query to per-intent scoring (temporal, entity, factual, default)."""

    kind: str = "intent"
    intents: dict[str, IntentAction] = Field(
        default_factory=lambda: {k: IntentAction(**v) for k, v in DEFAULT_ACTIONS.items()},
        description="Intent -> {match_weight, recency_weight}, merged over the defaults.",
    )
    normalize: Literal["minmax", "none"] = Field("minmax", description="Base score: min-max normalised within the list, or as is.")
    time_field: str | None = Field(None, description="Metadata field holding the record's time (a number, or an ISO-8601 string).")
    half_life: float = Field(86400.0, gt=0.0, description="Age at which the recency signal halves, in the field's units (seconds for ISO strings).")
    reference: Literal["newest", "now"] = Field("newest", description="Ages are measured from the newest candidate, or from the wall clock.")
    name: str | None = Field(None, description="Name of the stage (the re-scored hits' source); default intent.")

    @field_validator("intents", mode="before")
    @classmethod
    def _merge_defaults(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        unknown = sorted(set(value) - set(INTENTS))
        if unknown:
            raise ValueError(f"unknown intent(s) {unknown}; intents: {list(INTENTS)}")
        out: dict[str, Any] = {}
        for intent in INTENTS:
            given = value.get(intent, {})
            if isinstance(given, IntentAction):
                given = given.model_dump()
            out[intent] = {**DEFAULT_ACTIONS[intent], **given} if isinstance(given, Mapping) else given
        return out


class _ForcedIntent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["temporal", "entity", "factual", "default"]


def _forced(extras: Mapping[str, Any] | None) -> str | None:
    raw = (extras or {}).get(INTENT_KEY)
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, Mapping):
        raise ValidationError(f'Query.extras["{INTENT_KEY}"] must be an intent name or {{"name": ...}}, got {type(raw).__name__}')
    try:
        return _ForcedIntent.model_validate(dict(raw)).name
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "name"
        raise ValidationError(f'Query.extras["{INTENT_KEY}"].{where}: {first["msg"]}; intents: {list(INTENTS)}') from None


class IntentStage(Stage):
    """Classify the query and apply its intent's :class:`IntentAction` (see the module doc)."""

    def __init__(self, config: IntentConfig | None = None):
        self.config = config or IntentConfig()
        self.name = self.config.name or "intent"

    def intent(self, ctx: PipelineContext) -> QueryIntent:
        """The query's intent: forced by ``Query.extras["intent"]``, else by the rules."""
        found = classify(ctx.query.text)
        forced = _forced(ctx.query.extras)
        if forced is None or forced == found.name:
            return found
        if forced == "entity":
            terms = tuple(tuple(e.lower().split()) for e in found.entities)
        elif forced == "temporal":
            terms = tuple(tuple(t.split()) for t in found.times)
        else:
            terms = tuple((t,) for t in found.content)
        return QueryIntent(forced, terms, found.times, found.entities, found.question, found.content)

    def scores(self, ctx: PipelineContext, hits: list[Hit], intent: QueryIntent, action: IntentAction) -> np.ndarray:
        """The new score of each hit under ``action``."""
        c = self.config
        base = np.asarray([float(h.score) for h in hits], dtype=np.float64)
        total = minmax(base) if c.normalize == "minmax" else base.copy()
        ids = [h.id for h in hits]
        if action.match_weight > 0 and intent.terms:
            texts = token_sets(ctx.texts(ids))
            total += action.match_weight * phrase_fraction(intent.terms, texts)
        if action.recency_weight > 0 and c.time_field:
            records = ctx.records(ids)
            mode = RecencyMode.from_extras(ctx.query.extras)
            times = np.asarray([parse_time(r.metadata.get(c.time_field)) if r is not None else np.nan for r in records])
            total += action.recency_weight * recency_decay(times, c.half_life, reference_time(times, c.reference, mode))
        return total

    def run(self, ctx: PipelineContext) -> None:
        """Record the intent in ``ctx.query.extras`` and re-score the working list."""
        intent = self.intent(ctx)
        ctx.query = ctx.query.evolve(extras={**ctx.query.extras, INTENT_KEY: intent.as_dict()})
        action = self.config.intents[intent.name]
        hits = unique_hits(ctx.current)
        uses_recency = action.recency_weight > 0 and self.config.time_field
        if not hits or not (action.match_weight > 0 and intent.terms) and not uses_recency:
            ctx.current = hits
            return
        ctx.current = rescored(hits, self.scores(ctx, hits, intent, action), self.name)
