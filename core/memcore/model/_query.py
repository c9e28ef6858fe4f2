"""The question: :class:`Query` (text and/or vectors per space, ``k``, ``where``, scope, extras).

Scores on hits are always "higher is better"; ``Hit.raw`` keeps the library's own number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ValidationError
from ._checks import MAX_TEXT_CHARS, _query_vector, check_unicode, validate_k
from ._record import Scope
from ._filters import Filter, parse_filter


_UNPARSED: Any = object()


@dataclass(slots=True)
class Query:
    """What to retrieve: text and/or vectors per space, ``k``, a ``where`` filter, scope, extras.

    ``extras`` carries kind-specific query modes (graph start nodes, FIFO ``newest``...),
    validated by the index that reads them.
    """

    text: str | None = None
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    k: int = 10
    where: dict[str, Any] | None = None
    scope: Scope | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    _parsed_where: Any = field(default=_UNPARSED, init=False, repr=False, compare=False)
    #: the indexes' parsed query modes, by (mode key, model): see :meth:`memcore.plugin.Index.mode`
    _modes: dict[tuple[str, int], Any] | None = field(default=None, init=False, repr=False, compare=False)
    #: vectors a vector index checked already, by space: see :meth:`memcore.plugin.VectorIndex.query_vector`
    _checked: dict[str, np.ndarray] | None = field(default=None, init=False, repr=False, compare=False)
    _checked_by: Any = field(default=None, init=False, repr=False, compare=False)
    """Who checked this query (set only by ``CollectionReader.request``; a copy starts unchecked)."""

    def __post_init__(self) -> None:
        # runs for every query: the common shapes are checked without a call each (a positive
        # int k, an ASCII text, float32 vectors, no extras, no scope); anything else takes the full checks
        k = self.k
        if type(k) is not int or k <= 0:
            validate_k(k)
        text = self.text
        if text is not None:
            if not isinstance(text, str):
                raise ValidationError(f"query text must be a string, got {type(text).__name__}")
            if len(text) > MAX_TEXT_CHARS:
                raise ValidationError(f"query text has {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
            if not text.isascii():  # an ASCII string holds no lone surrogate
                check_unicode(text, "query text")
        vectors = self.vectors
        if vectors is not None and type(vectors) is not dict and not isinstance(vectors, Mapping):
            raise ValidationError(f"query vectors must be a dict of space name -> vector, got {type(vectors).__name__}")
        checked: dict[str, np.ndarray] = {}
        if vectors:
            for key, value in vectors.items():  # a loop, not a comprehension: no function call per query on CPython 3.11
                checked[key if type(key) is str else str(key)] = _query_vector(value, key)
        self.vectors = checked
        extras = self.extras
        if extras is None:
            self.extras = {}
        elif type(extras) is not dict or extras:
            if not isinstance(extras, Mapping) or not all(isinstance(key, str) for key in extras):
                raise ValidationError(f"query extras must be a dict keyed by index kind (e.g. {{'faiss': {{...}}}}), got {extras!r}"[:300])
        if self.scope is not None:
            self.scope = Scope.coerce(self.scope)

    @classmethod
    def coerce(cls, value: "Query | str | Mapping[str, Any]", **defaults: Any) -> "Query":
        """Accept a Query, a text, or a dict of Query fields; ``defaults`` fill unset fields."""
        if isinstance(value, Query):
            return value
        if isinstance(value, str):
            return cls(text=value, **defaults)
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - _QUERY_FIELDS)
            if unknown:
                raise ValidationError(f"unknown query fields {unknown}; use {sorted(_QUERY_FIELDS)}")
            return cls(**{**defaults, **value})
        raise ValidationError(f"a query must be a Query, a string or a dict, got {type(value).__name__}")

    def evolve(self, **changes: Any) -> "Query":
        """A copy with some fields replaced (validated again)."""
        # what dataclasses.replace does, without its walk over the fields' metadata (a seventh of the cost)
        copy = Query(**{"text": self.text, "vectors": self.vectors, "k": self.k, "where": self.where, "scope": self.scope, "extras": self.extras, **changes})
        if self._modes is not None and "extras" not in changes:  # the same extras: their parsed modes still hold
            copy._modes = self._modes
        return copy

    @property
    def checked(self) -> bool:
        """True when a collection checked this query (``CollectionReader.request``): its k,
        vectors, filter and scope are trusted by every layer below; :meth:`evolve` gives an
        unchecked copy."""
        return self._checked_by is not None

    def parsed_where(self) -> Filter | None:
        """The ``where`` filter parsed (:class:`FilterError` when malformed), once per query:
        every recall stage of a pipeline run resolves the same parsed filter."""
        if self._parsed_where is _UNPARSED:
            where = self.where
            self._parsed_where = None if where is None else parse_filter(where)  # no filter (the common case): no call
        return self._parsed_where  # type: ignore[no-any-return]


_QUERY_FIELDS = frozenset({"text", "vectors", "k", "where", "scope", "extras"})
