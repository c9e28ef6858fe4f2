#!/usr/bin/env python
"""What the presets' final scores say about relevance: distributions and a threshold.

Every preset ends with the ``relevance`` stage: the final score is the query-hit cosine
similarity in the dense space (MiniLM here), smoothed to fall with the rank, comparable
across queries; the per-query rescaled score of the stages before it stays in the hit's
provenance (list ``rescaled``). This script measures, per preset (``basic``, ``advanced``,
``semantic``) at depth ``--k`` (10):

- **SciFact** (BEIR, train split; corpus and queries as the precomputed all-MiniLM-L6-v2
  vectors of ``../shared/data/scifact/minilm``, the packaged model's, so no corpus is
  embedded): ``--scifact-queries`` judged queries drawn at random (seed ``--seed``) from
  the 809; a hit is *relevant* when the qrels judge it so. Also ``--offtopic`` LoCoMo
  questions (embedded live with MiniLM) asked of the SciFact corpus: queries with nothing
  relevant in the corpus at all.
- **LoCoMo** dev (``../shared/data/locomo/locomo_dev.json``, 3 conversations, each in its own
  in-memory memory, turns ``"speaker: text"`` embedded live with MiniLM): a hit is
  relevant when it is an evidence turn of an answerable question (categories 1-4); the top
  hits of *adversarial* questions (category 5: the answer is not in the conversation) are
  compared with those of answerable ones.

Reported: quantiles of the final score of relevant vs irrelevant hits, of the top hit of
answerable vs adversarial / off-topic queries (and, for contrast, of the rescaled score the
presets reported before); for each threshold of ``--thresholds``, the recommended one (per
preset, the highest that keeps 95% of SciFact's relevant hits) and the strict one (best F1
of SciFact's relevant-hit detection): precision and recall of the relevant hits kept
(``min_score``), and per kind of query the share left with no hit at all.

    MEMCORE_SHARED=/path/to/shared python bench/bench_scores.py              # ~3-5 min on 2 cores
    python bench/bench_scores.py --quick                                    # 100 SciFact queries, 1 conversation

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import copy
import random
from typing import Any, Iterable, Sequence

import numpy as np
from _common import SHARED, emit, finish_environment, header, log, pct, use_checkout

use_checkout("fifo-kv", "bm25", "embed", "rrf", "mmr")

import memcore  # noqa: E402
from memcore import Pipeline, Query  # noqa: E402
from memcore._plugins._host import get_registry  # noqa: E402
from memcore.eval import locomo  # noqa: E402

from _scifact import hybrid_memory  # noqa: E402

PRESETS = ("basic", "advanced", "semantic")
LOCOMO = SHARED / "data" / "locomo" / "locomo_dev.json"
SETTINGS: dict[str, Any] = {
    "store": {"kind": "memory"},
    "spaces": {"default": {"embedder": {"kind": "minilm", "batch_size": 64}}},
    "indexes": {
        "vector": {"kind": "exact", "space": "default", "metric": "cosine"},
        "bm25": {"kind": "bm25", "k1": 1.2, "b": 0.75, "stopwords": "en", "stemmer": "english"},
    },
}
"""One LoCoMo conversation's memory (the recipe of bench_locomo_retrieval.py)."""

KEEP = 0.95
"""The share of SciFact's relevant hits the recommended threshold keeps."""

Sample = dict[str, list[Any]]
"""Per preset: ``hits`` (final score, rescaled score, relevant, rank) and ``queries``
(label, final scores of the hits, their relevance, number of relevant hits)."""


def pipelines(collection: Any) -> dict[str, Pipeline]:
    """Each preset, built and checked on ``collection``."""
    out = {}
    for name in PRESETS:
        pipeline = Pipeline.from_config(name, get_registry())
        pipeline.check(collection)
        out[name] = pipeline
    return out


def rescaled(hit: Any) -> float:
    """The score the hit had before the relevance stage (its contribution to ``rescaled``)."""
    return next(c.score for c in hit.provenance if c.source == "rescaled")


def record(sample: Sample, hits: Sequence[Any], label: str, relevant: set[str] | None, wanted: int) -> None:
    """Add one query's hits (``relevant``: the ids judged relevant; None: not judged)."""
    flags = [h.id in relevant if relevant is not None else None for h in hits]
    for rank, (hit, flag) in enumerate(zip(hits, flags), start=1):
        sample["hits"].append((float(hit.score), rescaled(hit), flag, rank))
    sample["queries"].append((label, [float(h.score) for h in hits], [rescaled(h) for h in hits], flags, wanted))


def new_samples() -> dict[str, Sample]:
    return {name: {"hits": [], "queries": []} for name in PRESETS}


def quantiles(values: Sequence[float]) -> dict[str, Any]:
    """n, mean and the 10/25/50/75/90th percentiles."""
    if not values:
        return {"n": 0}
    return {"n": len(values), "mean": round(float(np.mean(values)), 3), **{f"p{q}": round(pct(values, q), 3) for q in (10, 25, 50, 75, 90)}}


def at_threshold(sample: Sample, t: float) -> dict[str, Any]:
    """What ``min_score = t`` keeps: precision / recall of the relevant hits (judged
    queries), and per query label the share of queries left with no hit."""
    judged = [h for h in sample["hits"] if h[2] is not None]
    kept = [h for h in judged if h[0] >= t]
    relevant = sum(1 for h in judged if h[2])
    hit_rel = sum(1 for h in kept if h[2])
    out: dict[str, Any] = {
        "threshold": round(t, 3),
        "precision": round(hit_rel / len(kept), 3) if kept else None,
        "recall": round(hit_rel / relevant, 3) if relevant else None,
        "hits_kept": round(len(kept) / len(judged), 3) if judged else None,
    }
    for label in sorted({q[0] for q in sample["queries"]}):
        rows = [q for q in sample["queries"] if q[0] == label]
        out[f"{label}_left_empty"] = round(sum(1 for q in rows if not any(s >= t for s in q[1])) / len(rows), 3)
    return out


GRID = [round(float(t), 2) for t in np.arange(0.0, 1.0, 0.01)]


def recommended_threshold(sample: Sample, keep: float = KEEP) -> float:
    """The highest threshold (grid of 0.01) that keeps at least ``keep`` of the relevant
    hits: what drops "nothing relevant" without losing what is relevant."""
    ok = [t for t in GRID if (at_threshold(sample, t)["recall"] or 0.0) >= keep]
    return max(ok) if ok else 0.0


def f1_threshold(sample: Sample) -> float:
    """The threshold of best F1 for keeping the relevant hits (grid of 0.01): a strict cut."""
    best, best_f1 = 0.0, -1.0
    for t in GRID:
        m = at_threshold(sample, t)
        p, r = m["precision"], m["recall"]
        f1 = 2 * p * r / (p + r) if p and r else 0.0
        if f1 > best_f1:
            best, best_f1 = t, f1
    return best


def summary(sample: Sample, thresholds: Iterable[float], recommended: float, strict: float) -> dict[str, Any]:
    """Distributions and threshold figures of one preset on one data set."""
    hits = sample["hits"]
    out: dict[str, Any] = {
        "relevant_hits": quantiles([h[0] for h in hits if h[2] is True]),
        "irrelevant_hits": quantiles([h[0] for h in hits if h[2] is False]),
        "top_hit": {label: quantiles([q[1][0] for q in sample["queries"] if q[0] == label and q[1]]) for label in sorted({q[0] for q in sample["queries"]})},
        "top_hit_rescaled": {
            label: quantiles([q[2][0] for q in sample["queries"] if q[0] == label and q[2]]) for label in sorted({q[0] for q in sample["queries"]})
        },
        "thresholds": [at_threshold(sample, t) for t in thresholds],
        "recommended": at_threshold(sample, recommended),
        "strict": at_threshold(sample, strict),
    }
    return out


# -- the data sets ----------------------------------------------------------------------------


def run_locomo(args: argparse.Namespace, samples: dict[str, Sample]) -> tuple[list[str], Any]:
    """Every question of the dev conversations through each preset; returns the questions'
    texts (the off-topic queries of SciFact) and the space that embeds them."""
    conversations = locomo.load_locomo(LOCOMO)[: args.conversations]
    texts: list[str] = []
    space = None
    for conv in conversations:
        memory = memcore.open(copy.deepcopy(SETTINGS))
        ids = [f"{conv.sample_id}:{t.dia_id}" for t in conv.turns]
        memory.collection.insert([{"id": rid, "text": f"{t.speaker}: {t.text}"} for rid, t in zip(ids, conv.turns)])
        space = memory.collection.spaces["default"]
        qvecs = space.embed_queries([q.text for q in conv.questions])
        log(f"locomo {conv.sample_id}: {len(ids)} turns, {len(conv.questions)} questions embedded")
        built = pipelines(memory.collection)
        for q, vec in zip(conv.questions, qvecs):
            adversarial = q.category == 5
            evidence = {f"{conv.sample_id}:{e}" for e in q.evidence}
            for name, pipeline in built.items():
                hits = pipeline.run(memory.collection, Query(text=q.text, vectors={"default": vec}, k=args.k), with_records=False)
                relevant = None if adversarial or not evidence else evidence
                record(samples[name], hits, "adversarial" if adversarial else "answerable", relevant, len(evidence))
        texts += [q.text for q in conv.questions if q.category != 5]
        memory.close()
    return texts, space


def run_scifact(args: argparse.Namespace, samples: dict[str, Sample], offtopic: list[str], space: Any) -> None:
    """The sampled judged queries (and the off-topic ones) through each preset."""
    memory, queries, qrels = hybrid_memory("train", pipeline="basic")
    chosen = random.Random(args.seed).sample(queries, min(args.scifact_queries, len(queries)))
    built = pipelines(memory.collection)
    log(f"scifact: {memory.collection.count()} documents, {len(chosen)} of {len(queries)} judged queries")
    for qid, text, vec in chosen:
        relevant = {d for d, grade in qrels[qid].items() if grade > 0}
        for name, pipeline in built.items():
            hits = pipeline.run(memory.collection, Query(text=text, vectors={"default": vec}, k=args.k), with_records=False)
            record(samples[name], hits, "answerable", relevant, len(relevant))
    if offtopic and space is not None:
        picked = random.Random(args.seed).sample(offtopic, min(args.offtopic, len(offtopic)))
        vectors = space.embed_queries(picked)
        for text, vec in zip(picked, vectors):
            for name, pipeline in built.items():
                hits = pipeline.run(memory.collection, Query(text=text, vectors={"default": np.asarray(vec, dtype=np.float32)}, k=args.k), with_records=False)
                record(samples[name], hits, "offtopic", None, 0)
    memory.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=10, help="Retrieval depth (hits per query).")
    parser.add_argument("--scifact-queries", type=int, default=300, help="SciFact judged queries drawn at random (of 809).")
    parser.add_argument("--offtopic", type=int, default=100, help="LoCoMo questions asked of the SciFact corpus.")
    parser.add_argument("--conversations", type=int, default=3, help="LoCoMo dev conversations (of 3).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--thresholds", default="0.3,0.4,0.5", help="Comma-separated thresholds to report.")
    parser.add_argument("--quick", action="store_true", help="100 SciFact queries, 50 off-topic, 1 conversation.")
    args = parser.parse_args()
    if args.quick:
        args.scifact_queries, args.offtopic, args.conversations = 100, 50, 1
    thresholds = [float(t) for t in args.thresholds.split(",") if t.strip()]
    result = header("scores", args, numpy=np.__version__)
    locomo_samples, scifact_samples = new_samples(), new_samples()
    offtopic, space = run_locomo(args, locomo_samples)
    run_scifact(args, scifact_samples, offtopic, space)
    result["presets"] = {}
    for name in PRESETS:
        recommended, strict = recommended_threshold(scifact_samples[name]), f1_threshold(scifact_samples[name])
        result["presets"][name] = {
            "recommended_threshold": recommended,
            "strict_threshold": strict,
            "scifact": summary(scifact_samples[name], thresholds, recommended, strict),
            "locomo": summary(locomo_samples[name], thresholds, recommended, strict),
        }
        log(name, "recommended", recommended, result["presets"][name]["scifact"]["recommended"], result["presets"][name]["locomo"]["recommended"])
    result["environment"] = finish_environment(result["environment"])
    emit(result)


if __name__ == "__main__":
    main()
