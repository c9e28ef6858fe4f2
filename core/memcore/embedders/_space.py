"""Embedding spaces: named vector spaces, each filled by one embedder.

Only the Collection embeds. A space is declared in settings
(``spaces.dense = {embedder = "minilm"}``) or, with no embedder, with a fixed ``dim`` for
caller-given vectors only. The manifest pins each space's embedder, model and dimension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ._embedder import Embedder
from ..errors import ConfigError, DimensionError, ValidationError
from ..indexes._index import Requirements, SpaceInfo
from ..model._query import Query
from ..model._record import Record
from ..model._checks import as_vector, check_finite_vectors

__all__ = ["Space", "fill_vectors", "prepare_query", "query_vector"]


@dataclass
class Space:
    """One embedding space: its name, dimension and (optional) embedder."""

    name: str
    dim: int
    embedder: Embedder | None = None
    embedder_kind: str = "none"

    @property
    def info(self) -> SpaceInfo:
        """The description handed to index factories."""
        return SpaceInfo(self.name, self.dim, self.embedder_kind)

    def manifest(self) -> dict[str, Any]:
        """What the store pins about this space."""
        return {"dim": self.dim, "embedder": self.embedder_kind, "model_id": getattr(self.embedder, "model_id", "") if self.embedder else ""}

    def check_pinned(self, pinned: dict[str, Any]) -> None:
        """Refuse to open a collection whose space was built with another model or dimension."""
        mine = self.manifest()
        if pinned != mine:
            raise ConfigError(
                f"space {self.name!r} was created with {pinned}, settings now give {mine}; "
                "vectors from different models are not comparable: declare a new space (and indexes on it) "
                "or restore the original embedder",
                location=f"spaces.{self.name}",
            )

    def _embed(self, texts: Sequence[str], query: bool) -> np.ndarray:
        if self.embedder is None:
            raise ValidationError(f"space {self.name!r} has no embedder: give vectors for it explicitly")
        fn = self.embedder.embed_queries if query else self.embedder.embed_documents
        out = np.asarray(fn(list(texts)), dtype=np.float32)
        if out.shape != (len(texts), self.dim):
            raise DimensionError(f"embedder of space {self.name!r} returned shape {out.shape}, expected {(len(texts), self.dim)}")
        check_finite_vectors(out, f"embedder of space {self.name!r}: output")
        return out

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Document vectors, checked for shape and finiteness."""
        return self._embed(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors, checked for shape and finiteness."""
        return self._embed(texts, query=True)

    def check_vector(self, vector: np.ndarray, what: str) -> None:
        """Validate a caller-given vector of this space."""
        if vector.shape != (self.dim,):
            raise DimensionError(f"{what} has dimension {vector.shape[0]}, space {self.name!r} has {self.dim}")

    def check_query_vector(self, vector: np.ndarray) -> None:
        """:meth:`check_vector` for a query's vector of this space (its message built only on failure)."""
        if vector.shape != (self.dim,):
            self.check_vector(vector, f"query vector {self.name!r}")


def fill_vectors(spaces: Mapping[str, Space], records: Sequence[Record], names: Sequence[str]) -> list[Record]:
    """Embed the records' missing vectors of the spaces ``names``, one batch per space.

    Returns the records that got a vector (they are changed in place).
    """
    changed: dict[str, Record] = {}
    for name in names:
        todo = [r for r in records if name not in r.vectors]
        if not todo:
            continue
        for record, vector in zip(todo, spaces[name].embed_documents([r.text for r in todo])):
            record.vectors[name] = vector
            changed[record.id] = record
    return list(changed.values())


def query_vector(spaces: Mapping[str, Space], query: Query, name: str) -> np.ndarray:
    """The query's vector in space ``name``, embedded from its text once and cached on it."""
    if name in query.vectors:
        return query.vectors[name]
    if name not in spaces:
        raise ConfigError(f"embedding space {name!r} is not declared")
    if not (query.text and query.text.strip()):
        raise ValidationError(f"the query has neither text nor a vector for space {name!r}")
    query.vectors[name] = as_vector(spaces[name].embed_queries([query.text])[0], what="query vector")
    return query.vectors[name]


def prepare_query(spaces: Mapping[str, Space], query: Query, requires: Requirements) -> Query:
    """Check and complete a query for an index: text when it reads text, vectors of its spaces.

    A query carrying ``extras`` (kind-specific query modes) may omit the text: the index's
    ``validate_query`` decides whether its mode needs it.
    """
    if requires.text and not query.extras and not (query.text and query.text.strip()):
        raise ValidationError("this index searches text: the query text is empty")
    for name in requires.spaces:
        if name in query.vectors and name in spaces:
            spaces[name].check_query_vector(query.vectors[name])
        else:
            query_vector(spaces, query, name)
    return query
