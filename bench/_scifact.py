"""BEIR SciFact with its precomputed all-MiniLM-L6-v2 vectors, as a hybrid memcore memory.

Shared by the pipeline benches (``bench_presets.py``, ``bench_llm_rerank.py``): the corpus
goes into an in-memory collection with a caller-given 384-d space ``default`` (or the
``minilm`` embedder when ``live``), an ``exact`` cosine index ``vector`` and a ``bm25``
index ``bm25`` (memcore-bm25: k1 1.2, b 0.75, English stopwords and stemmer).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from _common import SHARED

import memcore
from memcore.eval import load_beir

DATA = SHARED / "data" / "scifact"
"""The SciFact folder (BEIR layout + ``minilm/`` vectors) beside the repository."""

Queries = list[tuple[str, str, np.ndarray]]
"""``(query id, text, precomputed MiniLM vector)`` of every judged query."""


def hybrid_memory(split: str, *, live: bool = False, pipeline: Any = "advanced") -> tuple[Any, Queries, dict]:
    """``(memory, judged queries, qrels)`` for ``split``; with ``live`` the space embeds
    text with MiniLM (queries then need no vector)."""
    data = load_beir(DATA, split)
    ids = json.loads((DATA / "minilm" / "corpus_ids.json").read_text())
    vectors = np.load(DATA / "minilm" / "corpus.npy", allow_pickle=False)
    qids = json.loads((DATA / "minilm" / "query_ids.json").read_text())
    qvecs = np.load(DATA / "minilm" / "queries.npy", allow_pickle=False)
    qrow = {q: i for i, q in enumerate(qids)}
    row = {d: i for i, d in enumerate(ids)}
    settings = {
        "store": {"kind": "memory"},
        "spaces": {"default": {"embedder": {"kind": "minilm"}} if live else {"dim": int(vectors.shape[1])}},
        "indexes": {
            "vector": {"kind": "exact", "space": "default", "metric": "cosine"},
            "bm25": {"kind": "bm25", "k1": 1.2, "b": 0.75, "stopwords": "en", "stemmer": "english"},
        },
        "pipeline": pipeline,
    }
    memory = memcore.open(settings)
    docs = [
        {"id": d["_id"], "text": f"{d['title']} {d['text']}".strip(), "metadata": {"title": d["title"]}, "vectors": {"default": vectors[row[d["_id"]]]}}
        for d in data.corpus
    ]
    for start in range(0, len(docs), 1000):
        memory.collection.insert(docs[start : start + 1000])
    queries = [(qid, text, qvecs[qrow[qid]]) for qid, text in data.judged_queries() if qid in qrow]
    return memory, queries, data.qrels
