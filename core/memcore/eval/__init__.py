"""Evaluation of retrievers: BEIR loading (:mod:`.beir`), IR metrics (:mod:`.metrics`) and
the ingest-then-query run behind ``memcore eval beir`` (:mod:`.run`)."""

from __future__ import annotations

from .beir import BeirData, corpus_records, load_beir
from .metrics import evaluate_run, mrr_at_k, ndcg_at_k, ranked_ids, recall_at_k
from .run import BeirReport, ingest_corpus, run_beir, run_queries

__all__ = [
    "BeirData",
    "load_beir",
    "corpus_records",
    "ndcg_at_k",
    "recall_at_k",
    "mrr_at_k",
    "ranked_ids",
    "evaluate_run",
    "BeirReport",
    "ingest_corpus",
    "run_queries",
    "run_beir",
]
