"""``memcore query``: retrieve through the declared pipeline (or one index)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ._common import config_option, path_option, JSON_OBJECT, echo_json, open_memory, shorten


@click.command("query")
@config_option()
@path_option("Collection directory. Default: the settings' `path`.")
@click.option("--index", "-i", "index", metavar="NAME", default=None, help="Search this one index instead of running the pipeline.")
@click.option("-k", "--k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="Number of hits.")
@click.option("--where", "-w", type=JSON_OBJECT, default=None, help='Metadata filter as JSON, e.g. \'{"speaker": "Alice", "turn": {"$gte": 3}}\'.')
@click.option("--scope", type=JSON_OBJECT, default=None, help='Scope as JSON, e.g. \'{"user_id": "u1"}\'.')
@click.option("--explain", is_flag=True, help="Explain each hit's score (which lists it came from, at which rank).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of hits (Hit.to_dict()).")
@click.option("--width", type=click.IntRange(min=20), default=100, show_default=True, help="Maximum width of the text column.")
@click.argument("text", nargs=-1, required=True)
def query(
    config: Path | None,
    path: Path | None,
    index: str | None,
    k: int,
    where: dict[str, Any] | None,
    scope: dict[str, Any] | None,
    explain: bool,
    as_json: bool,
    width: int,
    text: tuple[str, ...],
) -> None:
    """Retrieve the best K records for TEXT.

    Runs the pipeline declared in the settings (preset "basic" by default), or searches
    one index with --index. The collection is opened read-only (SQLite), so querying works
    while another process writes.

    \b
    Examples:
      memcore query -c memcore.toml -p ./mem "where did Alice travel"
      memcore query -c memcore.toml -p ./mem -k 3 --where '{"speaker": "Bob"}' --explain cat
    """
    query_text = " ".join(text)
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
    if not hits:
        click.echo("No hits.")
        return
    id_width = min(max(len(h.id) for h in hits), 36)
    click.echo(f"{'#':>3}  {'score':>8}  {'id':<{id_width}}  text")
    for rank, hit in enumerate(hits, start=1):
        shown_id = hit.id if len(hit.id) <= id_width else hit.id[: id_width - 1] + "…"
        body = shorten(hit.record.text, width) if hit.record is not None else "(record not loaded)"
        click.echo(f"{rank:>3}  {hit.score:>8.4f}  {shown_id:<{id_width}}  {body}")
        if explain:
            click.echo(f"{'':>3}  {'':>8}  " + click.style(f"why: {hit.explain()}", dim=True))
