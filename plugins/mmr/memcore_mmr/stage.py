"""The ``mmr`` pipeline stage: re-select the working list for relevance and diversity."""

from __future__ import annotations

import numpy as np
from memcore.plugin import CollectionReader, ConfigError, Hit, minmax, PipelineContext, Stage, unique_hits, ValidationError

from .config import MMRConfig
from .select import mmr_select
from .similarity import CandidateSimilarity
from .tokens import TokenSets

__all__ = ["MMRStage"]


class MMRStage(Stage):
    """Maximal marginal relevance over the working list (``ctx.current``).

    Candidates are the first ``fetch_k`` hits; ``top_n`` (default: the query's k) are
    selected greedily. Similarities use the stored vectors of ``space`` (one batched read),
    with token Jaccard for records that have no vector there. The output hits, in
    selection order, carry the MMR value at selection as ``score``, the incoming score as
    ``raw``, and keep their provenance.
    """

    def __init__(self, config: MMRConfig | None = None):
        self.config = config or MMRConfig()

    def check(self, collection: CollectionReader) -> None:
        """The space must be declared in the collection."""
        if self.config.space not in collection.spaces:
            raise ConfigError(f"mmr stage: no embedding space {self.config.space!r}; spaces: {sorted(collection.spaces)}", location="pipeline")

    def _relevance(self, ctx: PipelineContext, hits: list[Hit], sim: CandidateSimilarity) -> np.ndarray:
        if self.config.relevance == "score":
            return minmax(np.asarray([float(h.score) for h in hits], dtype=np.float64))
        query_vector = None
        if sim.present.any():
            try:
                query_vector = ctx.query_vector(self.config.space)
            except ValidationError as exc:
                raise ValidationError(f'mmr stage: {exc}; give the query text or a vector, or set relevance = "score"') from None
        elif not (ctx.query.text and ctx.query.text.strip()):
            raise ValidationError(f'mmr stage: no hit has a vector in space {self.config.space!r} and the query has no text; set relevance = "score"')
        return sim.to_query(query_vector, ctx.query.text)

    def run(self, ctx: PipelineContext) -> None:
        """Replace the working list by the MMR selection."""
        self.check(ctx.collection)
        hits = unique_hits(ctx.current)[: self.config.fetch_k]
        if not hits:
            ctx.current = []
            return
        ids = [h.id for h in hits]
        matrix, present = ctx.vectors(ids, self.config.space)
        present = np.asarray(present, dtype=bool)
        tokens = None
        if not present.all():
            tokens = TokenSets(ctx.texts(ids))
        sim = CandidateSimilarity(matrix, present, tokens)
        relevance = self._relevance(ctx, hits, sim)
        picks, values = mmr_select(relevance, sim.column, self.config.top_n or ctx.query.k, self.config.lambda_, floor=self.config.redundancy_floor)
        ctx.current = [
            Hit(hits[i].id, value, raw=float(hits[i].score), source=self.name or "mmr", provenance=hits[i].provenance, record=hits[i].record)
            for i, value in zip(picks, values)
        ]
