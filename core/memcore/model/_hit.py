"""Retrieved hits: :class:`Hit` and the :class:`Contribution` entries of its provenance.

Hits are made for every candidate of every query, so they are kept cheap: a retrieval
hands each hit of a fresh ranked list its provenance as a pending entry
(:func:`rank_hits`, built into a :class:`Contribution` on first read), and attaches records
as a :class:`~memcore.model._record_batch.RecordBatch` (each record built on first read). Read
through ``hit.provenance`` and ``hit.record``, both look as if built eagerly.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

from ._record_batch import RecordBatch

if TYPE_CHECKING:
    from ._record import Record

__all__ = ["Hit", "Contribution", "rank_hits", "attach_batch"]

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
