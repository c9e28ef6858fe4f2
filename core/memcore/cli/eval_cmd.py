"""``memcore eval``: evaluate the retriever declared in a settings file on a benchmark.

``memcore eval beir`` ingests a BEIR folder's corpus and scores the declared pipeline on the
queries of one split (nDCG@10, recall@100, MRR@10, queries/second). ``memcore eval locomo``
runs the LoCoMo memory test pipeline (:mod:`memcore.eval.locomo_pipeline`).
"""

from __future__ import annotations

import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

import click

from ._common import config_option, path_option, echo_json, note, open_memory


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
            update: Callable[[int], None] = self.current.update
            return update

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
@click.option(
    "--data",
    "-d",
    "data_dir",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.",
)
@click.option("--split", "-s", default="test", show_default=True, help="Qrels split to evaluate (qrels/<split>.tsv).")
@config_option("Settings file (TOML/YAML) declaring the retriever. Default: MEMCORE_* environment and the built-in defaults.")
@click.option(
    "-k",
    "--k",
    "k",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Cutoff of nDCG and MRR; queries retrieve max(100, k) hits (for recall@100).",
)
@path_option("Collection directory to ingest into (kept, and reused by later runs). Default: a temporary directory.")
@click.option("--limit-queries", "-n", "limit_queries", type=click.IntRange(min=1), default=None, help="Evaluate only the first N judged queries.")
@click.option("--batch-size", "-b", type=click.IntRange(min=1), default=256, show_default=True, help="Documents per insert batch.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: ndcg@10, recall@100, mrr@10, queries, qps.")
def beir(data_dir: Path, split: str, config: Path | None, k: int, path: Path | None, limit_queries: int | None, batch_size: int, as_json: bool) -> None:
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
            memory,
            data,
            k=k,
            limit_queries=limit_queries,
            batch_size=batch_size,
            ingest_progress=bars.start("Ingesting"),
            query_progress=bars.start("Querying"),
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


@eval_group.command("locomo")
@click.option(
    "--data",
    "-d",
    "data_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="LoCoMo JSON file (a list of samples, e.g. locomo_dev.json).",
)
@config_option("Evaluation config (TOML/YAML): [memory] memcore settings and [locomo] pipeline options (examples/locomo/*.toml).", required=True, exists=True)
@click.option(
    "--out",
    "-o",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for questions.jsonl (one line per question) and summary.json.",
)
@click.option("--conversations", "-n", "limit_conversations", type=click.IntRange(min=1), default=None, help="Evaluate only the first N conversations.")
@click.option(
    "--questions", "-q", "limit_questions", type=click.IntRange(min=1), default=None, help="Evaluate only the first N questions of each conversation."
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object: recall@5/10/25/50, entry_recall@10, questions, by_category, llm (and f1, bleu1 when an LLM answered).",
)
def locomo(data_file: Path, config: Path, out: Path | None, limit_conversations: int | None, limit_questions: int | None, as_json: bool) -> None:
    """Run the LoCoMo memory test pipeline on the memory declared by --config.

    Each conversation is streamed into a fresh memory in packets of 1-2 turns (insert
    pipeline), and its questions are tested when they become answerable (test pipeline).
    Evidence recall@k counts turns as in the LoCoMo paper; the headline figures are over
    categories 1-4. Answers (token F1, BLEU-1) need an LLM declared in [memory.llms].
    """
    from ..eval.locomo import load_locomo
    from ..eval.locomo_pipeline import load_eval_config, run_locomo

    memory_settings, eval_config = load_eval_config(config)
    conversations = load_locomo(data_file)[:limit_conversations]
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memcore-locomo-")))
        bars = _Bars(stack)
        stack.callback(bars.close)
        summary = run_locomo(
            memory_settings,
            eval_config,
            conversations,
            workdir,
            out=out,
            limit_questions=limit_questions,
            progress=lambda name, total: bars.start(f"{name}")(total),
        )
        bars.close()
    if as_json:
        echo_json(summary)
        return
    click.echo(f"LoCoMo {data_file.name}: {len(conversations)} conversation(s), {summary['questions']} questions with evidence (categories 1-4)")
    click.echo("  " + "  ".join(f"recall@{k} {summary[f'recall@{k}']:.4f}" for k in (5, 10, 25, 50) if summary.get(f"recall@{k}") is not None))
    for name, cat in summary["by_category"].items():
        click.echo(f"  {name:<15} recall@10 {cat['recall@10'] if cat['recall@10'] is not None else float('nan'):.4f}  ({cat['questions']} q)")
    if "f1" in summary:
        click.echo(f"  answers by {summary['llm']}: F1 {summary['f1']:.4f}  BLEU-1 {summary['bleu1']:.4f}")
    else:
        click.echo("  no LLM declared: answering skipped")
