"""The store a memory directory names, so that ``memcore.open(path=P)`` finds it.

A memory keeps its settings in its store (:mod:`memcore.api._stored`), so the store must be
found before they can be read. The default store (SQLite in the directory) is found by
looking; any other store entry (a PostgreSQL store, a SQLite file with another name) is
written to ``<memory>/store.json`` when the memory is opened for writing: the entry without
its secrets (a URL with a password, a field its config marks secret), the places of those
left out under ``omitted``. Reopening by path alone then opens that store; a secret left
out must be given again (environment or arguments), never replaced by a default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from .._util.atomic import atomic_write_json
from ..errors import CorruptError
from ._stored import secrets_needed

__all__ = ["FILENAME", "read_store_entry", "check_store_secrets", "write_store_entry"]

FILENAME = "store.json"
"""The file in a memory directory that names its store."""

FORMAT = 1
"""The file's format version."""

DEFAULT_ENTRY: dict[str, Any] = {"kind": "sqlite"}
"""The store entry a directory without the file has."""


def read_store_entry(directory: Path | None) -> tuple[dict[str, Any], list[str]] | None:
    """The store entry ``directory`` names and the places of its omitted secrets; None
    when the directory names none (a new memory, or one on the default store)."""
    if directory is None:
        return None
    path = Path(directory) / FILENAME
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CorruptError(f"{path} cannot be read ({exc}): it names the memory's store; restore it or open with --config") from exc
    if not isinstance(document, Mapping) or not isinstance(document.get("store"), Mapping) or not isinstance(document["store"].get("kind"), str):
        raise CorruptError(f"{path} does not name a store (expected {{'format': 1, 'store': {{'kind': ...}}}}): restore it or open with --config")
    omitted = document.get("omitted") or []
    return dict(document["store"]), [str(place) for place in omitted]


def check_store_secrets(omitted: list[str], given: Mapping[str, Any]) -> None:
    """Refuse to open the named store while a secret it was left without is not given again
    (``given``: the store entry the environment and arguments make) — never a default in its
    place (an embedded server instead of the URL). The store's secrets are asked for first:
    the rest of what a memory keeps is read from the store."""
    missing = [place for place in omitted if given.get(place.split(".", 1)[-1]) is None]
    if missing:
        raise secrets_needed(missing)


def write_store_entry(directory: Path | None, entry: Mapping[str, Any], omitted: list[str]) -> None:
    """Name ``entry`` (already without its secrets) in ``directory``; nothing is written for
    the default store in a directory that names none, or when the file already says it."""
    if directory is None:
        return
    damaged = False
    try:
        current = read_store_entry(directory)
    except CorruptError:  # the memory opened with full settings: they name the store again
        current, damaged = None, True
    if current is None and not damaged and dict(entry) == DEFAULT_ENTRY:
        return
    document: dict[str, Any] = {"format": FORMAT, "store": dict(entry)}
    if omitted:
        document["omitted"] = list(omitted)
    if current == (document["store"], list(omitted)):
        return
    Path(directory).mkdir(parents=True, exist_ok=True)  # a store in a database makes no directory of its own
    atomic_write_json(Path(directory) / FILENAME, document)
