"""The ``relevance`` stage: a final score that means the same for every query, order kept.

The scores a pipeline's stages compute are relative to the query: ``rerank`` min-max
rescales its input within the list (the top hit gets 1.0 plus its keyword overlap, however
unrelated the query), RRF scores depend only on ranks. ``relevance`` (the last stage of every
preset) keeps the pipeline's order and replaces each hit's score by an absolute signal:

- ``cosine``: the cosine similarity of the query's vector and the hit's stored vector in a
  dense space (the space of the index named ``vector``, else of the first index that has
  one); a hit without a vector in that space gets 0;
- ``overlap`` (when the collection has no dense space, or the query has no vector there):
  the share of the query's content words found in the hit's text, in [0, 1].

With ``monotone = true`` (the default) the per-hit values are smoothed into the closest
non-increasing sequence along the ranking (isotonic regression, pool-adjacent-violators),
so that the score still falls with the rank (strictly: :func:`strictly_decreasing` lifts
the earlier hits of a run of equal values by a few units in the last place) and a
``min_score`` cut keeps a prefix of the ranking; ``raw`` keeps the hit's own unsmoothed
value. The working list as it came in
(with the per-query rescaled scores) is kept as the list ``rescaled`` (``keep_as``), and
each hit's ``provenance`` gets its contribution there (rank, rescaled score), so
``Hit.explain()`` shows both. ``ctx.notes["relevance"]`` says which
signal was used (and why ``overlap`` when it fell back).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from ..collection._reads import CollectionReader
from ..errors import ConfigError, MemcoreError
from ..model._query import Contribution, Hit
from ..model._text import content_tokens, token_sets
from .._plugins._registry import ComponentConfig
from ._pipeline import PipelineContext, Stage
from ._stages import term_overlap

__all__ = ["RelevanceConfig", "RelevanceStage", "non_increasing", "strictly_decreasing"]


class RelevanceConfig(ComponentConfig):
    """``relevance``: replace each hit's score by an absolute relevance, keeping the order."""

    kind: str = "relevance"
    space: str | None = Field(
        None, description="Dense space of the cosine signal (default: the space of the index named vector, else of the first index with a space)."
    )
    signal: Literal["auto", "cosine", "overlap"] = Field(
        "auto", description="cosine (query-hit cosine in the space), overlap (share of the query's content words in the text), or auto: cosine when possible."
    )
    monotone: bool = Field(True, description="Smooth the values to fall with the rank (isotonic fit), so a min_score cut keeps a prefix.")
    keep_as: str = Field("rescaled", description="Name of the list that keeps the working list as it came in (its scores: the per-query rescaled ones).")
    name: str | None = Field(None, description="Name of the stage (the hits' source); default relevance.")


def non_increasing(values: np.ndarray) -> np.ndarray:
    """The non-increasing sequence closest to ``values`` in least squares (isotonic
    regression by pool-adjacent-violators): each run of values that rises is replaced by its
    mean. Already non-increasing values come back unchanged."""
    values = np.asarray(values, dtype=np.float64)
    if values.size < 2 or bool(np.all(values[1:] <= values[:-1])):  # already in order: nothing to pool
        return values.copy()
    sums: list[float] = []
    counts: list[int] = []
    for v in values.tolist():
        sums.append(v)
        counts.append(1)
        while len(sums) > 1 and sums[-2] / counts[-2] < sums[-1] / counts[-1]:
            s, c = sums.pop(), counts.pop()
            sums[-1] += s
            counts[-1] += c
    return np.repeat(np.asarray([s / c for s, c in zip(sums, counts)]), counts) if sums else np.zeros(0)


def strictly_decreasing(values: np.ndarray) -> np.ndarray:
    """Non-increasing ``values`` made strictly decreasing with the smallest change: from the
    end, a value not above the next one is lifted to the next float above it (a run of equal
    values ends unchanged, its earlier members a few units in the last place higher). A
    caller that sorts hits by score (an evaluation run, a merge of result lists) then gets
    the pipeline's order back, ties included."""
    out = np.asarray(values, dtype=np.float64).copy()
    if out.size < 2 or bool(np.all(out[1:] < out[:-1])):  # no tie: nothing to lift
        return out
    for i in range(len(out) - 2, -1, -1):
        if out[i] <= out[i + 1]:
            out[i] = np.nextafter(out[i + 1], np.inf)
    return out


def _cosines(matrix: np.ndarray, present: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine of each row with ``query``; 0 for rows not present or of zero norm."""
    matrix = np.asarray(matrix, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64).reshape(-1)
    out = np.zeros(matrix.shape[0])
    qn = float(np.linalg.norm(q))
    if qn == 0.0 or matrix.size == 0:
        return out
    norms = np.linalg.norm(matrix, axis=1)
    ok = np.asarray(present, dtype=bool) & (norms > 0)
    out[ok] = (matrix[ok] @ q) / (norms[ok] * qn)
    return out


def _index_cosines(ctx: PipelineContext, hits: list[Hit], space: str) -> np.ndarray | None:
    """The hits' cosines in ``space`` as an index scored them, when each hit is in a list
    of this run that came straight from an index scoring by that exact cosine (the dense
    recall of the presets, whatever stages re-ranked it since); None otherwise (then the
    vectors are read back)."""
    known: dict[str, float] = {}
    spaces: dict[str, str | None] = {}
    for listed in ctx.lists.values():
        for hit in listed:
            source = hit.source
            if source not in spaces:
                spaces[source] = ctx.collection.cosine_space(source) if isinstance(source, str) and source else None
            if spaces[source] == space:
                known.setdefault(hit.id, float(hit.score))
    if not all(hit.id in known for hit in hits):
        return None
    return np.fromiter((known[hit.id] for hit in hits), dtype=np.float64, count=len(hits))


class RelevanceStage(Stage):
    """Re-score the working list with an absolute relevance, keeping its order (see the module)."""

    def __init__(self, config: RelevanceConfig | None = None):
        self.config = config or RelevanceConfig()
        self.name = self.config.name or "relevance"
        self._space: str | None = None
        self._resolved = False

    def check(self, collection: CollectionReader) -> None:
        """Resolve the space of the cosine signal (ConfigError when a named one is not declared)."""
        self._space = self._find_space(collection)
        self._resolved = True

    def _find_space(self, collection: CollectionReader) -> str | None:
        c = self.config
        if c.signal == "overlap":
            return None
        if c.space is not None:
            if c.space not in collection.spaces:
                raise ConfigError(f"relevance stage: no space named {c.space!r}; spaces: {sorted(collection.spaces)}", location="pipeline")
            return c.space
        indexes = [i for i in collection.list_indexes() if i["requires"]["spaces"]]
        indexes.sort(key=lambda i: i["name"] != "vector")  # the presets' dense index first
        space = indexes[0]["requires"]["spaces"][0] if indexes else None
        if space is None and c.signal == "cosine":
            raise ConfigError("relevance stage: signal = 'cosine' needs an index over a dense space; none is declared", location="pipeline")
        return space if space in collection.spaces else None

    def values(self, ctx: PipelineContext, hits: list[Hit]) -> np.ndarray:
        """The absolute relevance of each hit (same order), before smoothing."""
        if not self._resolved:
            self.check(ctx.collection)
        ids = [h.id for h in hits]
        space = self._space
        if space is not None:
            try:
                query_vector = ctx.query_vector(space)
            except MemcoreError as exc:  # a text query the space cannot embed (a caller-given space)
                if self.config.signal == "cosine":
                    raise
                ctx.note(self.name, signal="overlap", space=space, fallback=f"{type(exc).__name__}: {exc}")
            else:
                ctx.note(self.name, signal="cosine", space=space)
                known = _index_cosines(ctx, hits, space)
                if known is not None:
                    return known
                matrix, present = ctx.vectors(ids, space)
                return _cosines(matrix, present, query_vector)
        else:
            ctx.note(self.name, signal="overlap")
        terms = content_tokens(ctx.query.text) if ctx.query.text else set()
        return term_overlap(terms, token_sets(ctx.texts(ids)), "query_fraction")

    def run(self, ctx: PipelineContext) -> None:
        """Replace each hit's score by its relevance; the order and the ids stay as they are."""
        hits = ctx.current
        if not hits:
            return
        raw = self.values(ctx, hits)
        final = strictly_decreasing(non_increasing(raw)) if self.config.monotone else raw
        ctx.add_list(self.config.keep_as, hits, make_current=False)
        out = []
        for rank, (hit, value, score) in enumerate(zip(hits, raw.tolist(), final.tolist()), start=1):
            before = Contribution(self.config.keep_as, rank, float(hit.score))
            out.append(Hit(hit.id, score, value, self.name, (*hit.provenance, before), hit._record))  # a lazily attached record stays lazy
        ctx.current = out
