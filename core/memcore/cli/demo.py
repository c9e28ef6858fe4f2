"""``memcore demo``: the default memory (no settings, no plugin) on a shipped sample conversation."""

from __future__ import annotations

import json
import tempfile
import time
from contextlib import ExitStack
from importlib import resources
from pathlib import Path
from typing import Any

import click

from ..embedders._default import MODEL_DISTRIBUTION, SEMANTIC_HINT, minilm_unavailable, semantic_hint
from ._common import path_option, echo_json, note, progress, shorten

__all__ = ["demo", "demo_settings", "load_sample", "semantic_hint", "SEMANTIC_HINT", "MODEL_DISTRIBUTION"]

K = 3


def load_sample() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The sample conversation (records) and its questions, from ``memcore/data``."""
    data = resources.files("memcore").joinpath("data")
    with data.joinpath("sample_conversation.jsonl").open("r", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    questions = json.loads(data.joinpath("sample_questions.json").read_text(encoding="utf-8"))["questions"]
    return records, questions


def _pipeline_label(pipeline: Any) -> Any:
    """A preset name, ``{"preset", "overrides"}`` as given, or the list of stage kinds."""
    if isinstance(pipeline, (str, dict)):
        return pipeline
    return [entry.get("kind") for entry in pipeline]


def _describe(memory: Any) -> dict[str, Any]:
    settings = memory.settings
    return {
        "store": dict(settings.store).get("kind"),
        "spaces": {name: (entry.get("embedder") or {}).get("kind") for name, entry in settings.spaces.items()},
        "indexes": {name: entry.get("kind") for name, entry in settings.indexes.items()},
        "pipeline": _pipeline_label(settings.pipeline),
        "service": dict(settings.service).get("kind"),
    }


HASHING = {"spaces": {"default": {"embedder": "hashing"}}}
"""The demo's settings on the lexical fallback (said explicitly: no creation hint from memcore.open, the demo prints its own)."""


def demo_settings(embedder: str) -> tuple[dict[str, Any], str | None]:
    """The demo's settings and, when it runs on the hashing fallback, why.

    ``auto``: the ``minilm`` embedder (memcore-embed, numpy or torch backend) when it is
    installed with its model, else the builtin ``hashing`` one.
    """
    from ..errors import ConfigError

    if embedder == "hashing":
        return HASHING, None
    reason = minilm_unavailable()
    if reason is not None:
        if embedder == "minilm":
            raise ConfigError(f"memcore demo --embedder minilm: {reason}")
        return HASHING, reason
    return {"spaces": {"default": {"embedder": "minilm"}}}, None


@click.command("demo")
@path_option("Keep the collection in this directory (default: a temporary directory, deleted afterwards).")
@click.option(
    "--embedder",
    "embedder",
    type=click.Choice(["auto", "minilm", "hashing"]),
    default="auto",
    show_default=True,
    help="auto: minilm (semantic) when memcore-embed and its model are installed, else hashing (lexical).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with every question's hits and hits@3.")
def demo(path: Path | None, embedder: str, as_json: bool) -> None:
    """Build a memory with the built-in defaults and query a sample conversation.

    Defaults: SQLite store, the `exact` vector index and the `basic` pipeline, with the
    `minilm` embedder (all-MiniLM-L6-v2, semantic) when memcore-embed and its model are
    installed, else the builtin `hashing` embedder (lexical feature hashing, NOT
    semantic; a one-line hint says how to get minilm). The sample is a 52-turn,
    four-session conversation between Alice and Bob shipped in memcore/data; each
    question's expected turn is checked against the top 3 hits (hits@3).
    """
    from ..api import _open as api

    records, questions = load_sample()
    settings, fallback = demo_settings(embedder)
    with ExitStack() as stack:
        directory = path if path is not None else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memcore-demo-")))
        started = time.perf_counter()
        memory = stack.enter_context(api.open(settings, path=directory))
        for batch in progress(records, "Ingesting sample conversation", batch=8):
            memory.collection.insert(list(batch))
        ingest_seconds = time.perf_counter() - started
        components = _describe(memory)
        results = []
        query_started = time.perf_counter()
        for q in questions:
            hits = memory.query(q["question"], k=K)
            ids = [h.id for h in hits]
            found_at = next((rank for rank, rid in enumerate(ids, start=1) if rid in q["evidence"]), None)
            results.append(
                {
                    "question": q["question"],
                    "answer": q.get("answer"),
                    "expected": q["evidence"],
                    "found": found_at is not None,
                    "rank": found_at,
                    "hits": [
                        {
                            "rank": rank,
                            "id": h.id,
                            "score": h.score,
                            "speaker": h.record.metadata.get("speaker") if h.record else None,
                            "date": h.record.metadata.get("date") if h.record else None,
                            "text": h.record.text if h.record else None,
                        }
                        for rank, h in enumerate(hits, start=1)
                    ],
                }
            )
        query_seconds = time.perf_counter() - query_started
        count = memory.collection.count()
    found = sum(r["found"] for r in results)
    summary = {
        "path": str(path) if path is not None else None,
        "components": components,
        "records": count,
        "k": K,
        "questions": results,
        "found": found,
        "total": len(results),
        f"hits@{K}": found / len(results) if results else 0.0,
        "ingest_seconds": round(ingest_seconds, 3),
        "query_seconds": round(query_seconds, 3),
        "fallback": fallback,
    }
    if as_json:
        echo_json(summary)
        return
    c = components
    click.echo(
        f"memcore demo: {count} turns, store={c['store']}, embedder={','.join(v or '-' for v in c['spaces'].values())}, "
        f"index={','.join(c['indexes'].values())}, pipeline={c['pipeline']} (ingest {ingest_seconds:.2f}s)"
    )
    if path is None:
        note("(the collection lives in a temporary directory; use --path DIR to keep it)")
    if fallback is not None and embedder == "auto":
        note(semantic_hint(fallback))
    for number, r in enumerate(results, start=1):
        click.echo()
        click.secho(f"Q{number}. {r['question']}", bold=True)
        for hit in r["hits"]:
            mark = "*" if hit["id"] in r["expected"] else " "
            click.echo(f"  {mark}{hit['rank']}. {hit['score']:.3f}  [{hit['id']} {hit['speaker']}, {hit['date']}]  {shorten(hit['text'] or '', 80)}")
        if r["found"]:
            click.secho(f"  found expected turn {', '.join(r['expected'])} at rank {r['rank']}", fg="green")
        else:
            click.secho(f"  expected turn {', '.join(r['expected'])} NOT in the top {K}", fg="red")
    click.echo()
    kind = next(iter(c["spaces"].values()), None)
    what = "lexical matching, not semantic" if kind == "hashing" else "semantic"
    click.echo(f"hits@{K}: {found}/{len(results)} = {summary[f'hits@{K}']:.2f}  ({kind} embedder: {what})")
