"""The question and the answer: :class:`Query` (text and/or vectors per space, ``k``,
``where``, scope, extras) and :class:`Hit` with the :class:`Contribution` entries of its
provenance.

Scores on hits are always "higher is better"; ``Hit.raw`` keeps the library's own number.
Hits are made for every candidate of every query, so they are kept cheap: a retrieval
hands each hit of a fresh ranked list its provenance as a pending entry
(:func:`rank_hits`, built into a :class:`Contribution` on first read), and attaches records
as a :class:`~memcore.model._record_batch.RecordBatch` (each record built on first read). Read
through ``hit.provenance`` and ``hit.record``, both look as if built eagerly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

import numpy as np

from ..errors import ValidationError
from ._checks import MAX_TEXT_CHARS, _query_vector, check_unicode, validate_k
from ._record import Scope
from ._document import DocumentFilter, parse_where_document
from ._filters import Filter, parse_filter
from ._record_batch import RecordBatch

if TYPE_CHECKING:
    from ._record import Record

__all__ = ["Query", "Hit", "Contribution", "rank_hits", "attach_batch"]


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
    where_document: dict[str, Any] | None = None
    """A text filter on the record text (``{"$contains": "..."}``, see :mod:`memcore.model._document`)."""
    _parsed_where: Any = field(default=_UNPARSED, init=False, repr=False, compare=False)
    _parsed_document: Any = field(default=_UNPARSED, init=False, repr=False, compare=False)
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
        copy = Query(
            **{
                "text": self.text,
                "vectors": self.vectors,
                "k": self.k,
                "where": self.where,
                "scope": self.scope,
                "extras": self.extras,
                "where_document": self.where_document,
                **changes,
            }
        )
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

    def parsed_where_document(self) -> DocumentFilter | None:
        """The ``where_document`` text filter parsed (:class:`FilterError` when malformed), once per query."""
        if self._parsed_document is _UNPARSED:
            spec = self.where_document
            self._parsed_document = None if spec is None else parse_where_document(spec)
        return self._parsed_document  # type: ignore[no-any-return]


_QUERY_FIELDS = frozenset({"text", "vectors", "k", "where", "scope", "extras", "where_document"})


_id = attrgetter("id")
_new_tuple = tuple.__new__
"""``tuple.__new__``: builds a named tuple from its fields as ``_make`` does, without its Python-level ``__new__``."""


class Contribution(NamedTuple):
    """One ranked list that contributed to a hit: its name, the hit's 1-based rank and score.

    A named tuple: created for every hit of every fused list, so it must be cheap.
    """

    source: str
    rank: int
    score: float


class Hit:
    """A retrieved id with a score (higher is better) and where it came from.

    ``raw`` is the library's own number (distance, BM25 score...), ``source`` the index or
    stage that produced this hit, ``provenance`` every list that contributed to it,
    ``record`` the stored record when the caller asked for it.

    A hit behaves as a dataclass of these six fields (same constructor, ``==``, ``repr``).
    Records attached by a retrieval are built on first access of ``record``, from what
    the store read when they were attached (see :mod:`memcore.model._record_batch`).
    """

    __slots__ = ("id", "score", "raw", "source", "_provenance", "_record")
    __match_args__ = ("id", "score", "raw", "source", "provenance", "record")
    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value: unhashable, as the dataclass was

    def __init__(
        self,
        id: str,
        score: float,
        raw: float | None = None,
        source: str = "",
        provenance: tuple[Contribution, ...] = (),
        record: Record | None = None,
    ):
        self.id = id
        self.score = score
        self.raw = raw
        self.source = source
        self._provenance: tuple[Any, ...] = provenance
        self._record: Any = record  # a Record, None, or the RecordBatch to build it from

    @property
    def provenance(self) -> tuple[Contribution, ...]:
        """Every ranked list that contributed to this hit (see :class:`Contribution`)."""
        p = self._provenance
        if p and p[0].__class__ is str:  # pending (source, rank, score) from rank_hits: built once, now
            p = self._provenance = (_new_tuple(Contribution, (p[0], p[1], float(p[2]))),)
        return p

    @provenance.setter
    def provenance(self, value: tuple[Contribution, ...]) -> None:
        self._provenance = value

    @property
    def record(self) -> Record | None:
        """The stored record (without vectors) when attached, else None."""
        r = self._record
        if r is not None and isinstance(r, RecordBatch):  # attached lazily: built once, now
            r = self._record = r.record(self.id)
        return r  # type: ignore[no-any-return]

    @record.setter
    def record(self, value: Record | None) -> None:
        self._record = value

    def _fields(self) -> tuple[Any, ...]:
        return (self.id, self.score, self.raw, self.source, self.provenance, self.record)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Hit)
        return self._fields() == other._fields()

    def __repr__(self) -> str:
        return f"Hit(id={self.id!r}, score={self.score!r}, raw={self.raw!r}, source={self.source!r}, provenance={self.provenance!r}, record={self.record!r})"

    def explain(self) -> str:
        """A one-line human explanation of the score."""
        parts = ", ".join(f"{c.source}#{c.rank} ({c.score:.4g})" for c in self.provenance)
        return f"{self.id}: score {self.score:.4g} from {self.source or '?'}" + (f" <- {parts}" if parts else "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict, with the record's text and metadata when loaded."""
        out: dict[str, Any] = {
            "id": self.id,
            "score": self.score,
            "raw": self.raw,
            "source": self.source,
            "provenance": [{"source": c.source, "rank": c.rank, "score": c.score} for c in self.provenance],
        }
        if self.record is not None:
            out["text"] = self.record.text
            out["metadata"] = self.record.metadata
        return out


def rank_hits(hits: Sequence[Hit], source: str, index: str = "") -> None:
    """Give each hit of a fresh ranked list named ``source`` its provenance: its 1-based rank
    and its score there (one :class:`Contribution`, built on first read of ``hit.provenance``);
    a hit that names no ``source`` of its own gets ``index`` (when given).

    What a recall does for every hit of every query: the fields are kept as a plain tuple
    (the score object as it is now: a later change of ``hit.score`` does not reach the
    provenance); the named tuple, its 1-tuple and the score's ``float`` are made only when
    read. A plain loop: on CPython 3.11 it costs half of the same work through ``zip``/``map``."""
    rank = 0
    for hit in hits:
        rank += 1
        hit._provenance = (source, rank, hit.score)
        if not hit.source and index:
            hit.source = index


def attach_batch(hits: list[Hit], batch: RecordBatch) -> list[Hit]:
    """The hits whose id ``batch`` found, each given the batch to build its record from
    (on first access of ``hit.record``); the others (records deleted meanwhile) are dropped."""
    rows = batch._rows
    if batch.complete or all(map(rows.__contains__, map(_id, hits))):  # the usual case: nothing to drop
        for hit in hits:
            hit._record = batch
        return list(hits)
    out = []
    for hit in hits:  # runs for every hit of every retrieval: kept lean
        if hit.id in rows:
            hit._record = batch
            out.append(hit)
    return out
