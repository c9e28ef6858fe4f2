#!/usr/bin/env python
"""LoCoMo evidence retrieval: BM25, MiniLM and hybrid fusion variants through memcore pipelines.

Data: ``../shared/data/locomo/locomo_dev.json`` (3 conversations, 1,451 dialog turns, 497
questions; see ``../shared/data/README.md``). Per conversation and record-text recipe, one
in-memory collection (``memcore.open(settings)``, store ``memory``) holds every turn as a
record: id ``<sample_id>:<dia_id>`` (dia_id normalised), text ``"speaker: text"`` (recipe
``caption`` appends ``" [image: <blip_caption>]"`` when the turn shared an image), metadata
``speaker``, ``session``, ``date_time``. Its space ``default`` embeds with MiniLM
(memcore-embed) once, at insert; an ``exact`` cosine index ``vector`` and a ``bm25`` index
``bm25`` (memcore-bm25: k1 1.2, b 0.75, stopwords en, English stemmer) index every turn.
The questions of a conversation are embedded once (batched, through the collection's space)
and retrieve from that conversation only, at depth ``--k`` (50), through
``Pipeline.from_config(spec, registry).run(collection, query, k=...)``.

Metric (LoCoMo paper, docs/architecture.md §9): evidence recall@k = share of a question's evidence
turns among the first k distinct turns retrieved, averaged over the questions that have
evidence. Reported per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial), ``overall`` = categories 1-4 (the headline; adversarial questions ask about
things that were never said, their "evidence" is the turn the question twists) and
``overall_1_5`` with category 5. qps is pipeline time only (query vectors precomputed; the
question embedding rate is reported apart).

Baselines in the same process: raw bm25s (``bm25s.tokenize`` + PyStemmer English, the
reference recipe of the data README) and raw numpy cosine over the same MiniLM vectors,
with qps ratios memcore / raw. After the fixed variants, the ``--depth-top`` best hybrid
variants (overall recall@10) are re-run with recall depth ``over_fetch`` 1 and 3 (shipped: 2).

    python bench/bench_locomo_retrieval.py --quick                 # 1 conversation, 50 questions
    python bench/bench_locomo_retrieval.py --variants all          # everything (~2-4 min on 2 cores)
    python bench/bench_locomo_retrieval.py --variants bm25,dense,rrf10 --text caption

Prints ONE JSON object on stdout (progress and a ranking by overall recall@10 on stderr).
Never run as a test.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _common import SHARED, emit, finish_environment, header, log, package_version, use_checkout

use_checkout("fifo-kv", "embed", "rrf")

import memcore  # noqa: E402
from memcore.eval import locomo  # noqa: E402
from memcore.retrieval._pipeline import PRESETS, apply_overrides
from memcore import Pipeline
from memcore._plugins._host import get_registry
from memcore import Query

DATA = SHARED / "data" / "locomo" / "locomo_dev.json"
"""The LoCoMo dev file (``MEMCORE_SHARED`` overrides the ``../shared`` folder beside the repository)."""
KS = (5, 10, 25, 50)
"""Cut-offs of recall@k (those up to --k, plus --k itself)."""
HEADLINE_CATEGORIES = locomo.HEADLINE_CATEGORIES
CATEGORY_NAMES = locomo.CATEGORY_NAMES
TEXT_MODES = ("caption", "plain")
DEFAULT_TEXT = "caption"
"""The headline record text. On the dev conversations ``caption`` and ``plain`` are equal
within noise (bench/README.md); ``caption`` keeps what an image showed searchable."""

KW = {"rerank": {"keyword_weight": 0.3}}


def _hybrid(fusion: dict[str, Any] | None = None, rerank: bool | dict[str, Any] = False) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if fusion is not None:
        overrides["fuse"] = {"fusion": fusion}
    if rerank:
        overrides.update(KW if rerank is True else {"rerank": rerank})
    else:
        overrides["rerank"] = {"keyword_weight": 0.0}  # the preset's rerank without its keyword signal
    return {"preset": "advanced", "overrides": overrides}


VARIANTS: dict[str, Any] = {
    "bm25": [{"kind": "recall", "index": "bm25"}, {"kind": "limit"}],
    "dense": [{"kind": "recall", "index": "vector"}, {"kind": "limit"}],
    "dense_kw0.3": [{"kind": "recall", "index": "vector", "over_fetch": 2.0}, {"kind": "rerank", "keyword_weight": 0.3}, {"kind": "limit"}],
    "dense_kw0.5": [{"kind": "recall", "index": "vector", "over_fetch": 2.0}, {"kind": "rerank", "keyword_weight": 0.5}, {"kind": "limit"}],
    "bm25_kw0.3": [{"kind": "recall", "index": "bm25", "over_fetch": 2.0}, {"kind": "rerank", "keyword_weight": 0.3}, {"kind": "limit"}],
    "bm25_kw0.5": [{"kind": "recall", "index": "bm25", "over_fetch": 2.0}, {"kind": "rerank", "keyword_weight": 0.5}, {"kind": "limit"}],
    "rrf10_kw0.5": _hybrid({"kind": "rrf", "k": 10}, {"keyword_weight": 0.5}),
    "semantic": "semantic",
    "semantic_kw0": {"preset": "semantic", "overrides": {"rerank": {"keyword_weight": 0.0}}},
    "semantic_mmr0.9": {"preset": "semantic", "overrides": {"mmr": {"lambda": 0.9}}},
    "advanced": "advanced",
    "rrf60": _hybrid({"kind": "rrf", "k": 60}),
    "rrf60_kw0.3": _hybrid({"kind": "rrf", "k": 60}, rerank=True),
    "rrf10": _hybrid({"kind": "rrf", "k": 10}),
    "rrf10_kw0.3": _hybrid({"kind": "rrf", "k": 10}, rerank=True),
    "rrf20": _hybrid({"kind": "rrf", "k": 20}),
    "rrf20_kw0.3": _hybrid({"kind": "rrf", "k": 20}, rerank=True),
    "rrf30": _hybrid({"kind": "rrf", "k": 30}),
    "rrf30_kw0.3": _hybrid({"kind": "rrf", "k": 30}, rerank=True),
    "dbsf": _hybrid({"kind": "dbsf"}),
    "dbsf_kw0.3": _hybrid({"kind": "dbsf"}, rerank=True),
    "weighted_minmax": _hybrid({"kind": "weighted", "normalization": "minmax"}),
    "weighted_minmax_kw0.3": _hybrid({"kind": "weighted", "normalization": "minmax"}, rerank=True),
}
"""Named pipeline specs (a preset, a preset with overrides, or a stage list). Any hybrid name
may take a ``_depth<over_fetch>`` suffix (``rrf10_depth3``): both recall stages fetch that
multiple of k."""

DEPTH_SUFFIX = re.compile(r"^(?P<base>.+)_depth(?P<of>\d+(?:\.\d+)?)$")


# -- data (memcore.eval.locomo) ------------------------------------------------------------


@dataclass
class Conversation:
    """One LoCoMo sample as this bench uses it: turns as dicts (dia_id, speaker, text,
    blip_caption, session, date_time) and the questions of :mod:`memcore.eval.locomo`."""

    sample_id: str
    turns: list[dict[str, Any]]
    questions: list[locomo.Question]
    dropped_evidence: list[str] = field(default_factory=list)


def load_locomo(path: Path) -> list[Conversation]:
    """:func:`memcore.eval.locomo.load_locomo`, turns as dicts."""
    out = []
    for conv in locomo.load_locomo(path):
        turns = [
            {"dia_id": t.dia_id, "speaker": t.speaker, "text": t.text, "blip_caption": t.caption, "session": t.session, "date_time": t.date_time}
            for t in conv.turns
        ]
        out.append(Conversation(conv.sample_id, turns, conv.questions, conv.dropped_evidence))
    return out


def turn_text(turn: dict[str, Any], mode: str) -> str:
    """``"speaker: text"``, plus ``" [image: caption]"`` in mode ``caption`` when present."""
    text = f"{turn['speaker']}: {turn['text']}"
    if mode == "caption" and turn.get("blip_caption"):
        text += f" [image: {turn['blip_caption']}]"
    return text


# -- collections --------------------------------------------------------------------------


SETTINGS: dict[str, Any] = {
    "store": {"kind": "memory"},
    "spaces": {"default": {"embedder": {"kind": "minilm", "batch_size": 64}}},
    "indexes": {
        "vector": {"kind": "exact", "space": "default", "metric": "cosine"},
        "bm25": {"kind": "bm25", "k1": 1.2, "b": 0.75, "stopwords": "en", "stemmer": "english"},
    },
    "pipeline": "advanced",
}


@dataclass
class Built:
    """One conversation in one text recipe: the memory, record ids -> turn ids, question vectors."""

    conv: Conversation
    mode: str
    memory: Any
    turn_of: dict[str, str]
    texts: list[str]
    ids: list[str]
    qvecs: np.ndarray
    embed_seconds: float
    qembed_seconds: float


def build(conv: Conversation, mode: str) -> Built:
    """Insert every turn (embedded once) and embed the questions once."""
    memory = memcore.open(copy.deepcopy(SETTINGS))
    ids = [f"{conv.sample_id}:{t['dia_id']}" for t in conv.turns]
    texts = [turn_text(t, mode) for t in conv.turns]
    records = [
        {"id": rid, "text": text, "metadata": {"speaker": t["speaker"], "session": t["session"], "date_time": t["date_time"]}}
        for rid, text, t in zip(ids, texts, conv.turns)
    ]
    space = memory.collection.spaces["default"]
    space.embed_queries(["load the model before timing"])  # the model is cached across collections
    started = time.perf_counter()
    memory.collection.insert(records)
    embed_seconds = time.perf_counter() - started
    started = time.perf_counter()
    qvecs = space.embed_queries([q.text for q in conv.questions])
    qembed_seconds = time.perf_counter() - started
    turn_of = {rid: t["dia_id"] for rid, t in zip(ids, conv.turns)}
    return Built(conv, mode, memory, turn_of, texts, ids, np.asarray(qvecs, dtype=np.float32), embed_seconds, qembed_seconds)


# -- metric -------------------------------------------------------------------------------


def first_turns(hit_ids: list[str], turn_of: dict[str, str], k: int) -> list[str]:
    """The first k distinct turns of a ranking (:func:`memcore.eval.locomo.first_turns`)."""
    return locomo.first_turns(([turn_of[h]] for h in hit_ids), k)


Row = tuple[str, int, dict[int, float]]
"""(sample id, category, {k: recall@k}) of one question that has evidence."""


def cutoffs(k: int) -> tuple[int, ...]:
    """The recall cut-offs reported for retrieval depth ``k``."""
    return tuple(sorted({c for c in KS if c <= k} | {k}))


def recall_rows(built: Built, rankings: list[list[str]], ks: tuple[int, ...]) -> list[Row]:
    """One :data:`Row` per question of the conversation that has evidence, in order."""
    rows = []
    for q, hit_ids in zip(built.conv.questions, rankings):
        if not q.evidence:
            continue
        turns = first_turns(hit_ids, built.turn_of, max(ks))
        ev = set(q.evidence)
        rows.append((built.conv.sample_id, q.category, {k: len(ev.intersection(turns[:k])) / len(ev) for k in ks}))
    return rows


def summarise(rows: list[Row], ks: tuple[int, ...]) -> dict[str, Any]:
    """Mean recall@k overall (categories 1-4), with category 5, per category, and the
    overall recall@10 of each conversation."""

    def mean(sel: list[dict[int, float]]) -> dict[str, Any]:
        out: dict[str, Any] = {f"recall@{k}": round(float(np.mean([r[k] for r in sel])), 4) if sel else None for k in ks}
        out["questions"] = len(sel)
        return out

    head = [(conv, r) for conv, c, r in rows if c in HEADLINE_CATEGORIES]
    return {
        "overall": mean([r for _, r in head]),
        "overall_1_5": mean([r for _, _, r in rows]),
        "per_category": {f"{c} {CATEGORY_NAMES.get(c, '?')}": mean([r for _, cc, r in rows if cc == c]) for c in sorted({c for _, c, _ in rows})},
        "per_conversation_recall@10": {conv: round(float(np.mean([r[10] for cv, r in head if cv == conv])), 4) for conv in dict.fromkeys(cv for cv, _ in head)},
    }


def paired_delta(rows: list[Row], base: list[Row], k: int = 10) -> dict[str, float]:
    """Mean per-question difference of recall@k (categories 1-4) against ``base`` (same
    questions in the same order) with a 95% normal-approximation half-width."""
    diffs = np.asarray([r[k] - b[k] for (_, c, r), (_, _, b) in zip(rows, base) if c in HEADLINE_CATEGORIES])
    half = 1.96 * float(diffs.std(ddof=1)) / np.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
    return {f"delta_recall@{k}": round(float(diffs.mean()), 4), "ci95_half_width": round(half, 4)}


# -- retrievers ---------------------------------------------------------------------------


def variant_spec(name: str) -> Any:
    """The pipeline spec of a variant name (``VARIANTS`` or ``<hybrid>_depth<over_fetch>``)."""
    if name in VARIANTS:
        return VARIANTS[name]
    m = DEPTH_SUFFIX.match(name)
    if m and m.group("base") in VARIANTS:
        base = VARIANTS[m.group("base")]
        spec = {"preset": base, "overrides": {}} if isinstance(base, str) else copy.deepcopy(base)
        if not is_hybrid(spec):
            raise SystemExit(f"variant {name!r}: a depth suffix needs a hybrid (advanced preset) variant")
        of = float(m.group("of"))
        spec["overrides"].update({"vector": {"over_fetch": of}, "bm25": {"over_fetch": of}})
        return spec
    raise SystemExit(f"unknown variant {name!r}; known: {', '.join(VARIANTS)} (+ _depth<N> on hybrids)")


def is_hybrid(spec: Any) -> bool:
    """True for the ``advanced`` preset, as is or with overrides."""
    return spec == "advanced" or (isinstance(spec, dict) and spec.get("preset") == "advanced")


def resolved_stages(spec: Any) -> list[dict[str, Any]]:
    """The stage list a spec stands for (recorded in the JSON)."""
    if isinstance(spec, str):
        return copy.deepcopy(PRESETS[spec])
    if isinstance(spec, dict):
        return apply_overrides(copy.deepcopy(PRESETS[spec["preset"]]), spec.get("overrides") or {}, "pipeline")
    return copy.deepcopy(spec)


def top_k_ids(scores: np.ndarray, id_rank: np.ndarray, k: int) -> list[int]:
    """Rows of the k best scores, ties broken by id (as memcore's indexes do)."""
    order = np.lexsort((id_rank, -scores))
    return [int(i) for i in order[:k]]


class RawBM25:
    """The reference recipe with raw bm25s: ``bm25s.tokenize`` + PyStemmer English,
    stopwords en, k1 1.2, b 0.75; full score vector, zero scores dropped, ties by id."""

    def __init__(self, built: Built):
        import bm25s
        import Stemmer

        self.bm25s = bm25s
        self.stemmer = Stemmer.Stemmer("english")
        self.ids = built.ids
        self.id_rank = np.argsort(np.argsort(np.asarray(built.ids)))
        self.retriever = bm25s.BM25(k1=1.2, b=0.75)
        self.retriever.index(bm25s.tokenize(built.texts, stopwords="en", stemmer=self.stemmer, show_progress=False), show_progress=False)

    def search(self, text: str, vec: np.ndarray, k: int) -> list[str]:
        tokens = self.bm25s.tokenize([text], stopwords="en", stemmer=self.stemmer, return_ids=False, show_progress=False)[0]
        scores = self.retriever.get_scores(tokens)
        return [self.ids[i] for i in top_k_ids(scores, self.id_rank, k) if scores[i] > 0]


class RawDense:
    """Exact cosine with numpy over the vectors memcore stored, ties by id."""

    def __init__(self, built: Built):
        matrix, present = built.memory.collection.vectors(built.ids, "default")
        assert bool(np.all(present))
        matrix = np.asarray(matrix, dtype=np.float32)
        self.matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        self.ids = built.ids
        self.id_rank = np.argsort(np.argsort(np.asarray(built.ids)))

    def search(self, text: str, vec: np.ndarray, k: int) -> list[str]:
        scores = self.matrix @ (vec / np.linalg.norm(vec))
        return [self.ids[i] for i in top_k_ids(scores, self.id_rank, k)]


RAW = {"raw_bm25s": RawBM25, "raw_numpy_dense": RawDense}
"""Raw-library baselines by name."""


class Runner:
    """Runs a variant (or raw baseline) over one built conversation; pipelines and raw
    engines are built once and reused by every timing round."""

    def __init__(self, registry, k: int):
        self.registry = registry
        self.k = k
        self._cache: dict[tuple[str, int], Any] = {}

    def _engine(self, name: str, built: Built) -> Any:
        key = (name, id(built))
        if key not in self._cache:
            if name in RAW:
                self._cache[key] = RAW[name](built)
            else:
                pipeline = Pipeline.from_config(variant_spec(name), self.registry)
                pipeline.check(built.memory.collection)
                self._cache[key] = pipeline
        return self._cache[key]

    def run(self, name: str, built: Built) -> tuple[list[list[str]], float]:
        """Rankings (record ids) of every question of the conversation, and the seconds spent
        in ``pipeline.run`` (or the raw search)."""
        engine = self._engine(name, built)
        coll = built.memory.collection
        rankings, seconds = [], 0.0
        for q, vec in zip(built.conv.questions, built.qvecs):
            if name in RAW:
                started = time.perf_counter()
                ranking = engine.search(q.text, vec, self.k)
                seconds += time.perf_counter() - started
            else:
                query = Query(text=q.text, vectors={"default": vec})
                started = time.perf_counter()
                hits = engine.run(coll, query, k=self.k, with_records=False)
                seconds += time.perf_counter() - started
                ranking = [h.id for h in hits]
            rankings.append(ranking)
        return rankings, seconds


# -- driver -------------------------------------------------------------------------------


def evaluate(name: str, builds: list[Built], runner: Runner, ks: tuple[int, ...]) -> tuple[dict[str, Any], float]:
    """Metrics of one variant over the conversations of one text mode, and its seconds."""
    rows: list[Row] = []
    top10: dict[str, list[list[str]]] = {}
    total = 0.0
    for built in builds:
        rankings, seconds = runner.run(name, built)
        total += seconds
        rows.extend(recall_rows(built, rankings, ks))
        top10[built.conv.sample_id] = [r[:10] for r in rankings]
    out = summarise(rows, ks)
    out["_top10"], out["_rows"] = top10, rows
    return out, total


def timing_round(name: str, builds: list[Built], runner: Runner) -> float:
    """Seconds of one more pass of a variant over every question (rankings discarded)."""
    return sum(runner.run(name, built)[1] for built in builds)


def top10_agreement(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Mean overlap of the top-10 id sets of two result sets (same questions)."""
    shares = []
    for conv, rankings in a["_top10"].items():
        for x, y in zip(rankings, b["_top10"][conv]):
            if x or y:
                shares.append(len(set(x) & set(y)) / max(len(x), len(y)))
    return round(float(np.mean(shares)), 4) if shares else 1.0


def print_ranking(results: dict[str, dict[str, Any]], mode: str, ks: tuple[int, ...]) -> None:
    """Variants by overall recall@10 (categories 1-4), on stderr."""
    log(f"ranking by overall recall@10 (categories 1-4), text {mode!r}:")
    log(f"  {'variant':<28} " + " ".join(f"{'R@' + str(k):>6}" for k in ks) + f" {'qps':>7}")
    order = sorted(results, key=lambda n: (-results[n]["overall"]["recall@10"], -results[n]["overall"]["recall@5"], n))
    for name in order:
        o = results[name]["overall"]
        log(f"  {name:<28} " + " ".join(f"{o[f'recall@{k}']:>6.3f}" for k in ks) + f" {results[name]['qps']:>7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="all", help=f"Comma-separated variant names, or 'all': {', '.join(VARIANTS)}.")
    parser.add_argument("--quick", action="store_true", help="One conversation, its first 50 questions, no depth re-runs.")
    parser.add_argument("--k", type=int, default=50, help="Retrieval depth (recall@k is reported for k in 5/10/25/50 up to this).")
    parser.add_argument(
        "--text", choices=(*TEXT_MODES, "both"), default="both", help=f"Record text recipe(s); the headline is {DEFAULT_TEXT!r} (or the one given)."
    )
    parser.add_argument("--conversations", type=int, default=None, help="Use only the first N conversations.")
    parser.add_argument("--questions", type=int, default=None, help="Use only the first N questions of each conversation.")
    parser.add_argument("--depth-top", type=int, default=2, help="Re-run the N best hybrid variants with over_fetch 1 and 3 (0: off).")
    parser.add_argument("--no-raw", action="store_true", help="Skip the raw bm25s / numpy baselines.")
    parser.add_argument("--repeat", type=int, default=3, help="Timing passes, alternating over the variants (qps = median; metrics from the first).")
    parser.add_argument("--out", type=Path, default=None, help="Also write the JSON result to this file.")
    args = parser.parse_args()
    if not DATA.is_file():
        raise SystemExit(f"LoCoMo data not found at {DATA} (expected ../shared/data/locomo/locomo_dev.json beside the repository)")
    if args.k < 10:
        raise SystemExit("--k must be >= 10 (recall@10 is the headline)")
    ks = cutoffs(args.k)
    if args.quick:
        args.conversations, args.questions, args.depth_top, args.repeat = 1, args.questions or 50, 0, 1
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = header(
        "bench_locomo_retrieval",
        args,
        **{d: package_version(d) for d in ("bm25s", "PyStemmer", "torch", "sentence-transformers", "memcore-bm25", "memcore-embed", "memcore-rrf")},
    )
    result["environment"]["HF_HUB_OFFLINE"] = os.environ.get("HF_HUB_OFFLINE")
    names = list(VARIANTS) if args.variants == "all" else [n.strip() for n in args.variants.split(",") if n.strip()]
    for name in names:
        variant_spec(name)
    modes = list(TEXT_MODES) if args.text == "both" else [args.text]
    headline = DEFAULT_TEXT if args.text == "both" else args.text

    convs = load_locomo(DATA)[: args.conversations]
    for conv in convs:
        conv.questions = conv.questions[: args.questions]
    registry = get_registry()

    builds: dict[str, list[Built]] = {}
    for mode in modes:
        builds[mode] = []
        for conv in convs:
            log(f"[{mode}] {conv.sample_id}: inserting {len(conv.turns)} turns (MiniLM) ...")
            builds[mode].append(build(conv, mode))
    turns = sum(len(c.turns) for c in convs)
    n_q = sum(len(c.questions) for c in convs)

    results: dict[str, dict[str, Any]] = {m: {} for m in modes}
    seconds: dict[tuple[str, str], list[float]] = {}
    runner = Runner(registry, args.k)

    def run(name: str) -> None:
        for mode in modes:
            res, spent = evaluate(name, builds[mode], runner, ks)
            results[mode][name] = res
            seconds[(mode, name)] = [spent]
            o = res["overall"]
            log(f"[{mode}] {name:<26} " + "  ".join(f"R@{k} {o[f'recall@{k}']:.3f}" for k in ks) + f"  {n_q / spent:.0f} q/s")

    for name in names:
        run(name)
    depth_names: list[str] = []
    if args.depth_top > 0:
        hybrids = [n for n in names if is_hybrid(variant_spec(n)) and not DEPTH_SUFFIX.match(n)]
        best = sorted(hybrids, key=lambda n: (-results[headline][n]["overall"]["recall@10"], -results[headline][n]["overall"]["recall@5"], n))
        for base in best[: args.depth_top]:
            for of in ("1", "3"):
                depth_names.append(f"{base}_depth{of}")
                run(depth_names[-1])
    raw_names = [] if args.no_raw else list(RAW)
    for name in raw_names:
        run(name)
    every = names + depth_names
    for r in range(1, args.repeat):  # timing rounds alternate over every variant, so drift hits all alike
        log(f"timing round {r + 1}/{args.repeat} ...")
        for name in every + raw_names:
            for mode in modes:
                seconds[(mode, name)].append(timing_round(name, builds[mode], runner))
    for (mode, name), spent in seconds.items():
        results[mode][name]["qps"] = round(n_q / statistics.median(spent), 1)
        results[mode][name]["ms_per_query"] = round(1000 * statistics.median(spent) / n_q, 3)

    comparisons: dict[str, Any] = {}
    for mode in modes:
        r = results[mode]
        comp: dict[str, Any] = {}
        for ours, raw in (("bm25", "raw_bm25s"), ("dense", "raw_numpy_dense")):
            if ours in r and raw in r:
                comp[f"{ours}_vs_{raw}"] = {
                    "qps_ratio_memcore_over_raw": round(r[ours]["qps"] / r[raw]["qps"], 3),
                    "overall_recall@10_delta": round(r[ours]["overall"]["recall@10"] - r[raw]["overall"]["recall@10"], 4),
                    "top10_overlap": top10_agreement(r[ours], r[raw]),
                }
        comparisons[mode] = comp
        if "advanced" in r:  # paired differences against the preset as shipped
            for name, res in r.items():
                if name != "advanced":
                    res["vs_advanced"] = paired_delta(res["_rows"], r["advanced"]["_rows"])
    if len(modes) == 2:
        a, b = modes
        per_variant = {
            n: {
                **{f"recall@{k}": round(results[a][n]["overall"][f"recall@{k}"] - results[b][n]["overall"][f"recall@{k}"], 4) for k in ks},
                "paired_recall@10": paired_delta(results[a][n]["_rows"], results[b][n]["_rows"]),
            }
            for n in results[a]
        }
        comparisons["text"] = {
            "what": f"overall (categories 1-4) recall of text {a!r} minus text {b!r}",
            "mean_over_variants": {f"recall@{k}": round(float(np.mean([v[f"recall@{k}"] for v in per_variant.values()])), 4) for k in ks},
            "per_variant": per_variant,
        }
    for mode in modes:
        for res in results[mode].values():
            res.pop("_top10", None)
            res.pop("_rows", None)

    for mode in modes:
        print_ranking(results[mode], mode, ks)
    result.update(
        {
            "data": "../shared/data/locomo/locomo_dev.json",
            "conversations": [c.sample_id for c in convs],
            "turns": turns,
            "questions": n_q,
            "questions_with_evidence": sum(1 for c in convs for q in c.questions if q.evidence),
            "dropped_evidence_ids": {c.sample_id: c.dropped_evidence for c in convs if c.dropped_evidence},
            "k": args.k,
            "headline": f"'overall' = mean over categories 1-4 (adversarial category 5 excluded; 'overall_1_5' includes it), text {headline!r}",
            "headline_text": headline,
            "embedding": {
                m: {
                    "turns_per_s": round(turns / sum(b.embed_seconds for b in builds[m]), 1),
                    "questions_per_s": round(n_q / sum(b.qembed_seconds for b in builds[m]), 1),
                    "insert_seconds": round(sum(b.embed_seconds for b in builds[m]), 2),
                }
                for m in modes
            },
            "qps_note": "pipeline.run time only; query vectors precomputed in one batch per conversation",
            "results": results,
            "comparisons": comparisons,
            "depth_variants": depth_names,
            "variant_stages": {n: resolved_stages(variant_spec(n)) for n in every},
        }
    )
    finish_environment(result["environment"])
    emit(result, args.out)
    for mode in modes:
        for built in builds[mode]:
            built.memory.close()


if __name__ == "__main__":
    main()
