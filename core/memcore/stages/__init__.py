"""Builtin rule-based pipeline stages beyond the basics: ``rerank`` and ``intent``.

Small modules, one concern each:

- :mod:`.text`: tokens and stopwords shared by the stages;
- :mod:`.signals`: the scoring signals (min-max normalisation, recency decay, term overlap,
  metadata boosts) and the ``Query.extras["recency"]`` query mode;
- :mod:`.hits`: de-duplicating the working list and emitting re-scored hits;
- :mod:`.rerank`: the ``rerank`` stage (base score + recency + boosts + keyword overlap);
- :mod:`.intent_rules`: the documented rules that classify a query (temporal, entity,
  factual, default);
- :mod:`.intent`: the ``intent`` stage, which applies per-intent scoring settings.

They are registered by :mod:`memcore.default_plugins.stages`.

Helpers for stage authors (plugins use them instead of writing their own):
:func:`unique_hits` (drop repeated ids from the working list), :func:`rescored` (emit
re-scored hits that keep their provenance), :func:`minmax` (scores to [0, 1] within the
list) and :func:`tokenize` (lowercase ``\\w+`` tokens).
"""

from __future__ import annotations

from .hits import rescored, unique_hits
from .intent import IntentAction, IntentConfig, IntentStage
from .intent_rules import INTENTS, QueryIntent, classify
from .rerank import Boost, RerankConfig, RerankStage
from .signals import minmax
from .text import tokenize

__all__ = [
    "Boost",
    "RerankConfig",
    "RerankStage",
    "IntentAction",
    "IntentConfig",
    "IntentStage",
    "INTENTS",
    "QueryIntent",
    "classify",
    "unique_hits",
    "rescored",
    "minmax",
    "tokenize",
]
