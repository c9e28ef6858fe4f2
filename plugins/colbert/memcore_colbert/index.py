"""The in-process ``colbert`` index: a memcore :class:`~memcore.plugin.Index` over :class:`.engine.Engine`.

It requires the record text (``Requirements(text=True)``) and encodes token vectors with
its own token embedder: token-level spaces live inside the index that uses them. Scores
are MaxSim divided by the number of query tokens (the mean best cosine, in [-1, 1]);
``Hit.raw`` is ColBERT's MaxSim sum.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Collection as AbstractSet, Sequence

import numpy as np

from memcore.plugin import AllowedIds, Hit, IndexContext, Query, Record, Requirements, validate_k

from . import storage
from .text_index import ColbertTextIndex
from .config import ColbertIndexConfig, resolve_params
from .encoder import TokenEncoder
from .engine import Engine

__all__ = ["ColbertIndex"]


class ColbertIndex(ColbertTextIndex):
    """ColBERTv2-style late interaction (compressed residuals, PLAID search) in process."""

    label = "colbert"
    score_name = "MaxSim / query tokens"
    score_range = (-1.0, 1.0)
    format_version = storage.FORMAT_VERSION
    readable_versions = storage.READABLE_VERSIONS
    requires = Requirements(text=True)

    def __init__(self, config: ColbertIndexConfig, context: IndexContext):
        super().__init__(config, context)
        self.config = config
        self.encoder = TokenEncoder(config.embedder, config.doc_maxlen, config.query_maxlen, f"indexes.{context.name}.embedder")
        self.engine = Engine(config, self.encoder.dim, context.name)

    def __len__(self) -> int:
        return len(self.engine)

    # -- validation --------------------------------------------------------------------

    # -- writing -----------------------------------------------------------------------

    def add(self, records: Sequence[Record]) -> None:
        if not records:
            return
        self.validate(records)
        latest = {r.id: r.text for r in records}
        self.engine.add(list(latest), self.encoder.documents(list(latest.values())))

    def remove(self, ids: Sequence[str]) -> None:
        self.engine.delete(list(ids))

    # -- reading -----------------------------------------------------------------------

    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        return self.search_batch([query], k, allowed)[0]

    def search_batch(self, queries: Sequence[Query], k: int, allowed: AbstractSet[str] | None = None) -> list[list[Hit]]:
        k = validate_k(k)
        if not queries:
            return []
        for query in queries:
            self.validate_query(query)
        if len(self.engine) == 0 or (allowed is not None and not allowed):
            return [[] for _ in queries]
        mask = self._allowed_mask(allowed)
        tokens = self.encoder.queries([self._text(q) for q in queries])
        out = []
        for query, q in zip(queries, tokens):
            params = resolve_params(self.config, k, self._mode(query))
            slots, scores = self.engine.search(q, k, params, mask)
            n = float(len(q))
            pids = self.engine.pids
            out.append([Hit(pids[s], float(r) / n, float(r), self.name) for s, r in zip(slots.tolist(), scores.tolist())])
        return out

    def _allowed_mask(self, allowed: AbstractSet[str] | None) -> np.ndarray | None:
        """The slot mask of ``allowed`` (memoised on an AllowedIds while the engine is unchanged)."""
        if allowed is None:
            return None
        if isinstance(allowed, AllowedIds):
            return allowed.memo(self.engine, "colbert.mask", self.engine.version, lambda: self.engine.allowed_mask(allowed))
        return self.engine.allowed_mask(allowed)

    # -- persistence -------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        """Write the index; tombstoned passages are compacted away first, so the files keep
        no id or token row of a deleted passage (forgetting is complete on disk)."""
        self.engine.compact()
        storage.save_engine(self.engine, Path(directory), self.encoder.model_id)

    def load(self, directory: Path) -> None:
        storage.load_engine(self.engine, Path(directory), self.encoder.model_id)

    def compact(self) -> None:
        """Drop tombstoned passages now."""
        self.engine.compact()

    def stats(self) -> dict[str, Any]:
        e = self.engine
        return {
            "size": len(e),
            "embedder": self.encoder.model_id,
            "dim": e.dim,
            "nbits": self.config.nbits,
            "compressed": e.compressed,
            "train_pending": e.train_pending,
            "residual_transform": e.codec.transform if e.codec is not None else None,
            "centroids": 0 if e.centroids is None else len(e.centroids),
            "tombstones": int((~e.alive).sum()),
            "avg_doclen": float(np.mean(e.doclens)) if len(e.doclens) else 0.0,
            **e.nbytes(),
        }
