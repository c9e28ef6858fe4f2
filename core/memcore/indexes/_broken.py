"""Placeholders for an index that could not be built, loaded or rebuilt.

A failure of one index never blocks opening the memory: the collection keeps a handle
whose index is an :class:`UnavailableIndex` (searching it raises
:class:`~memcore.errors.BrokenIndexError` naming it), whose definition is the one the
store holds (:class:`StoredConfig`, kept verbatim), and whose files are left untouched
until the index is rebuilt or dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Collection as AbstractSet, Mapping, Sequence

from pydantic import ConfigDict

from ..errors import BrokenIndexError
from ._index import Index
from ..model._query import Hit
from ..model._query import Query
from ..model._record import Record
from .._plugins._registry import ComponentConfig

__all__ = ["StoredConfig", "UnavailableIndex", "describe_failure", "saved_seq"]


class StoredConfig(ComponentConfig):
    """An index definition as the store holds it, unvalidated (its kind may be unknown)."""

    model_config = ConfigDict(extra="allow", frozen=True)


class UnavailableIndex(Index):
    """Stands in for a broken index: writes are ignored (membership stays in the store and
    the index is rebuilt from it), reads raise :class:`BrokenIndexError`, nothing is saved."""

    score_name = "unavailable"

    def __init__(self, name: str, reason: str):
        self.name = name
        self.reason = reason

    def _fail(self) -> BrokenIndexError:
        return BrokenIndexError(self.name, self.reason)

    def add(self, records: Sequence[Record]) -> None:
        """Ignored: the store keeps the membership; a rebuild adds the records."""

    def remove(self, ids: Sequence[str]) -> None:
        """Ignored (see :meth:`add`)."""

    def validate_query(self, query: Query) -> None:
        raise self._fail()

    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        raise self._fail()

    def __len__(self) -> int:
        return 0

    def save(self, directory: Path) -> None:
        raise self._fail()

    def load(self, directory: Path) -> None:
        raise self._fail()

    def stats(self) -> dict[str, Any]:
        return {"status": "broken", "error": self.reason}


def describe_failure(exc: BaseException) -> str:
    """A one-line reason: the error's type and message."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if type(exc).__module__.startswith("memcore") else f"{type(exc).__name__}: {text}"


def saved_seq(directory: Path | None, default: int) -> int:
    """The sequence number the saved files of an index are at (``default`` when unknown)."""
    if directory is None:
        return default
    try:
        meta: Mapping[str, Any] = json.loads((directory / "index.json").read_text())
        return int(meta["seq"])
    except (OSError, ValueError, KeyError, TypeError):
        return default
