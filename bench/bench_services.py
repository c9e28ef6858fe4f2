#!/usr/bin/env python
"""Insert throughput and retrieval latency of every memcore-services service on one whole
LoCoMo conversation.

For each service (the settings of ``examples/locomo/<config>.toml``'s ``[memory.service]``
with the example's insert adapter), one memory (store ``sqlite`` in a temporary directory,
like a real agent memory, or ``--store memory``) receives every turn of the conversation
through ``Memory.insert`` in order (``to_turns``: one entry per turn; ``to_dialogs``: one
per exchange of two turns), with the embedding space on the ``hashing`` embedder ("no
model": a cheap deterministic embedder) and on ``minilm`` (the packaged MiniLM). Then each
question of the conversation is retrieved once (``Memory.retrieve(question, k=10)``).

Reported per service and embedder: ``turns_per_s`` (turns / insert seconds), entries,
retrieval ``ms`` median and p95, and the raw MiniLM embedding rate of the same texts in the
same run (``raw_minilm_turns_per_s``, one text per call as the services embed them) so the
service's overhead reads as a ratio.

    python bench/bench_services.py --quick          # 120 turns, 30 questions
    python bench/bench_services.py                  # conv-26: 419 turns, 199 questions

Prints ONE JSON object on stdout (progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

from _common import REPO, emit, finish_environment, header, log, pct, use_checkout

use_checkout("fifo-kv", "embed", "rrf", "lsh", "services")

import memcore  # noqa: E402
from memcore.eval.locomo import load_locomo, turn_text  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
CONFIGS = {"short_term_memory": "short_term_memory", "vector_hash": "tim", "memoryos": "memoryos", "hierarchical": "hierarchical", "hybrid": "hybrid"}


def service_entry(config: str) -> tuple[dict[str, Any], str]:
    """The example's service table and insert adapter."""
    data = tomllib.loads((REPO / "examples" / "locomo" / f"{config}.toml").read_text())
    service = copy.deepcopy(data["memory"]["service"])
    if service["kind"] == "vector_hash":
        service["extract"] = True  # the service extracts the triples itself (rule_svo without an LLM)
    return service, data["locomo"]["insert"].get("adapter", "to_turns")


def entries(turns: list[Any], adapter: str) -> list[tuple[str, dict[str, Any]]]:
    """(text, metadata) in insertion order."""
    if adapter == "to_dialogs":
        out = []
        for i in range(0, len(turns), 2):
            pair = turns[i : i + 2]
            out.append(("\n".join(turn_text(t, date=True) for t in pair), {"dia_ids": [t.dia_id for t in pair], "session": pair[0].session}))
        return out
    return [(turn_text(t, date=True), {"dia_ids": [t.dia_id], "session": t.session, "speaker": t.speaker}) for t in turns]


def run_one(name: str, embedder: str, store: str, turns: list[Any], questions: list[str]) -> dict[str, Any]:
    service, adapter = service_entry(CONFIGS[name])
    items = entries(turns, adapter)
    settings = {"store": store, "indexes": {}, "spaces": {"default": {"embedder": {"kind": embedder}}}, "service": service}
    with tempfile.TemporaryDirectory(prefix="bench-services-") as d:
        memory = memcore.open(settings, path=d)
        try:
            memory.collection.spaces["default"].embed_queries(["warm the model up"])
            started = time.perf_counter()
            for text, meta in items:
                memory.insert(text, metadata=meta)
            seconds = time.perf_counter() - started
            latencies = []
            for q in questions:
                t0 = time.perf_counter()
                memory.retrieve(q, k=10)
                latencies.append(1000 * (time.perf_counter() - t0))
            report = getattr(memory.service, "report", lambda: None)()
            llm = memory.service.llm_report()
        finally:
            memory.close()
    return {
        "turns": len(turns),
        "entries": len(items),
        "insert_seconds": round(seconds, 3),
        "turns_per_s": round(len(turns) / seconds, 1),
        "retrieve_ms_median": round(statistics.median(latencies), 3),
        "retrieve_ms_p95": round(pct(latencies, 95), 3),
        "report": report,
        "llm_steps": llm["steps"],
    }


def raw_minilm(turns: list[Any]) -> float:
    """Turns/s of MiniLM alone, one text per call."""
    memory = memcore.open({"store": "memory", "spaces": {"default": {"embedder": {"kind": "minilm"}}}})
    space = memory.collection.spaces["default"]
    space.embed_documents(["warm up"])
    started = time.perf_counter()
    for t in turns:
        space.embed_documents([turn_text(t, date=True)])
    seconds = time.perf_counter() - started
    memory.close()
    return round(len(turns) / seconds, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="120 turns and 30 questions.")
    parser.add_argument("--services", default=",".join(CONFIGS), help="Comma-separated services.")
    parser.add_argument("--embedders", default="hashing,minilm", help="Comma-separated embedders.")
    parser.add_argument("--store", default="sqlite", choices=["sqlite", "memory"], help="Store of the memories.")
    parser.add_argument("--data", type=Path, default=DATA, help="LoCoMo file (first conversation used).")
    parser.add_argument("--out", type=Path, default=None, help="Also write the JSON result to this file.")
    args = parser.parse_args()
    if not args.data.is_file():
        raise SystemExit(f"LoCoMo data not found at {args.data}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    conv = load_locomo(args.data)[0]
    turns = conv.turns[:120] if args.quick else conv.turns
    questions = [q.text for q in conv.questions][: 30 if args.quick else None]
    result = header("bench_services", args, **{"memcore-services": None})
    result["conversation"] = conv.sample_id
    results: dict[str, Any] = {}
    for name in [s.strip() for s in args.services.split(",") if s.strip()]:
        for embedder in [e.strip() for e in args.embedders.split(",") if e.strip()]:
            log(f"{name} / {embedder}: {len(turns)} turns ...")
            results.setdefault(name, {})[embedder] = r = run_one(name, embedder, args.store, turns, questions)
            log(f"  {r['turns_per_s']} turns/s, retrieve {r['retrieve_ms_median']} ms median")
    result["results"] = results
    if "minilm" in args.embedders:
        result["raw_minilm_turns_per_s"] = rate = raw_minilm(turns)
        for per in results.values():
            if "minilm" in per:
                per["minilm"]["ratio_vs_raw_minilm"] = round(per["minilm"]["turns_per_s"] / rate, 3)
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
