"""Ranking metrics as BEIR computes them with pytrec_eval, dependency-free.

A *run* maps each query id to ``{doc id: score}``; *qrels* map each query id to
``{doc id: graded relevance}``. A run is ranked by score, higher first, ties broken by doc
id (ascending, docs/architecture.md §9; trec_eval breaks ties by descending doc id, which only matters
for exactly equal scores).

- ``ndcg@k``: DCG = sum over the first k ranks of ``gain / log2(rank + 1)`` with ``gain`` the
  graded relevance (``max(rel, 0)``), divided by the DCG of the ideal ranking of every
  judged document; 0 when nothing is relevant.
- ``recall@k``: relevant documents (rel > 0) among the first k, over all relevant documents.
- ``mrr@k``: ``1 / rank`` of the first relevant document within the first k, else 0.

Queries are averaged with equal weight; a query with qrels but no run entry counts 0.
"""

from __future__ import annotations

import math
from typing import Mapping

__all__ = ["ranked_ids", "ndcg_at_k", "recall_at_k", "mrr_at_k", "evaluate_run"]

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]


def ranked_ids(scores: Mapping[str, float]) -> list[str]:
    """Doc ids by score, higher first, ties broken by id (ascending)."""
    return sorted(scores, key=lambda doc: (-float(scores[doc]), doc))


def ndcg_at_k(ranking: list[str], qrels: Mapping[str, int], k: int) -> float:
    """nDCG@k of one ranked list against one query's graded qrels."""
    dcg = sum(max(qrels.get(doc, 0), 0) / math.log2(rank + 1) for rank, doc in enumerate(ranking[:k], start=1))
    ideal_gains = sorted((max(rel, 0) for rel in qrels.values()), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ideal_gains, start=1))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranking: list[str], qrels: Mapping[str, int], k: int) -> float:
    """Share of the relevant (rel > 0) documents found in the first k."""
    relevant = {doc for doc, rel in qrels.items() if rel > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def mrr_at_k(ranking: list[str], qrels: Mapping[str, int], k: int) -> float:
    """Reciprocal rank of the first relevant document within the first k (0 if none)."""
    for rank, doc in enumerate(ranking[:k], start=1):
        if qrels.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def evaluate_run(run: Run, qrels: Qrels, *, k: int = 10, recall_k: int = 100) -> dict[str, float]:
    """Mean ``ndcg@k``, ``recall@recall_k`` and ``mrr@k`` over the queries of ``qrels`` that
    have a relevant document (rel > 0), plus their number as ``queries``."""
    judged = [q for q, rels in qrels.items() if any(rel > 0 for rel in rels.values())]
    totals = {f"ndcg@{k}": 0.0, f"recall@{recall_k}": 0.0, f"mrr@{k}": 0.0}
    for qid in judged:
        ranking = ranked_ids(run.get(qid, {}))
        totals[f"ndcg@{k}"] += ndcg_at_k(ranking, qrels[qid], k)
        totals[f"recall@{recall_k}"] += recall_at_k(ranking, qrels[qid], recall_k)
        totals[f"mrr@{k}"] += mrr_at_k(ranking, qrels[qid], k)
    n = len(judged)
    out: dict[str, float] = {name: (value / n if n else 0.0) for name, value in totals.items()}
    out["queries"] = n
    return out
