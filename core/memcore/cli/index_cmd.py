"""``memcore index list|add|drop|rebuild``: manage the indexes of a memory on disk.

Each subcommand opens the memory at ``--path`` with the settings it keeps about itself, or
with ``--config`` when given (then a declared index missing from the collection is
created and filled like in :func:`memcore.open`). Long work (filling, rebuilding) draws a progress bar on stderr.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from .._util.progress import use_progress
from ._common import config_option, path_option, CliError, echo_json, load_cli_settings, open_memory, open_settings, progress_bar, require_collection

CONFIG = config_option()
PATH = path_option("Collection directory.", required=True)
JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def parse_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as JSON when it parses (``3``, ``true``, ``["a"]``), else a string."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise click.BadParameter(f"expected KEY=VALUE, got {text!r}", param_hint="--option")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def _open_without(config: Path | None, path: Path, name: str) -> Any:
    """The memory at ``path`` for changing index ``name``: with ``--config``, its settings
    without that index (a build-time change it declares is what the command applies);
    without, the memory's own settings."""
    settings = load_cli_settings(config)
    require_collection(settings, path)
    if config is None:
        return open_memory(None, path)
    return open_settings(settings.model_copy(update={"indexes": {k: v for k, v in settings.indexes.items() if k != name}}), path)


@click.group("index")
def index_group() -> None:
    """List, add, drop or rebuild the indexes of a memory at --path.

    \b
      memcore index list    --path ./mem
      memcore index add     --path ./mem words --kind bm25 --option k1=1.5
      memcore index rebuild --path ./mem --config memcore.toml vector
      memcore index drop    --path ./mem words
    """


@index_group.command("list")
@CONFIG
@PATH
@JSON
def list_cmd(config: Path | None, path: Path, as_json: bool) -> None:
    """The indexes of the memory: name, kind, records and options."""
    settings = load_cli_settings(config)
    require_collection(settings, path)
    memory = open_memory(config, path)
    try:
        rows = memory.collection.list_indexes()
    finally:
        memory.close()
    if as_json:
        echo_json([{k: row[k] for k in ("name", "kind", "size", "config")} for row in rows])
        return
    if not rows:
        click.echo("(no index)")
    for row in rows:
        options = ", ".join(f"{k}={v!r}" for k, v in row["config"].items() if k != "kind")
        click.echo(f"{row['name']:<20} {row['kind']:<10} {row['size']:>8} record(s)  {options}")


@index_group.command("add")
@CONFIG
@PATH
@click.option("--kind", "-k", required=True, help="A registered index kind (see `memcore plugins`).")
@click.option("--option", "-o", "options", multiple=True, metavar="KEY=VALUE", help="An option of the kind (repeatable); VALUE is JSON or a string.")
@click.option("--populate/--no-populate", default=True, show_default=True, help="Fill the new index with every stored record.")
@JSON
@click.argument("name")
def add_cmd(config: Path | None, path: Path, kind: str, options: tuple[str, ...], populate: bool, as_json: bool, name: str) -> None:
    """Create index NAME of --kind over the stored records (filled unless --no-populate).

    An index added here stays in the collection; declare it in the settings file too
    (``[indexes.NAME]``) so that applications opening the memory expect it.
    """
    parsed = dict(parse_option(o) for o in options)
    started = time.perf_counter()
    memory = open_memory(config, path)
    try:
        if memory.collection.has_index(name):
            raise CliError(f"index {name!r} already exists; `memcore index rebuild {name}` or `memcore index drop {name}` first")
        memory.collection.create_index(name, kind, **parsed)
        with use_progress(progress_bar):
            added = memory.collection.populate_index(name) if populate else 0
    finally:
        memory.close()
    summary = {"name": name, "kind": kind, "records": added, "seconds": round(time.perf_counter() - started, 3)}
    if as_json:
        echo_json(summary)
    else:
        click.echo(f"Created index {name!r} ({kind}) with {added} record(s) in {summary['seconds']:.2f}s.")


@index_group.command("drop")
@CONFIG
@PATH
@JSON
@click.argument("name")
def drop_cmd(config: Path | None, path: Path, as_json: bool, name: str) -> None:
    """Remove index NAME and its files (the records stay in the store).

    An index still declared in the settings is re-created (and filled) on the next open.
    """
    memory = _open_without(config, path, name)
    try:
        memory.collection.drop_index(name)
    finally:
        memory.close()
    if as_json:
        echo_json({"dropped": name})
    else:
        click.echo(f"Dropped index {name!r}.")


@index_group.command("rebuild")
@CONFIG
@PATH
@JSON
@click.argument("name")
def rebuild_cmd(config: Path | None, path: Path, as_json: bool, name: str) -> None:
    """Rebuild index NAME from the store, with the options --config declares for it
    (without --config: with its stored options, e.g. to repair a broken index).

    This is how a build-time option (faiss factory, bm25 stemmer...) changes: edit the
    settings file, then rebuild; every record of the index is indexed again.
    """
    declared = dict(load_cli_settings(config).indexes.get(name) or {}) if config is not None else {}  # none: the stored definition
    memory = _open_without(config, path, name)
    started = time.perf_counter()
    try:
        collection = memory.collection
        if not collection.has_index(name):
            raise CliError(f"no index named {name!r} at {path}; indexes: {sorted(i['name'] for i in collection.list_indexes()) or '(none)'}")
        current = next(i for i in collection.list_indexes() if i["name"] == name)["kind"]
        declared.pop("populate", None)
        declared_kind = collection.registry.canonical("indexes", declared.pop("kind", current))  # an old spelling is the same kind
        if declared_kind != current:
            raise CliError(f"index {name!r} is a {current!r} index, the settings declare {declared_kind!r}: `memcore index drop {name}` first")
        with use_progress(progress_bar):
            count = collection.rebuild_index(name, **declared)
    finally:
        memory.close()
    summary = {"name": name, "records": count, "seconds": round(time.perf_counter() - started, 3)}
    if as_json:
        echo_json(summary)
    else:
        click.echo(f"Rebuilt index {name!r}: {count} record(s) in {summary['seconds']:.2f}s.")
