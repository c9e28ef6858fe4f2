"""``memcore get``, ``count``, ``delete`` and ``history``: the record verbs of
:class:`memcore.Memory` on a memory on disk (filters: ``--where``, ``--where-document``,
``--scope``).
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import click

from ._common import CliError, JSON_OBJECT, config_option, echo_json, open_memory, path_option, scope_option, shorten

__all__ = ["get", "count", "delete", "history"]

_WHERE_HELP = 'Metadata filter as JSON, e.g. \'{"speaker": "Alice", "turn": {"$gte": 3}}\'.'
_DOCUMENT_HELP = (
    'Text filter on the record text as JSON (Chroma\'s shape), e.g. \'{"$contains": "Paris"}\', \'{"$not_contains": "draft"}\', combined with $and/$or.'
)


def where_options(command: Any) -> Any:
    """``--where``, ``--where-document`` and ``--scope``, shared by the filtering verbs."""
    command = scope_option("Only this scope's records: user_id=u1 (repeatable: --scope user_id=u1 --scope run_id=r1), or a JSON object.")(command)
    command = click.option("--where-document", "-d", "where_document", type=JSON_OBJECT, default=None, help=_DOCUMENT_HELP)(command)
    return click.option("--where", "-w", type=JSON_OBJECT, default=None, help=_WHERE_HELP)(command)


def record_row(record: Any) -> dict[str, Any]:
    """One record as JSON (without vectors)."""
    return {
        "id": record.id,
        "text": record.text,
        "metadata": record.metadata,
        "scope": None if record.scope is None else record.scope.as_dict(),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def _when(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


@click.command("get")
@config_option()
@path_option("Collection directory (it must exist). Default: the settings' `path`.")
@where_options
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True, help="Skip this many matching records (insertion order).")
@click.option("--limit", "-n", type=click.IntRange(min=0), default=None, help="Print at most this many records. Default: all.")
@click.option("--json", "as_json", is_flag=True, help='Print a JSON list of records: {"id", "text", "metadata", "scope", "created_at", "updated_at"}.')
@click.option("--width", type=click.IntRange(min=20), default=100, show_default=True, help="Maximum width of the text column.")
@click.argument("ids", nargs=-1)
def get(
    config: Path | None,
    path: Path | None,
    where: dict[str, Any] | None,
    where_document: dict[str, Any] | None,
    scope: dict[str, Any] | None,
    offset: int,
    limit: int | None,
    as_json: bool,
    width: int,
    ids: tuple[str, ...],
) -> None:
    """Print records: by IDS, or every record matching the filters, a page at a time.

    Records come in insertion order (stable: --offset 0, 20, 40... with --limit 20 pages
    through every match once while nothing is written). With IDS, each must exist (and
    match the filters). Opens the memory read-only.

    \b
    Examples:
      memcore get -p ./mem --limit 20
      memcore get -p ./mem --where '{"speaker": "Bob"}' --offset 20 --limit 20 --json
      memcore get -p ./mem --where-document '{"$contains": "Paris"}'
      memcore get -p ./mem 3f2a9c0e71b4d5a6
    """
    with open_memory(config, path, read_only=True) as memory:
        records = memory.get(list(ids) if ids else None, where=where, where_document=where_document, scope=scope, offset=offset, limit=limit)
    if as_json:
        echo_json([record_row(r) for r in records])
        return
    if not records:
        click.echo("No records.")
        return
    id_width = min(max(len(r.id) for r in records), 36)
    for r in records:
        shown_id = r.id if len(r.id) <= id_width else r.id[: id_width - 1] + "…"
        click.echo(f"{shown_id:<{id_width}}  {shorten(r.text, width)}")


@click.command("count")
@config_option()
@path_option("Collection directory (it must exist). Default: the settings' `path`.")
@where_options
@click.option("--index", "-i", "index", metavar="NAME", default=None, help="Count the members of this index only.")
@click.option("--json", "as_json", is_flag=True, help='Print {"count": n} as JSON.')
def count(
    config: Path | None,
    path: Path | None,
    where: dict[str, Any] | None,
    where_document: dict[str, Any] | None,
    scope: dict[str, Any] | None,
    index: str | None,
    as_json: bool,
) -> None:
    """Print how many records match the filters (all of them without one).

    \b
    Examples:
      memcore count -p ./mem
      memcore count -p ./mem --where-document '{"$contains": "Paris"}' --scope user_id=alice --json
    """
    with open_memory(config, path, read_only=True) as memory:
        n = memory.count(where=where, where_document=where_document, scope=scope, index=index)
    if as_json:
        echo_json({"count": n})
        return
    click.echo(str(n))


@click.command("delete")
@config_option()
@path_option("Collection directory (it must exist).", required=True)
@where_options
@click.option("--json", "as_json", is_flag=True, help='Print {"deleted": n} as JSON.')
@click.argument("ids", nargs=-1)
def delete(
    config: Path | None,
    path: Path,
    where: dict[str, Any] | None,
    where_document: dict[str, Any] | None,
    scope: dict[str, Any] | None,
    as_json: bool,
    ids: tuple[str, ...],
) -> None:
    """Delete records by IDS and/or every record matching the filters, in one commit.

    Needs IDS, --where, --where-document or --scope (nothing is deleted by accident; to
    empty the memory: --where '{}'). An unknown id, or one outside --scope, deletes
    nothing. --scope alone forgets the scope (as `memcore forget`). Goes through the
    declared service, like Memory.delete.

    \b
    Examples:
      memcore delete -p ./mem 3f2a9c0e71b4d5a6
      memcore delete -p ./mem --where-document '{"$contains": "draft"}' --json
      memcore delete -p ./mem --where '{"speaker": "Bob"}' --scope user_id=alice
    """
    if not ids and where is None and where_document is None and scope is None:
        raise CliError("delete needs IDS, --where, --where-document or --scope (to empty the memory: --where '{}')")
    with open_memory(config, path, must_exist=True) as memory:
        n = memory.delete(list(ids) if ids else None, where=where, where_document=where_document, scope=scope)
    if as_json:
        echo_json({"deleted": n})
        return
    click.echo(f"Deleted {n} record(s).")


@click.command("history")
@config_option()
@path_option("Collection directory (it must exist). Default: the settings' `path`.")
@scope_option("Read as this scope: another scope's record is unknown. user_id=u1 (repeatable), or a JSON object.")
@click.option("--json", "as_json", is_flag=True, help='Print a JSON list of versions: {"id", "seq", "op", "text", "metadata", "scope", "at"}.')
@click.option("--width", type=click.IntRange(min=20), default=100, show_default=True, help="Maximum width of the text column.")
@click.argument("record_id", metavar="ID")
def history(config: Path | None, path: Path | None, scope: dict[str, Any] | None, as_json: bool, width: int, record_id: str) -> None:
    """Print every version of record ID, oldest first: insert, update, delete.

    Deleted records keep their history; forgetting a scope erases it. Opens the memory
    read-only.

    \b
    Examples:
      memcore history -p ./mem 3f2a9c0e71b4d5a6
      memcore history -p ./mem --scope user_id=alice 3f2a9c0e71b4d5a6 --json
    """
    with open_memory(config, path, read_only=True) as memory:
        versions = memory.history(record_id, scope=scope)
    if as_json:
        echo_json(versions)
        return
    click.echo(f"{'seq':>6}  {'op':<6}  {'at (UTC)':<19}  text / metadata")
    for v in versions:
        click.echo(f"{v['seq']:>6}  {v['op']:<6}  {_when(v['at']):<19}  {_version_text(v, width)}")


def _version_text(version: dict[str, Any], width: int) -> str:
    """The text and metadata of one version as a table cell (a delete, or a deleted record's erased text, says so)."""
    if version["op"] == "delete":
        return "(deleted)"
    if version["text"] is None:
        return "(erased: the record was deleted)"
    shown = shorten(version["text"], width)
    return shown + (f"  {json.dumps(version['metadata'], ensure_ascii=False)}" if version["metadata"] else "")
