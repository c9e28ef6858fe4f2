"""The Index interface: one contract for every kind of index (vector, text, queue, graph...).

An index holds ids and whatever it needs to search them; the records themselves live in
the store. The Collection fills the embedding spaces an index ``requires`` before calling
``add`` or ``search``, and resolves ``where`` filters and scopes to the ``allowed`` id set.
"""

from __future__ import annotations

import json
import os
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection as AbstractSet, Mapping, Sequence, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from .records import Hit, Query, Record

__all__ = ["Index", "IndexContext", "Requirements", "SpaceInfo", "atomic_write_bytes", "atomic_write_json", "query_mode"]


@dataclass(frozen=True)
class Requirements:
    """What an index needs from each record and query.

    ``spaces``: embedding spaces whose vectors must be filled; ``text``: needs the text;
    ``links``: needs ``record.links`` (and is refreshed when links change).
    """

    spaces: tuple[str, ...] = ()
    text: bool = False
    links: bool = False


@dataclass(frozen=True)
class SpaceInfo:
    """An embedding space as the collection declares it: its dimension and embedder."""

    name: str
    dim: int
    embedder: str


@dataclass(frozen=True)
class IndexContext:
    """What an index factory receives besides its config: its name and the spaces."""

    name: str
    spaces: dict[str, SpaceInfo] = field(default_factory=dict)

    def space(self, name: str) -> SpaceInfo:
        """The declared space ``name`` (ConfigError if the settings do not declare it)."""
        from .errors import ConfigError

        try:
            return self.spaces[name]
        except KeyError:
            raise ConfigError(
                f"index {self.name!r} needs embedding space {name!r}, which is not declared; declared: {sorted(self.spaces) or '(none)'}",
                location=f"indexes.{self.name}",
            ) from None


class Index(ABC):
    """Base class of every index. Subclasses implement the abstract methods.

    Contract (checked by :class:`memcore.testing.IndexContract`):

    - ``add(records)`` adds records (re-adding a present id replaces it);
    - ``remove(ids)`` removes ids and ignores those it does not hold;
    - ``search(query, k, allowed)`` returns at most ``k`` hits, best first, scores higher
      is better, only ids in ``allowed`` when it is given;
    - ``save(dir)``/``load(dir)`` persist to a directory the index owns, atomically;
    - ``len(index)`` is the number of ids held.
    """

    #: human-readable name of the score (e.g. "cosine similarity")
    score_name: str = "score"
    #: (low, high) bounds of converted scores; None where unbounded
    score_range: tuple[float | None, float | None] = (None, None)
    #: bump when the on-disk format changes; load() refuses other versions
    format_version: int = 1

    requires: Requirements = Requirements()

    def validate(self, records: Sequence[Record]) -> None:
        """Raise a ValidationError for records this index cannot take (before the store commits)."""

    def validate_query(self, query: Query) -> None:
        """Raise a ValidationError for a query this index cannot run (bad extras...)."""

    @abstractmethod
    def add(self, records: Sequence[Record]) -> None:
        """Add (or replace) records."""

    @abstractmethod
    def remove(self, ids: Sequence[str]) -> None:
        """Remove ids; unknown ids are ignored."""

    @abstractmethod
    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        """The best ``k`` hits for ``query`` among ``allowed`` ids (all when None)."""

    def search_batch(self, queries: Sequence[Query], k: int, allowed: AbstractSet[str] | None = None) -> list[list[Hit]]:
        """Several queries at once; the default is a loop, vector indexes do real batches."""
        return [self.search(q, k, allowed) for q in queries]

    @abstractmethod
    def __len__(self) -> int:
        """Number of ids held."""

    @abstractmethod
    def save(self, directory: Path) -> None:
        """Write the index into ``directory`` (created by the caller), atomically per file."""

    @abstractmethod
    def load(self, directory: Path) -> None:
        """Replace this index's contents with what ``save`` wrote; CorruptError if unreadable."""

    def overflow(self) -> list[str]:
        """Ids this index holds beyond its capacity, oldest first (``[]`` for unbounded indexes).

        The index never drops them by itself: :meth:`Collection.evict` takes them out and
        hands them to the caller.
        """
        return []

    def stats(self) -> dict[str, Any]:
        """Kind-specific numbers for ``memcore info`` (size, parameters...)."""
        return {"size": len(self)}


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``path``, fsync, then ``os.replace`` it in."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_json(path: Path, value: Any) -> None:
    """Atomically write a JSON document."""
    atomic_write_bytes(Path(path), json.dumps(value, sort_keys=True, indent=1).encode("utf-8"))


ModeT = TypeVar("ModeT", bound=BaseModel)


def query_mode(extras: Mapping[str, Any] | None, key: str, model: type[ModeT], index_name: str) -> ModeT | None:
    """An index's query mode: ``extras[key]`` validated by ``model`` (None when absent).

    The convention of every index: its modes live under its kind (``{"faiss": {...}}``);
    other keys belong to other indexes or stages and are ignored. A non-dict value or a
    value ``model`` rejects raises :class:`ValidationError` naming ``extras[key].field``.
    """
    from .errors import ValidationError

    raw = extras.get(key) if extras else None
    if raw is None or isinstance(raw, model):
        return raw
    allowed = sorted(model.model_fields)
    if not isinstance(raw, Mapping):
        raise ValidationError(f"index {index_name!r}: Query.extras[{key!r}] must be a dict of {allowed}, got {type(raw).__name__}")
    try:
        return model.model_validate(dict(raw))
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValidationError(f"index {index_name!r}: bad query mode extras[{key!r}].{where}: {first['msg']}; allowed: {allowed}") from None
