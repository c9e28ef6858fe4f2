#!/usr/bin/env python
"""The framework adapters on BEIR SciFact: their overhead over calling memcore directly, and
a LangChain RAG chain on MemcoreRetriever (hybrid) vs the same chain on LangChain's own
InMemoryVectorStore.

The corpus (5,183 abstracts) goes into a hybrid memory (``exact`` cosine ``vector`` index
with the precomputed all-MiniLM-L6-v2 vectors of ``../shared/data/scifact/minilm`` + a
``bm25`` index; see ``_scifact.py``).

1. **Overhead**, per query, the same query vectors, interleaved in rounds: LangChain
   ``MemcoreVectorStore.similarity_search_by_vector`` and LlamaIndex
   ``MemcoreVectorStore.query`` against ``Collection.retrieve`` on the same index
   (memcore direct); LangChain ``MemcoreRetriever.invoke`` and LlamaIndex
   ``MemcoreRetriever.retrieve`` against ``Memory.query`` (the ``advanced`` pipeline; the
   query text is embedded by MiniLM in both). Medians; ratio = adapter / direct.
2. **A RAG chain** ``{"context": retriever, "question": passthrough}`` (LCEL) on every judged
   train query: with ``MemcoreRetriever`` over the hybrid memory vs ``InMemoryVectorStore``
   (LangChain's, the same MiniLM vectors for documents, the same live MiniLM query
   embedding) ``.as_retriever()``: nDCG@10 of the context documents and queries/s.

    python bench/bench_adapters.py --quick     # 200 queries
    python bench/bench_adapters.py             # all 809 train queries

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

from _common import emit, finish_environment, header, log, use_checkout

use_checkout("fifo-kv", "bm25", "langchain", "llamaindex", "mmr", "rrf")

from _scifact import hybrid_memory  # noqa: E402

from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.runnables import RunnableParallel, RunnablePassthrough  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402
from llama_index.core.schema import QueryBundle  # noqa: E402
from llama_index.core.vector_stores.types import VectorStoreQuery  # noqa: E402

import memcore_langchain  # noqa: E402
import memcore_llamaindex  # noqa: E402
from memcore.eval import ndcg_at_k  # noqa: E402
from memcore_langchain import MemcoreEmbeddings  # noqa: E402

K = 10


class CorpusVectors(Embeddings):
    """Documents: the precomputed MiniLM vectors (looked up by text); queries: live MiniLM."""

    def __init__(self, by_text: dict[str, np.ndarray], live: Embeddings):
        self.by_text, self.live = by_text, live

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.by_text[t].tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.live.embed_query(text)


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def overhead(memory: Any, queries: list[tuple[str, str, np.ndarray]], rounds: int) -> dict[str, Any]:
    """Median per-query latency of each adapter and of memcore direct, interleaved."""
    lc_store = memcore_langchain.MemcoreVectorStore(memory=memory, index="vector")
    li_store = memcore_llamaindex.MemcoreVectorStore(memory=memory, index="vector")
    lc_retriever = memcore_langchain.MemcoreRetriever(memory=memory, k=K)
    li_retriever = memcore_llamaindex.MemcoreRetriever(memory, k=K)
    calls = {
        "direct_vector": lambda q: memory.collection.retrieve({"vectors": {"default": q[2]}}, index="vector", k=K),
        "langchain_vectorstore": lambda q: lc_store.similarity_search_by_vector(q[2].tolist(), k=K),
        "llamaindex_vectorstore": lambda q: li_store.query(VectorStoreQuery(query_embedding=q[2].tolist(), similarity_top_k=K)),
        "direct_pipeline": lambda q: memory.query(q[1], k=K),
        "langchain_retriever": lambda q: lc_retriever.invoke(q[1]),
        "llamaindex_retriever": lambda q: li_retriever.retrieve(QueryBundle(q[1])),
    }
    samples: dict[str, list[float]] = {name: [] for name in calls}
    clock = time.perf_counter
    for r in range(rounds):
        for q in queries:
            for name, call in calls.items():  # interleaved: load changes hit every variant alike
                started = clock()
                call(q)
                samples[name].append(clock() - started)
        log(f"overhead round {r + 1}/{rounds}")
    medians = {name: _median_ms(s) for name, s in samples.items()}
    return {
        "median_ms": medians,
        "ratio": {
            "langchain_vectorstore": round(medians["langchain_vectorstore"] / medians["direct_vector"], 3),
            "llamaindex_vectorstore": round(medians["llamaindex_vectorstore"] / medians["direct_vector"], 3),
            "langchain_retriever": round(medians["langchain_retriever"] / medians["direct_pipeline"], 3),
            "llamaindex_retriever": round(medians["llamaindex_retriever"] / medians["direct_pipeline"], 3),
        },
    }


def rag_chains(memory: Any, queries: list[tuple[str, str, np.ndarray]], qrels: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The same LCEL chain on MemcoreRetriever (hybrid) and on InMemoryVectorStore."""
    live = MemcoreEmbeddings(memory.collection.spaces["default"].embedder)
    records = memory.collection.get_many(memory.collection.ids())
    by_text = {r.text: r.vectors["default"] for r in records if r is not None}
    reference = InMemoryVectorStore(embedding=CorpusVectors(by_text, live))
    started = time.perf_counter()
    reference.add_documents([Document(page_content=r.text, id=r.id) for r in records if r is not None])
    log(f"InMemoryVectorStore filled in {time.perf_counter() - started:.1f}s")
    retrievers = {
        "memcore_hybrid": memcore_langchain.MemcoreRetriever(memory=memory, k=K),
        "langchain_inmemory": reference.as_retriever(search_kwargs={"k": K}),
    }
    out: dict[str, Any] = {}
    for name, retriever in retrievers.items():
        chain = RunnableParallel(context=retriever, question=RunnablePassthrough())
        ndcg, started = 0.0, time.perf_counter()
        for qid, text, _ in queries:
            ranking = [d.id for d in chain.invoke(text)["context"] if d.id is not None]
            ndcg += ndcg_at_k(ranking, qrels[qid], K)
        seconds = time.perf_counter() - started
        out[name] = {"ndcg@10": round(ndcg / len(queries), 4), "queries_per_s": round(len(queries) / seconds, 1)}
        log(f"{name}: {out[name]}")
    out["ndcg_delta"] = round(out["memcore_hybrid"]["ndcg@10"] - out["langchain_inmemory"]["ndcg@10"], 4)
    out["qps_ratio"] = round(out["memcore_hybrid"]["queries_per_s"] / out["langchain_inmemory"]["queries_per_s"], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200 queries, 1 overhead round")
    parser.add_argument("--queries", type=int, default=None, help="how many judged train queries (default: all, 200 with --quick)")
    parser.add_argument("--rounds", type=int, default=None, help="overhead rounds over the queries (default 3, 1 with --quick)")
    args = parser.parse_args()
    result = header("bench_adapters", args)
    log("loading SciFact into a hybrid memory (precomputed MiniLM vectors; MiniLM embeds the queries)")
    memory, queries, qrels = hybrid_memory("train", live=True)
    n = args.queries or (200 if args.quick else len(queries))
    queries = queries[:n]
    memory.query(queries[0][1], k=K)  # warm: the model loads on first use
    result["queries"] = len(queries)
    result["overhead"] = overhead(memory, queries, args.rounds or (1 if args.quick else 3))
    result["rag_chain"] = rag_chains(memory, queries, qrels)
    memory.close()
    result["environment"] = finish_environment(result["environment"])
    emit(result)


if __name__ == "__main__":
    main()
