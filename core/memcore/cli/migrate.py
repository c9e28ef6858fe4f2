"""``memcore migrate``: copy a memory to another store (a directory, a PostgreSQL database) and verify the copy.

Each end is a memory directory (its store from ``--from-config`` / ``--to-config``, else the
``MEMCORE_*`` environment and the defaults: SQLite) or a database URL (``postgresql://…``:
the ``postgres`` store at that URL, in ``--from-schema`` / ``--to-schema``). A URL's password
is never printed, logged or written into the copy.

A directory target is built under a temporary name beside it and renamed into place once
the copy is verified (a failure leaves nothing at the target); a database target is marked
incomplete until then (``memcore.open`` refuses it; run again with ``--replace``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click

from .._plugins._secrets import redact_urls
from ..errors import ConfigError, MemcoreError, NotFoundError, ValidationError
from ._common import CliError, config_option, echo_json, note, progress_bar


@dataclass
class End:
    """One end of a migration: the store entry (secrets included) and the memory directory."""

    store: dict[str, Any]
    directory: Path | None
    label: str
    """How the end is shown (no password)."""


@dataclass(frozen=True)
class Request:
    """What ``memcore migrate`` was asked: its options, as given on the command line."""

    source: str
    target: str
    config: Path | None
    to_config: Path | None
    from_schema: str | None
    to_schema: str | None
    replace: bool
    sample: int
    batch_size: int
    drop_indexes: tuple[str, ...] = ()


def _end(value: str, config: Path | None, schema: str | None, role: str) -> End:
    from ._common import directory_settings, load_cli_settings

    if "://" in value:
        kind = _url_store_kind(urlsplit(value).scheme.lower(), role)
        base = dict(load_cli_settings(config).store) if config is not None else {}
        store = {**(base if base.get("kind") == kind else {}), "kind": kind, "url": value}
        store.pop("url_env", None)
        if schema is not None:
            store["schema"] = schema
        shown = redact_urls(value) + (f" (schema {store['schema']})" if "schema" in store else "")
        return End(store, None, shown)
    store = dict(load_cli_settings(config).store if config is not None else directory_settings(value).store)  # a directory names a non-default store
    if schema is not None:
        store["schema"] = schema
    return End(store, Path(value), value)


def _url_store_kind(scheme: str, role: str) -> str:
    """The store kind whose config declares ``scheme`` among its ``url_schemes``."""
    from .._plugins._host import get_registry

    stores = get_registry().entries["stores"]
    for name, registration in sorted(stores.items()):
        if scheme in registration.config_model.url_schemes:
            return name
    known = sorted({f"{s}://" for registration in stores.values() for s in registration.config_model.url_schemes})
    raise ConfigError(f"a memory directory or a store URL ({', '.join(known) or 'no installed store takes URLs'}), not a {scheme}:// URL", location=f"--{role}")


def _open(end: End, directory: Path | None, *, read_only: bool) -> tuple[Any, Any]:
    """The store of ``end`` at ``directory``: ``(store, config)``."""
    from .._plugins._host import get_registry

    entry = dict(end.store)
    registration = get_registry().get("stores", entry.pop("kind", "sqlite"), location="store.kind")
    if read_only and "read_only" in registration.config_model.model_fields:
        entry["read_only"] = True
    config = registration.parse_config(entry, "store")
    return registration.build(config, directory), config


def _store_document(end: End) -> dict[str, Any]:
    """The target's store entry as the copied settings document keeps it (no secrets)."""
    from .._plugins._host import get_registry
    from ..api._stored import store_document

    return store_document(end.store, get_registry())


def _print(report: Any, source: End, target: End) -> None:
    data = report.as_dict()
    click.echo(f"migrated {data['records']} records from {source.label} to {target.label} in {data['seconds']:.1f} s")
    vectors = ", ".join(f"{space} {n}" for space, n in data["vectors"].items()) or "none"
    click.echo(f"  vectors: {vectors}; links: {data['links']}; state keys: {data['state_keys']}")
    click.echo(f"  history: {data['history']} versions" if data["history"] is not None else f"  history: not copied ({data['history_note']})")
    for name, counts in data["indexes"].items():
        click.echo(f"  index {name}: {counts['source']} -> {counts['target']} members")
    for entry in data["scopes"][:20]:
        shown = ", ".join(f"{k}={v}" for k, v in entry["scope"].items()) or "(all)"
        click.echo(f"  scope {shown}: {entry['source']} -> {entry['target']}")
    if len(data["scopes"]) > 20:
        click.echo(f"  ... {len(data['scopes']) - 20} more scopes, all equal")
    click.echo(f"  sample: {data['sample']['checked']} records compared, {len(data['sample']['mismatched'])} differ; verified: {data['verified']}")


@click.command("migrate")
@click.option("--from", "source", required=True, metavar="DIR|URL", help="The memory to copy: its directory, or a postgresql:// URL.")
@click.option("--to", "target", required=True, metavar="DIR|URL", help="Where to copy it: a new (or empty) memory directory, or a postgresql:// URL.")
@config_option(help="Settings file whose [store] section opens the source directory (default: MEMCORE_* environment, else SQLite).")
@click.option("--to-config", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Settings file whose [store] section the target gets.")
@click.option("--from-schema", default=None, help="PostgreSQL schema of the source memory (default: the store's, 'memcore').")
@click.option("--to-schema", default=None, help="PostgreSQL schema of the target memory (default: the store's, 'memcore').")
@click.option("--replace", is_flag=True, help="Replace a target that is not empty (its records and state are deleted).")
@click.option("--sample", type=click.IntRange(min=0), default=200, show_default=True, help="Records compared field by field after the copy.")
@click.option("--batch-size", type=click.IntRange(min=1, max=100_000), default=500, show_default=True, help="Records per write batch.")
@click.option(
    "--drop-index",
    "drop_indexes",
    multiple=True,
    metavar="NAME",
    help="Leave this index out of the copy (definition and membership); repeatable. For an index that cannot live in the target's store (pgvector to a directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
def migrate(
    source: str,
    target: str,
    config: Path | None,
    to_config: Path | None,
    from_schema: str | None,
    to_schema: str | None,
    replace: bool,
    sample: int,
    batch_size: int,
    drop_indexes: tuple[str, ...],
    as_json: bool,
) -> None:
    """Copy a memory to another store and verify the copy.

    \b
    Copies every record (ids, text, metadata, scopes, timestamps, vectors, links), index
    membership and definitions, service state and the stored settings, and the history
    when both stores keep one; the target's indexes are rebuilt from its store when it is
    first opened. Then compares the counts per scope and per index, and a random sample of
    records field by field (vectors byte for byte).

    \b
      memcore migrate --from ./my-memory --to postgresql://user@db.example/memcore --to-schema alice
      memcore migrate --from postgresql://user@db.example/memcore --to ./my-memory-again
      memcore migrate --from ./my-memory --to ./compact --to-config sqlite-no-history.toml

    \b
    An index whose data lives in its store (pgvector, pg_text in PostgreSQL) cannot be
    copied to another kind of store: the copy is refused before anything is written, naming
    it; --drop-index NAME leaves it out (declare another kind for it when opening the copy).
    """
    try:
        report, src, dst = _run(Request(source, target, config, to_config, from_schema, to_schema, replace, sample, batch_size, drop_indexes))
    except MemcoreError as exc:
        raise CliError(redact_urls(str(exc))) from None
    except OSError as exc:
        raise click.ClickException(redact_urls(str(exc))) from None
    if as_json:
        echo_json({"from": src.label, "to": dst.label, **report.as_dict()})
    else:
        _print(report, src, dst)


def _run(request: Request) -> tuple[Any, End, End]:
    from .._util.progress import use_progress
    from .._plugins._host import get_registry
    from ..api._migrate import check_drop, clear_store, indexes_out_of_place, is_empty, migrate_store
    from ..api._store_file import write_store_entry

    src, dst = _end(request.source, request.config, request.from_schema, "from"), _end(request.target, request.to_config, request.to_schema, "to")
    replace, sample, batch_size = request.replace, request.sample, request.batch_size
    if src.directory is not None and dst.directory is not None and src.directory.resolve() == dst.directory.resolve():
        raise ValidationError("--from and --to are the same directory")
    if src.directory is not None and not src.directory.is_dir():
        raise NotFoundError(f"no memory at {src.directory} (not a directory)")
    work: Path | None = None
    writing = False
    source_store, _ = _open(src, src.directory, read_only=True)
    try:
        if is_empty(source_store):
            raise NotFoundError(f"no memory at {src.label} (its store holds no record and no state)")
        misplaced = indexes_out_of_place(source_store, str(dst.store.get("kind", "sqlite")), get_registry(), check_drop(source_store, request.drop_indexes))
        if misplaced:
            raise ConfigError(
                f"the target's store ({dst.store.get('kind', 'sqlite')}) cannot hold {'; '.join(misplaced)}: "
                f"leave {'it' if len(misplaced) == 1 else 'them'} out with --drop-index NAME, or copy to a store of that kind",
                location="--to",
            )
        work = _work_dir(dst, replace)
        target_store, _ = _open(dst, work, read_only=False)
        try:
            if not is_empty(target_store):
                if not replace:
                    raise ValidationError(f"the target {dst.label} holds a memory already: give an empty target, or --replace to delete it first")
                note(f"replacing the memory at {dst.label}")
                writing = work is None or target_store.shared
                clear_store(target_store)
            writing = work is None or target_store.shared  # a database: a failure leaves its mark there
            with use_progress(progress_bar):
                report = migrate_store(
                    source_store,
                    target_store,
                    settings_store=_store_document(dst),
                    source_label=src.label,
                    batch_size=batch_size,
                    sample=sample,
                    drop_indexes=request.drop_indexes,
                )
        finally:
            target_store.close()
    except BaseException:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
        if writing:
            note(f"the target {dst.label} may hold part of the copy: it is marked incomplete (memcore refuses to open it); run again with --replace")
        raise
    finally:
        source_store.close()
    if work is not None and dst.directory is not None:
        named = _store_document(dst)
        write_store_entry(work, {k: v for k, v in named.items() if k != "omitted"}, list(named.get("omitted", [])))  # --path alone finds it
        _move_into_place(work, dst.directory)
    return report, src, dst


def _work_dir(end: End, replace: bool) -> Path | None:
    """The temporary directory a directory target is built in (None for a URL target);
    refuses a non-empty target directory unless ``replace``."""
    if end.directory is None:
        return None
    final = end.directory
    if final.exists() and (not final.is_dir() or any(final.iterdir())) and not replace:
        raise ValidationError(f"the target directory {final} is not empty: give a new or empty directory, or --replace to replace its memory")
    final.parent.mkdir(parents=True, exist_ok=True)
    work = final.parent / f".{final.name}.migrating-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    return work


def _move_into_place(work: Path, final: Path) -> None:
    """Rename the finished copy to the target's name (the replaced memory is deleted after)."""
    old = None
    if final.exists():
        old = final.parent / f".{final.name}.replaced-{os.getpid()}"
        final.rename(old)
    work.rename(final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    note(f"wrote {final}")
