"""``memcore ingest``: insert a JSON Lines file into a memory declared by a settings file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from ..errors import DuplicateIdError, MemcoreError, ValidationError
from ..jsonl import read_jsonl
from ..records import Record
from ._common import CliError, echo_json, note, open_memory, progress

RECORD_FIELDS = frozenset({"id", "text", "metadata", "scope", "links"})


def read_records(path: Path) -> tuple[list[Record], int]:
    """Parse and validate a whole JSON Lines file before anything is inserted.

    Each non-blank line is ``{"id"?, "text", "metadata"?, "scope"?}``. The first bad line
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
            raise ValidationError(f"{where}: unknown field(s) {unknown}; a record has id, text, metadata, scope, links")
        if "text" not in item:
            raise ValidationError(f"{where}: missing required field \"text\"")
        try:
            record = Record.create(
                item["text"], id=item.get("id"), metadata=item.get("metadata"), scope=item.get("scope"), links=item.get("links") or ()
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
@click.option("--config", "-c", "config", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Settings file (TOML/YAML) declaring the memory. Default: MEMCORE_* environment and the built-in defaults.")
@click.option("--path", "-p", "path", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Collection directory (created when missing). Default: the settings' `path`.")
@click.option("--index", "-i", "indexes", multiple=True, metavar="NAME",
              help="Insert into this index only (repeatable). Default: every declared index.")
@click.option("--batch-size", "-b", type=click.IntRange(min=1), default=256, show_default=True,
              help="Records per atomic insert batch.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@click.argument("input_file", metavar="INPUT.jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def ingest(config: Path | None, path: Path | None, indexes: tuple[str, ...], batch_size: int, as_json: bool, input_file: Path) -> None:
    """Insert the records of INPUT.jsonl into the memory at --path.

    \b
    One JSON object per line (blank lines are skipped):
      {"id": "t1", "text": "Alice went to Lisbon", "metadata": {"speaker": "Alice"}}
      {"text": "No id: it is derived from the content", "scope": {"user_id": "u1"}}

    The whole file is validated first (JSON, required "text", known fields, metadata,
    ids): on the first bad line nothing is inserted and the error names the line. Then
    records go in batches (each batch atomic) through Collection.insert. Re-ingesting the
    same file is a no-op; an id that is stored with different content is refused before
    anything is inserted.
    """
    started = time.perf_counter()
    records, lines = read_records(input_file)
    if not records:
        raise CliError(f"{input_file} holds no records")
    memory = open_memory(config, path)
    inserted = 0
    try:
        collection = memory.collection
        if dict(memory.settings.store).get("kind") == "memory":
            note("note: the store is in-memory (store.kind = \"memory\"); nothing is kept after this command")
        targets = list(indexes) or None
        stored = {r.id: r for r in collection.get_many([r.id for r in records]) if r is not None}
        clashes = [r.id for r in records if r.id in stored and not r.same_content(stored[r.id])]
        if clashes:
            raise DuplicateIdError(
                f"{len(clashes)} record(s) of {input_file} reuse stored ids with different content "
                f"(e.g. {clashes[:3]}); nothing was inserted. Change the ids or update those records through the API."
            )
        try:
            for batch in progress(records, "Inserting", batch=batch_size):
                collection.insert(list(batch), indexes=targets)
                inserted += sum(1 for r in batch if r.id not in stored)
        except MemcoreError as exc:
            done = f"{inserted} new record(s) were inserted before this error" if inserted else "nothing was inserted"
            raise CliError(f"{exc} ({done}; each batch of {batch_size} is all-or-nothing)") from None
        total = collection.count()
        used = targets or [entry["name"] for entry in collection.list_indexes()]
    finally:
        memory.close()
    seconds = round(time.perf_counter() - started, 3)
    summary: dict[str, Any] = {
        "inserted": inserted,
        "records": len(records),
        "lines": lines,
        "existing": len(records) - inserted,
        "indexes": used,
        "count": total,
        "seconds": seconds,
    }
    if as_json:
        echo_json(summary)
        return
    extra = f", {summary['existing']} already stored" if summary["existing"] else ""
    dupes = f" ({lines - len(records)} duplicate line(s) skipped)" if lines != len(records) else ""
    click.echo(f"Inserted {inserted} of {len(records)} record(s){extra}{dupes} into {', '.join(used) or '(no index)'} in {seconds:.2f}s.")
    click.echo(f"The collection now holds {total} record(s).")
