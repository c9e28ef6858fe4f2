"""``memcore query``: retrieve through the declared service, its pipeline, or one index.

Which path answers (what a user of the settings file expects):

- ``--index NAME``: a search of that one index (hits with provenance);
- otherwise the declared service: its ``retrieve`` when the settings declare a service
  other than ``default`` (``memoryos``, ``short_term_memory``...), since that is how the
  memory answers in an application; the declared pipeline for the ``default`` service
  (whose ``retrieve`` *is* the pipeline), with hits that can ``--explain`` themselves;
- ``--service`` / ``--pipeline`` force one of the two.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import click

from ..api._memory import check_queries
from ._common import CliError, JSON_OBJECT, config_option, declared_service, echo_json, open_memory, path_option, scope_option, shorten


def through_service(service: str, forced: bool | None, index: str | None) -> bool:
    """True when the service's ``retrieve`` answers (see the module docstring)."""
    if index is not None:
        if forced:
            raise CliError("--index searches one index; --service asks the service: give one of them")
        return False
    return service != "default" if forced is None else forced


@click.command("query")
@config_option()
@path_option("Collection directory. Default: the settings' `path`.")
@click.option("--index", "-i", "index", metavar="NAME", default=None, help="Search this one index instead of the service or pipeline.")
@click.option(
    "--service/--pipeline",
    "forced",
    default=None,
    help="Answer with the service's retrieve, or with the declared pipeline. Default: the service when the settings declare one other than `default`, else the pipeline.",
)
@click.option("-k", "--k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="Number of hits.")
@click.option("--where", "-w", type=JSON_OBJECT, default=None, help='Metadata filter as JSON, e.g. \'{"speaker": "Alice", "turn": {"$gte": 3}}\'.')
@click.option(
    "--where-document",
    "-d",
    "where_document",
    type=JSON_OBJECT,
    default=None,
    help='Text filter on the record text as JSON (Chroma\'s shape), e.g. \'{"$contains": "Paris"}\'; restricts the candidates before the K best.',
)
@scope_option("Only this scope's records: user_id=u1 (repeatable: --scope user_id=u1 --scope run_id=r1), or a JSON object.")
@click.option("--each", is_flag=True, help="Each TEXT argument is a query of its own (several queries in one call), not words of one query.")
@click.option(
    "--queries-file",
    type=click.File("r", encoding="utf-8"),
    default=None,
    help="Read the queries from this file, one per line (blank lines skipped; - for stdin), after any TEXT.",
)
@click.option(
    "--min-score",
    type=float,
    default=None,
    metavar="SCORE",
    help="Drop hits scoring below SCORE (see the scores guide for what each preset's score means).",
)
@click.option("--explain", is_flag=True, help="Explain each hit's score (which lists it came from, at which rank); not with the service.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print a JSON list of hits (Hit.to_dict(), or the service\'s result dicts); with several queries, a list of {"query", "hits"}.',
)
@click.option("--width", type=click.IntRange(min=20), default=100, show_default=True, help="Maximum width of the text column.")
@click.argument("text", nargs=-1)
def query(
    config: Path | None,
    path: Path | None,
    index: str | None,
    forced: bool | None,
    k: int,
    where: dict[str, Any] | None,
    where_document: dict[str, Any] | None,
    scope: dict[str, Any] | None,
    each: bool,
    queries_file: Any,
    min_score: float | None,
    explain: bool,
    as_json: bool,
    width: int,
    text: tuple[str, ...],
) -> None:
    """Retrieve the best K records for TEXT.

    Asks the service the settings declare (its retrieve) when it is not `default`; runs
    the declared pipeline (preset "basic" by default) for the `default` service; searches
    one index with --index. --service / --pipeline choose explicitly. Through the
    pipeline or an index the collection is opened read-only (SQLite), so querying works
    while another process writes; a service's retrieve may update its state (e.g.
    memoryos's heat), so it opens the memory for writing.

    \b
    Examples:
      memcore query -c memcore.toml -p ./mem "where did Alice travel"
      memcore query -c memcore.toml -p ./mem -k 3 --where '{"speaker": "Bob"}' --explain cat
      memcore query -c memoryos.toml -p ./mem --scope user_id=alice "what does she like"
      memcore query -p ./mem --where-document '{"$contains": "Paris"}' "trip"
      memcore query -p ./mem --each "where did Alice travel" "what does Bob cook" --json
      memcore query -p ./mem --queries-file questions.txt -k 3
      memcore query -p ./mem --min-score 0.3 "a question the memory may not answer"
    """
    texts = query_texts(text, each, queries_file)
    service = declared_service(config, path)
    several = len(texts) > 1 or each or queries_file is not None
    if through_service(service, forced, index):
        if explain:
            raise CliError(f"--explain needs hits with provenance: the {service!r} service's retrieve returns none; use --pipeline or --index")
        with open_memory(config, path, must_exist=True) as memory:
            if several:
                batches = memory.retrieve_many(texts, where=where, where_document=where_document, k=k, scope=scope, min_score=min_score)
            else:
                batches = [memory.retrieve(texts[0], where=where, where_document=where_document, k=k, scope=scope, min_score=min_score)]
        if as_json and several:
            echo_json([{"query": q, "hits": list(results)} for q, results in zip(texts, batches)])
            return
        for q, results in zip(texts, batches):
            if several and not as_json:
                click.echo(f"## {q}")
            show_results(results, as_json=as_json, width=width)
        return
    with open_memory(config, path, read_only=True) as memory:
        check_queries(texts)
        with memory.collection.embedded_queries(texts if several else []):
            answers = [memory.query(q, k=k, where=where, where_document=where_document, index=index, scope=scope, min_score=min_score) for q in texts]
    if as_json:
        lists = [[{**hit.to_dict(), **({"explain": hit.explain()} if explain else {})} for hit in hits] for hits in answers]
        echo_json([{"query": q, "hits": rows} for q, rows in zip(texts, lists)] if several else lists[0])
        return
    for q, hits in zip(texts, answers):
        if several:
            click.echo(f"## {q}")
        table = [(hit.id, hit.score, hit.record.text if hit.record is not None else None) for hit in hits]
        show_table(table, width, [hit.explain() for hit in hits] if explain else None)


def query_texts(text: Sequence[str], each: bool, queries_file: Any) -> list[str]:
    """The query texts of one call: TEXT (one query, or one per argument with ``--each``),
    then the non-blank lines of ``--queries-file``."""
    texts = list(text) if each else ([" ".join(text)] if text else [])
    if queries_file is not None:
        texts.extend(line.strip() for line in queries_file if line.strip())
    if not texts:
        raise CliError("give a query TEXT, or several with --each or --queries-file")
    return texts


def show_results(results: Sequence[dict[str, Any]], *, as_json: bool, width: int) -> None:
    """A service's results (``{"id", "text", "score", "metadata", ...}``) as JSON or a table."""
    if as_json:
        echo_json(list(results))
        return
    show_table([(str(r["id"]), float(r["score"]), r.get("text")) for r in results], width)


def show_table(rows: Sequence[tuple[str, float, str | None]], width: int, why: Sequence[str] | None = None) -> None:
    """Rank, score, id and text per hit (and its explanation under it when given)."""
    if not rows:
        click.echo("No hits.")
        return
    id_width = min(max(len(rid) for rid, _, _ in rows), 36)
    click.echo(f"{'#':>3}  {'score':>8}  {'id':<{id_width}}  text")
    for rank, (rid, score, body) in enumerate(rows, start=1):
        shown_id = rid if len(rid) <= id_width else rid[: id_width - 1] + "…"
        shown = shorten(body, width) if body is not None else "(record not loaded)"
        click.echo(f"{rank:>3}  {score:>8.4f}  {shown_id:<{id_width}}  {shown}")
        if why is not None:
            click.echo(f"{'':>3}  {'':>8}  " + click.style(f"why: {why[rank - 1]}", dim=True))
