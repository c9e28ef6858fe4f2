"""``memcore info``: what a collection directory holds, read straight from its store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ..api._stored import KEY, NAMESPACE
from ..errors import NotFoundError
from ._common import config_option, path_option, dir_bytes, echo_json, human_bytes, load_cli_settings


def _saved_manifest(directory: Path) -> dict[str, Any] | None:
    try:
        manifest: dict[str, Any] = json.loads((directory / "index.json").read_text())
        return manifest
    except (OSError, ValueError):
        return None


def collect_info(path: Path, filename: str = "store.sqlite3") -> dict[str, Any]:
    """Indexes, counts, kinds and on-disk sizes of the SQLite collection at ``path``.

    Needs no settings: the store is opened read-only (no writer lock), so this also
    works while another process writes.
    """
    from ..stores._sqlite import SQLiteStore, SQLiteStoreConfig

    if not path.is_dir():
        raise NotFoundError(f"{path} is not a directory; give the collection directory with --path")
    if not (path / filename).is_file():
        raise NotFoundError(f"no memcore collection at {path} (no {filename}); create one with `memcore ingest` or memcore.open(path=...)")
    store = SQLiteStore(path, SQLiteStoreConfig(read_only=True, filename=filename))
    try:
        return _read(store, path, filename)
    finally:
        store.close()


def _read(store: Any, path: Path, filename: str) -> dict[str, Any]:
    """The report, from an open store."""
    definitions = store.state_items("indexes")
    spaces = store.state_items("spaces")
    indexes = []
    for name, definition in definitions.items():
        directory = path / "indexes" / name
        saved = _saved_manifest(directory)
        indexes.append(
            {
                "name": name,
                "kind": definition.get("kind"),
                "config": definition.get("config", {}),
                "count": store.count(index=name),
                "bytes": dir_bytes(directory),
                "seq": saved.get("seq") if saved else None,
                "saved_count": saved.get("count") if saved else None,
            }
        )
    store_bytes = store.size_bytes()
    return {
        "path": str(path),
        "store": {"kind": "sqlite", "file": filename, "bytes": store_bytes},
        "records": store.count(),
        "seq": store.last_seq(),
        "spaces": spaces,
        "settings": store.get_state(NAMESPACE, KEY),
        "indexes": indexes,
        "bytes": store_bytes + sum(i["bytes"] for i in indexes),
    }


@click.command("info")
@path_option("Collection directory.", required=True)
@config_option("Settings file: only needed for a non-default store file name, or to add live index statistics.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@click.option(
    "--check",
    "check",
    is_flag=True,
    help=(
        "Also run SQLite's integrity check, load every index read-only and (with --config) check the service's state "
        "against its records; exit status 1 when the store is damaged, an index is broken or the service state is inconsistent."
    ),
)
def info(path: Path, config: Path | None, as_json: bool, check: bool) -> None:
    """Show a collection: records, embedding spaces, the settings it keeps about itself,
    indexes (kind, count, size on disk, saved sequence number) and store size.

    Works without a settings file: the SQLite store is opened read-only. With --config
    the memory is also built (read-only) and each index reports its live statistics;
    that checks that the settings still match the collection.
    """
    filename = "store.sqlite3"
    settings = None
    if config is not None:
        settings = load_cli_settings(config, read_only=True)
        store = dict(settings.store)
        if store.get("kind") != "sqlite":
            raise NotFoundError(f"memcore info reads SQLite collections; {config} declares store kind {store.get('kind')!r}")
        filename = store.get("filename", filename)
    data = collect_info(path, filename)
    if check:
        from ..stores._sqlite import SQLiteStore, SQLiteStoreConfig
        from .check import check_collection

        sqlite_store = SQLiteStore(path, SQLiteStoreConfig(read_only=True, filename=filename))
        try:
            data["check"] = check_collection(sqlite_store, path)
        finally:
            sqlite_store.close()
    if settings is not None:
        from ..api import _open as api

        with api.open(settings, path=path) as memory:
            live = {entry["name"]: entry for entry in memory.collection.info()["indexes"]}
            if check:
                problems = memory.check_service()
                data["check"]["service"] = {"kind": dict(settings.service).get("kind", "default"), "problems": [p.as_dict() for p in problems]}
                data["check"]["ok"] = data["check"]["ok"] and not problems
        for entry in data["indexes"]:
            extra = live.get(entry["name"])
            if extra is not None:
                entry.update({"size": extra["size"], "score": extra["score"], "requires": extra["requires"], "stats": extra["stats"]})
        data["config"] = str(config)
    if as_json:
        echo_json(data)
        _exit_on_failed_check(data)
        return
    click.echo(f"Collection {data['path']}")
    click.echo(f"  records: {data['records']}   seq: {data['seq']}   store: {data['store']['file']} ({human_bytes(data['store']['bytes'])})")
    click.echo(f"  on disk: {human_bytes(data['bytes'])}")
    if data["spaces"]:
        click.echo("  spaces:")
        for name, space in data["spaces"].items():
            model = space.get("model_id") or space.get("embedder") or "-"
            click.echo(f"    {name}: dim {space.get('dim')}, embedder {space.get('embedder')} ({model})")
    click.echo(f"  settings: {describe_settings(data['settings'])}")
    if not data["indexes"]:
        click.echo("  indexes: (none)")
        _print_check(data)
        return
    click.echo("  indexes:")
    width = max(len(i["name"]) for i in data["indexes"])
    for entry in data["indexes"]:
        options = ", ".join(f"{k}={v}" for k, v in entry["config"].items() if k != "kind")
        saved = f"saved at seq {entry['seq']}" if entry["seq"] is not None else "not saved yet"
        click.echo(
            f"    {entry['name']:<{width}}  {entry['kind']:<10} {entry['count']:>8} records  {human_bytes(entry['bytes']):>10}  {saved}"
            + (f"  [{options}]" if options else "")
        )
    _print_check(data)


def describe_settings(document: Any) -> str:
    """One line on the settings the memory keeps about itself (what ``--path`` alone opens it with)."""
    if not isinstance(document, dict):
        return "none kept (made by an older memcore: opening it for writing keeps them)"
    pipeline = document.get("pipeline")
    if isinstance(pipeline, list):
        pipeline = "+".join(str(stage.get("kind")) for stage in pipeline if isinstance(stage, dict))
    elif isinstance(pipeline, dict):
        pipeline = f"{pipeline.get('preset', 'basic')} (with overrides)"
    service = (document.get("service") or {}).get("kind")
    omitted = f"; secrets not kept: {', '.join(document['omitted'])}" if document.get("omitted") else ""
    return f"kept in the memory (store {(document.get('store') or {}).get('kind')}, pipeline {pipeline}, service {service}{omitted})"


def _print_check(data: dict[str, Any]) -> None:
    if "check" in data:
        result = data["check"]
        click.echo(
            f"  check: {'ok' if result['ok'] else 'PROBLEMS'}; SQLite integrity: {'ok' if not result['integrity'] else '; '.join(result['integrity'][:5])}"
        )
        for name, entry in result["indexes"].items():
            click.echo(f"    {name}: {entry['status']}" + (f" ({entry['error']})" if entry.get("error") else ""))
        service = result.get("service")
        if service is None:
            click.echo("    service: not checked (give --config: the settings name the service)")
        else:
            problems = service["problems"]
            click.echo(f"    service {service['kind']}: {'ok' if not problems else f'{len(problems)} problem(s); fix with `memcore service repair`'}")
            for problem in problems[:20]:
                click.echo(f"      {problem['kind']}: {problem['message']}" + (f" [scope {problem['scope']}]" if problem["scope"] else ""))
    _exit_on_failed_check(data)


def _exit_on_failed_check(data: dict[str, Any]) -> None:
    if "check" in data and not data["check"]["ok"]:
        raise SystemExit(1)
