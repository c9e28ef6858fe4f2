"""The run behind ``memcore eval beir``: ingest a BEIR corpus into a memory, query it through
the memory's declared pipeline (``Memory.query``), score the run.

Only the query phase is timed for ``qps`` (the calls to ``Memory.query``; ingest, loading
and scoring are excluded).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import DuplicateIdError
from ..model._record import Record
from .beir import BeirData, corpus_records
from .metrics import evaluate_run

if TYPE_CHECKING:
    from ..api._open import Memory

__all__ = ["BeirReport", "ingest_corpus", "run_queries", "run_beir"]

Progress = Callable[[int], None]


@dataclass
class BeirReport:
    """The outcome of :func:`run_beir`: the metrics, the number of queries, queries/second
    of the query phase, and bookkeeping (documents inserted/already stored/skipped, seconds)."""

    metrics: dict[str, float]
    queries: int
    qps: float
    inserted: int
    existing: int
    skipped: int
    ingest_seconds: float
    query_seconds: float

    def summary(self) -> dict[str, Any]:
        """The metrics, ``queries`` and ``qps`` (the ``--json`` output of ``memcore eval beir``)."""
        return {**self.metrics, "queries": self.queries, "qps": self.qps}


def ingest_corpus(memory: "Memory", records: Sequence[Record], *, batch_size: int = 256, progress: Progress | None = None) -> tuple[int, int]:
    """Insert the records that the collection does not hold yet (in atomic batches through
    ``Collection.insert``); returns ``(inserted, already stored)``.

    A stored record with the same id but other content is refused before anything is
    inserted (:class:`DuplicateIdError`), so a collection directory can be reused; stored
    records missing from an index (one a later settings file added) are added to it with
    ``Collection.insert_to_index``, so a BM25 index can join an already embedded corpus.
    """
    collection = memory.collection
    stored = {r.id: r for r in collection.get_many([r.id for r in records]) if r is not None}
    clashes = [r.id for r in records if r.id in stored and not r.same_content(stored[r.id])]
    if clashes:
        raise DuplicateIdError(f"{len(clashes)} corpus document(s) reuse ids stored with other content (e.g. {clashes[:3]}); use another --path")
    todo = [r for r in records if r.id not in stored]
    if stored:
        for entry in collection.list_indexes():
            held = set(collection.ids(index=entry["name"]))
            missing = [r.id for r in records if r.id in stored and r.id not in held]
            for start in range(0, len(missing), batch_size):
                collection.insert_to_index(entry["name"], missing[start : start + batch_size])
        if progress is not None:
            progress(len(stored))
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        collection.insert(list(batch))
        if progress is not None:
            progress(len(batch))
    return len(todo), len(stored)


def run_queries(
    memory: "Memory", queries: Sequence[tuple[str, str]], depth: int, *, progress: Progress | None = None
) -> tuple[dict[str, dict[str, float]], float]:
    """``Memory.query(text, k=depth)`` for each ``(id, text)``; returns the run
    (query id -> doc id -> score) and the seconds spent inside the queries."""
    run: dict[str, dict[str, float]] = {}
    spent = 0.0
    for qid, text in queries:
        started = time.perf_counter()
        hits = memory.query(text, k=depth)
        spent += time.perf_counter() - started
        run[qid] = {h.id: float(h.score) for h in hits}
        if progress is not None:
            progress(1)
    return run, spent


def run_beir(
    memory: "Memory",
    data: BeirData,
    *,
    k: int = 10,
    limit_queries: int | None = None,
    batch_size: int = 256,
    ingest_progress: Callable[[int], Progress] | None = None,
    query_progress: Callable[[int], Progress] | None = None,
) -> BeirReport:
    """Ingest ``data``'s corpus, run its judged queries (the first ``limit_queries``) with
    depth ``max(100, k)`` and score them: ``ndcg@k``, ``recall@100``, ``mrr@k``.

    ``ingest_progress(total)`` / ``query_progress(total)`` return a callback that receives
    increments (the CLI draws progress bars with them).
    """
    records, skipped = corpus_records(data)
    started = time.perf_counter()
    inserted, existing = ingest_corpus(memory, records, batch_size=batch_size, progress=ingest_progress(len(records)) if ingest_progress else None)
    ingest_seconds = time.perf_counter() - started
    queries = data.judged_queries()
    if limit_queries is not None:
        queries = queries[:limit_queries]
    depth = max(100, k)
    run, spent = run_queries(memory, queries, depth, progress=query_progress(len(queries)) if query_progress else None)
    qrels = {qid: data.qrels[qid] for qid, _ in queries}
    metrics = evaluate_run(run, qrels, k=k, recall_k=100)
    n = int(metrics.pop("queries"))
    return BeirReport(
        metrics=metrics,
        queries=n,
        qps=(n / spent) if spent > 0 else 0.0,
        inserted=inserted,
        existing=existing,
        skipped=skipped,
        ingest_seconds=ingest_seconds,
        query_seconds=spent,
    )
