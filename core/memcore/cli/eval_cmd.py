"""``memcore eval``: evaluate the retriever declared in a settings file on a benchmark.

``memcore eval beir`` ingests a BEIR folder's corpus and scores the declared pipeline on the
queries of one split (nDCG@10, recall@100, MRR@10, queries/second).
"""

from __future__ import annotations

import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

import click

from ._common import echo_json, note, open_memory


class _Bars:
    """One progress bar on stderr at a time (the previous one is closed when the next starts)."""

    def __init__(self, stack: ExitStack, enabled: bool = True):
        self.stack = stack
        self.enabled = enabled
        self.current: Any = None

    def start(self, label: str) -> Callable[[int], Callable[[int], None]]:
        def make(total: int) -> Callable[[int], None]:
            self.close()
            if not self.enabled:
                return lambda n: None
            self.current = click.progressbar(length=max(total, 1), label=label, file=sys.stderr, show_pos=True)
            self.current.__enter__()
            return self.current.update

        return make

    def close(self) -> None:
        if self.current is not None:
            self.current.__exit__(None, None, None)
            self.current = None


@click.group("eval")
def eval_group() -> None:
    """Evaluate the retriever declared in a settings file on a benchmark.

    \b
    Example:
      memcore eval beir --data ./scifact --split test --config examples/beir_bm25.toml --json
    """


@eval_group.command("beir")
@click.option("--data", "-d", "data_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.")
@click.option("--split", "-s", default="test", show_default=True, help="Qrels split to evaluate (qrels/<split>.tsv).")
@click.option("--config", "-c", "config", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Settings file (TOML/YAML) declaring the retriever. Default: MEMCORE_* environment and the built-in defaults.")
@click.option("-k", "--k", "k", type=click.IntRange(min=1), default=10, show_default=True,
              help="Cutoff of nDCG and MRR; queries retrieve max(100, k) hits (for recall@100).")
@click.option("--path", "-p", "path", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Collection directory to ingest into (kept, and reused by later runs). Default: a temporary directory.")
@click.option("--limit-queries", "-n", "limit_queries", type=click.IntRange(min=1), default=None,
              help="Evaluate only the first N judged queries.")
@click.option("--batch-size", "-b", type=click.IntRange(min=1), default=256, show_default=True, help="Documents per insert batch.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: ndcg@10, recall@100, mrr@10, queries, qps.")
def beir(data_dir: Path, split: str, config: Path | None, k: int, path: Path | None, limit_queries: int | None,
         batch_size: int, as_json: bool) -> None:
    """Ingest a BEIR corpus into the retriever declared by --config and score it on --split.

    Each document becomes a record with id `_id`, text `title + " " + text` and metadata
    {"title": ...}. Every query of the split that has a relevant document in the qrels is
    run through the declared pipeline (Memory.query) for max(100, k) hits, and scored as
    BEIR / pytrec_eval do (graded nDCG, ties broken by id). qps counts the query phase only.
    """
    from ..eval import load_beir, run_beir

    data = load_beir(data_dir, split)
    if data.missing_queries:
        note(f"note: {len(data.missing_queries)} qrels query id(s) are not in queries.jsonl and are skipped (e.g. {data.missing_queries[:3]})")
    if not data.judged_queries():
        raise click.ClickException(f"no query of split {split!r} has a relevant document in {data_dir / 'qrels' / (split + '.tsv')}")
    with ExitStack() as stack:
        directory = path if path is not None else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memcore-beir-")))
        memory = open_memory(config, directory)
        stack.callback(memory.close)
        bars = _Bars(stack)
        stack.callback(bars.close)
        report = run_beir(
            memory, data, k=k, limit_queries=limit_queries, batch_size=batch_size,
            ingest_progress=bars.start("Ingesting"), query_progress=bars.start("Querying"),
        )
        bars.close()
    if report.skipped:
        note(f"note: {report.skipped} corpus document(s) without title and text were skipped")
    if as_json:
        echo_json(report.summary())
        return
    click.echo(
        f"BEIR {data_dir.name} ({split}): {report.inserted + report.existing} documents "
        f"({report.inserted} inserted, {report.existing} already stored) in {report.ingest_seconds:.1f}s"
    )
    click.echo(f"{report.queries} queries in {report.query_seconds:.2f}s: {report.qps:.1f} queries/s")
    for name, value in report.metrics.items():
        click.echo(f"  {name:<11} {value:.4f}")
