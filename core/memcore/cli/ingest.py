"""``memcore ingest``: insert a JSON Lines file into a memory declared by a settings file."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
import numpy as np

from ..errors import DuplicateIdError, MemcoreError, ValidationError
from .._util.jsonl import read_jsonl
from ..model._record import Record, Scope
from ..model._binding import stamp_scope
from ..services._service import Service
from ..services._service import DefaultService
from ._common import config_option, path_option, scope_option, CliError, echo_json, note, open_memory, progress

RECORD_FIELDS = frozenset({"id", "text", "metadata", "scope", "links", "vectors"})


def attach_vectors(records: list[Record], lines: int, vectors_file: Path, space: str) -> None:
    """Give record ``i`` row ``i`` of a ``.npy`` matrix as its vector of ``space``.

    The file must hold one row per record (2-d float array, no pickle); a record whose
    line already carries a vector of that space is an error.
    """
    try:
        matrix = np.load(vectors_file, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValidationError(f"{vectors_file}: not a .npy array ({exc})") from None
    if matrix.ndim != 2 or matrix.dtype.kind not in "fiu":
        raise ValidationError(f"{vectors_file}: need a 2-d numeric array (rows = records), got shape {matrix.shape} of {matrix.dtype}")
    if matrix.shape[0] != len(records) or lines != len(records):
        raise ValidationError(
            f"{vectors_file} has {matrix.shape[0]} row(s) for {lines} line(s) ({len(records)} unique record(s)); give one row per line, no duplicate lines"
        )
    for record, row in zip(records, matrix):
        if space in record.vectors:
            raise ValidationError(f"record {record.id!r} has a vector of {space!r} in the JSON line and in {vectors_file}")
        record.vectors[space] = np.ascontiguousarray(row, dtype=np.float32)


def check_vectors(records: list[Record], spaces: Any) -> None:
    """Every given vector belongs to a declared space, with its dimension and finite values
    (checked before anything is inserted)."""
    for record in records:
        for name, vector in record.vectors.items():
            if name not in spaces:
                raise ValidationError(f"record {record.id!r} has a vector for undeclared space {name!r}; spaces: {sorted(spaces)}")
            spaces[name].check_vector(vector, f"vector {name!r} of record {record.id!r}")
            if not np.isfinite(vector).all():
                raise ValidationError(f"vector {name!r} of record {record.id!r} has NaN or infinite values")


def ingest_service(memory: Any, indexes: tuple[str, ...]) -> Service:
    """The service the records go through: the declared one, or with ``--index`` the
    ``default`` service writing to those indexes (another service places records itself)."""
    service: Service = memory.service
    if not indexes:
        return service
    if type(service) is not DefaultService:
        kind = dict(memory.settings.service).get("kind")
        raise CliError(
            f"--index writes around the {kind!r} service, which decides itself where records go; "
            "drop --index, or ingest with settings whose service is `default`"
        )
    config = service.config.model_copy(update={"indexes": list(indexes)})
    return DefaultService(config, memory.collection, memory.pipeline)


def target_indexes(memory: Any, service: Service) -> list[str]:
    """The indexes new records can go to through ``service``."""
    if isinstance(service, DefaultService):
        return list(service.config.indexes or [entry["name"] for entry in memory.collection.list_indexes()])
    return sorted(type(service).required_indexes(service.config))


def read_records(path: Path) -> tuple[list[Record], int]:
    """Parse and validate a whole JSON Lines file before anything is inserted.

    Each non-blank line is ``{"id"?, "text", "metadata"?, "scope"?, "links"?, "vectors"?}``
    (``vectors``: ``{space: [floats]}``, precomputed embeddings). The first bad line
    raises :class:`ValidationError` naming its line number; so does a second record that
    reuses an id with different content. Returns the unique records (file order) and the
    number of non-blank lines.
    """
    records: dict[str, Record] = {}
    first_line: dict[str, int] = {}
    lines = 0
    for number, where, item in read_jsonl(path):
        lines += 1
        unknown = sorted(set(item) - RECORD_FIELDS)
        if unknown:
            raise ValidationError(f"{where}: unknown field(s) {unknown}; a record has id, text, metadata, scope, links, vectors")
        if "text" not in item:
            raise ValidationError(f'{where}: missing required field "text"')
        try:
            record = Record.create(
                item["text"],
                id=item.get("id"),
                metadata=item.get("metadata"),
                scope=item.get("scope"),
                links=item.get("links") or (),
                vectors=item.get("vectors"),
            )
        except MemcoreError as exc:
            raise ValidationError(f"{where}: {exc}") from None
        previous = records.get(record.id)
        if previous is not None:
            if not previous.same_content(record):
                raise DuplicateIdError(f"{where}: id {record.id!r} was already used on line {first_line[record.id]} for a different record")
            continue
        records[record.id] = record
        first_line[record.id] = number
    return list(records.values()), lines


@click.command("ingest")
@config_option()
@path_option("Collection directory (created when missing). Default: the settings' `path`.")
@click.option(
    "--index",
    "-i",
    "indexes",
    multiple=True,
    metavar="NAME",
    help="Insert into this index only (repeatable; `default` service only). Default: the service's indexes.",
)
@scope_option("Give records without a scope this one (user_id=alice, repeatable); a record of another scope is an error.")
@click.option("--batch-size", "-b", type=click.IntRange(min=1), default=256, show_default=True, help="Records per insert batch.")
@click.option(
    "--vectors",
    "vectors_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A .npy matrix of precomputed embeddings, row i for line i (instead of embedding the texts).",
)
@click.option("--space", "space", default=None, metavar="NAME", help="The space the --vectors rows belong to. Default: the only declared space.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@click.argument("input_file", metavar="INPUT.jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def ingest(
    config: Path | None,
    path: Path | None,
    indexes: tuple[str, ...],
    scope: dict[str, Any] | None,
    batch_size: int,
    vectors_file: Path | None,
    space: str | None,
    as_json: bool,
    input_file: Path,
) -> None:
    """Insert the records of INPUT.jsonl into the memory at --path.

    \b
    One JSON object per line (blank lines are skipped):
      {"id": "t1", "text": "Alice went to Lisbon", "metadata": {"speaker": "Alice"}}
      {"text": "No id: it is derived from the content", "scope": {"user_id": "u1"}}

    The whole file is validated first (JSON, required "text", known fields, metadata,
    ids, vectors, scopes): on the first bad line nothing is inserted and the error names
    the line. Precomputed embeddings come as a "vectors" field ({"vectors": {"default":
    [0.1, ...]}}) or as --vectors FILE.npy (one row per line, for --space); given vectors
    are not recomputed, and their dimension is checked against the space first. Then the
    new records go in batches through the declared service (Service.insert_many), which
    decides where they go: the `default` service writes each batch atomically into its
    indexes (or the --index ones). Records already stored are not sent again, so
    re-ingesting the same file is a no-op; an id that is stored with different content is
    refused before anything is inserted. With --scope, records without a scope get it.
    """
    started = time.perf_counter()
    records, lines = read_records(input_file)
    if not records:
        raise CliError(f"{input_file} holds no records")
    if space is not None and vectors_file is None:
        raise CliError("--space names the space of --vectors; give --vectors FILE.npy too")
    bound = Scope.coerce(scope)
    stamp_scope(records, bound, "--scope")
    memory = open_memory(config, path)
    inserted = 0
    try:
        collection = memory.collection
        service = ingest_service(memory, indexes)
        if vectors_file is not None:
            if space is None:
                if len(collection.spaces) != 1:
                    raise CliError(f"say which space the --vectors rows belong to: --space NAME (spaces: {sorted(collection.spaces)})")
                space = next(iter(collection.spaces))
            attach_vectors(records, lines, vectors_file, space)
        check_vectors(records, collection.spaces)
        if dict(memory.settings.store).get("kind") == "memory":
            note('note: the store is in-memory (store.kind = "memory"); nothing is kept after this command')
        stored = {r.id: r for r in collection.get_many([r.id for r in records]) if r is not None}
        clashes = [r.id for r in records if r.id in stored and not r.same_content(stored[r.id])]
        if clashes:
            raise DuplicateIdError(
                f"{len(clashes)} record(s) of {input_file} reuse stored ids with different content "
                f"(e.g. {clashes[:3]}); nothing was inserted. Change the ids or update those records through the API."
            )
        fresh = [r for r in records if r.id not in stored]
        atomic = isinstance(service, DefaultService)
        try:
            with collection.scoped(bound):  # what the service writes and keeps belongs to --scope
                for batch in progress(fresh, "Inserting", batch=batch_size) if fresh else ():
                    service.insert_many(list(batch))
                    inserted += len(batch)
        except MemcoreError as exc:
            done = f"{inserted} new record(s) were inserted before this error" if inserted else "nothing was inserted before this batch"
            how = f"each batch of {batch_size} is all-or-nothing" if atomic else f"through the {service.config.kind!r} service a batch may be partly inserted"
            raise CliError(f"{exc} ({done}; {how})") from None
        total = collection.count()
        in_scope = collection.count(scope=bound) if bound is not None else None
        used = target_indexes(memory, service)
        kind = str(service.config.kind)
    finally:
        memory.close()
    seconds = round(time.perf_counter() - started, 3)
    summary: dict[str, Any] = {
        "inserted": inserted,
        "records": len(records),
        "lines": lines,
        "existing": len(records) - inserted,
        "service": kind,
        "indexes": used,
        "count": total,
        "seconds": seconds,
    }
    if bound is not None:
        summary["scope"] = bound.as_dict()
        summary["scope_count"] = in_scope
    if as_json:
        echo_json(summary)
        return
    extra = f", {summary['existing']} already stored" if summary["existing"] else ""
    dupes = f" ({lines - len(records)} duplicate line(s) skipped)" if lines != len(records) else ""
    via = "" if kind == "default" else f" through the {kind} service"
    click.echo(f"Inserted {inserted} of {len(records)} record(s){extra}{dupes} into {', '.join(used) or '(no index)'}{via} in {seconds:.2f}s.")
    held = f" The scope {json.dumps(bound.as_dict(), ensure_ascii=False)} holds {in_scope}." if bound is not None else ""
    click.echo(f"The collection now holds {total} record(s).{held}")
