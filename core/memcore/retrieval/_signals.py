"""Scoring signals of the rule-based stages, vectorised over the candidates with numpy.

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
from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from ..errors import ValidationError

__all__ = [
    "minmax",
    "parse_time",
    "recency_decay",
    "reference_time",
    "term_overlap",
    "phrase_fraction",
    "RecencyMode",
    "RECENCY_KEY",
]

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
