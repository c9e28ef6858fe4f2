#!/usr/bin/env python
"""Where the pages of a ``memoryos`` memory went on LoCoMo: the evaluation of
``memcore eval locomo`` (same pipeline, same functions, same recall figures) plus, per
conversation, the service's tier report after the last packet -- pages in STM / MTM,
segments, batches that joined a segment, segments evicted (summarised into user knowledge),
pages summarised, promotions, LTM entries per store -- and the LLM steps' paths.

    OMP_NUM_THREADS=1 python bench/bench_memoryos_tiers.py --data ../shared/data/locomo/locomo_dev.json \\
        --config examples/locomo/memoryos_small_mtm.toml

Checks that no page was dropped: every inserted page is in the STM, in the MTM or listed by
exactly one segment summary (``"pages_accounted": true``). Prints ONE JSON object on stdout
(progress on stderr). Never run as a test.
"""

from __future__ import annotations

import argparse
import copy
import tempfile
from pathlib import Path
from typing import Any

from _common import emit, finish_environment, header, log, use_checkout

use_checkout("fifo-kv", "embed", "services")

import memcore  # noqa: E402
from memcore.eval.locomo import load_locomo  # noqa: E402
from memcore.eval.locomo_pipeline import add_counts, load_eval_config, run_conversation, summarise  # noqa: E402


def accounted(memory: memcore.Memory) -> dict[str, Any]:
    """Pages per place; True when each page is in exactly one (STM, MTM, a summary)."""
    c = memory.collection
    stm, mtm = set(c.ids(index="memoryos.stm")), set(c.ids(index="memoryos.mtm"))
    summaries = [r for r in (c.get(i) for i in c.ids(index="memoryos.user_knowledge")) if r.metadata.get("kind") == "segment_summary"]
    summarised = [p for s in summaries for p in s.metadata["pages"]]
    derived = {i for name in ("memoryos.user_knowledge", "memoryos.assistant_knowledge", "memoryos.profile") for i in c.ids(index=name)}
    pages = set(c.ids()) - derived
    ok = len(summarised) == len(set(summarised)) and not (stm & mtm) and stm | mtm | set(summarised) == pages
    return {"pages": len(pages), "segment_summaries": len(summaries), "pages_accounted": ok}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo JSON file")
    parser.add_argument("--config", type=Path, required=True, help="a memcore eval locomo config of a memoryos memory")
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    result = header("memoryos_tiers", args)
    settings, config = load_eval_config(args.config)
    rows: list[dict[str, Any]] = []
    per_conversation: dict[str, Any] = {}
    llm_steps: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="memoryos-tiers-") as tmp:
        for conv in load_locomo(args.data)[: args.limit_conversations]:
            log(conv.sample_id)
            memory = memcore.open(copy.deepcopy(dict(settings)), path=Path(tmp) / conv.sample_id)
            try:
                conv_rows, stats = run_conversation(memory, conv, config)
                report = {k: v for k, v in memory.service.report().items() if k != "state_reads"}
                per_conversation[conv.sample_id] = {**report, **accounted(memory), "entries": stats["entries"]}
                add_counts(llm_steps, memory.service.llm_report()["steps"])
            finally:
                memory.close()
            rows.extend(conv_rows)
    summary = summarise(rows)
    result["recall"] = {k: summary[k] for k in ("recall@5", "recall@10", "recall@25", "recall@50", "entry_recall@10", "questions")}
    result["conversations"] = per_conversation
    keys = [k for k in next(iter(per_conversation.values())) if k != "pages_accounted"] if per_conversation else []
    result["total"] = {k: sum(c[k] for c in per_conversation.values()) for k in keys}
    result["pages_accounted"] = all(c["pages_accounted"] for c in per_conversation.values())
    result["llm_steps"] = llm_steps
    finish_environment(result["environment"])
    emit(result, args.out)


if __name__ == "__main__":
    main()
