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
@scope_option("Only this scope's records: user_id=u1 (repeatable: --scope user_id=u1 --scope run_id=r1), or a JSON object.")
@click.option("--explain", is_flag=True, help="Explain each hit's score (which lists it came from, at which rank); not with the service.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of hits (Hit.to_dict(), or the service's result dicts).")
@click.option("--width", type=click.IntRange(min=20), default=100, show_default=True, help="Maximum width of the text column.")
@click.argument("text", nargs=-1, required=True)
def query(
    config: Path | None,
    path: Path | None,
    index: str | None,
    forced: bool | None,
    k: int,
    where: dict[str, Any] | None,
    scope: dict[str, Any] | None,
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
    """
    query_text = " ".join(text)
    service = declared_service(config, path)
    if through_service(service, forced, index):
        if explain:
            raise CliError(f"--explain needs hits with provenance: the {service!r} service's retrieve returns none; use --pipeline or --index")
        with open_memory(config, path, must_exist=True) as memory:
            results = memory.retrieve(query_text, where=where, k=k, scope=scope)
        show_results(results, as_json=as_json, width=width)
        return
    with open_memory(config, path, read_only=True) as memory:
        hits = memory.query(query_text, k=k, where=where, index=index, scope=scope)
    if as_json:
        rows = []
        for hit in hits:
            row = hit.to_dict()
            if explain:
                row["explain"] = hit.explain()
            rows.append(row)
        echo_json(rows)
        return
    table = [(hit.id, hit.score, hit.record.text if hit.record is not None else None) for hit in hits]
    show_table(table, width, [hit.explain() for hit in hits] if explain else None)


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
