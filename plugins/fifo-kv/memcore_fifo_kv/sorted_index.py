"""The ``sorted`` index: records ordered by one metadata field, with range and top-n reads.

The index keeps ``(value, id)`` in ascending order (ties between equal values broken by
id) in an :class:`~memcore_fifo_kv.ordered.OrderedIds`: O(log n) lookups, bisect-based
inserts and removals. Values are numbers (int or float, not bool, finite) or strings;
one index holds one of the two while it holds anything, and a record that would mix
them is rejected by ``validate`` with a :class:`memcore.ValidationError`. A record
without the field is an error (``missing = "error"``, the default) or is not held
(``missing = "skip"``).

Reads are query modes under ``Query.extras["sorted"]`` (other keys of ``extras`` are
ignored; default ``{"sorted": {"mode": "top", "order": "desc"}}``):

- ``{"mode": "top", "order": "desc" | "asc"}``: the ``k`` largest (or smallest) values;
- ``{"mode": "range", "gte" | "gt": low, "lte" | "lt": high, "order": "asc" | "desc"}``:
  values within the bounds (each optional), ``order`` defaulting to ``"asc"``.

Scores (higher is better): for numbers the value itself in descending reads and minus
the value in ascending ones, ``Hit.raw`` being the value; for strings the value's
position in the whole index's ascending order (0 for the smallest), negated in
ascending reads, ``Hit.raw`` being that position.

Persistence: one JSON file, ``sorted.json``, written atomically (field, value type, ids
and values in order).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Collection as AbstractSet, Literal, Sequence, Union

from pydantic import Field, model_validator

from memcore.plugin import (
    atomic_write_json,
    read_json_object,
    ComponentConfig,
    CorruptError,
    Hit,
    Index,
    IndexContext,
    NotFoundError,
    Query,
    Record,
    Requirements,
    validate_k,
    ValidationError,
)

from .ordered import OrderedIds
from .query_modes import ModeModel

__all__ = ["SortedIndex", "SortedIndexConfig", "TopQuery", "RangeQuery", "value_type"]

FILE = "sorted.json"


Bound = Any
"""A range bound: a finite number (not bool) or a string, checked by :class:`RangeQuery`."""


def value_type(value: Any) -> str | None:
    """``"number"`` or ``"string"`` for a value the index can order, None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return "number" if math.isfinite(value) else None
    if isinstance(value, str):
        return "string"
    return None


class SortedIndexConfig(ComponentConfig):
    """Settings of the ``sorted`` index (``[indexes.<name>] kind = "sorted"``)."""

    kind: str = "sorted"
    field: str = Field(..., min_length=1, description="Top-level metadata field whose value orders the records.")
    missing: Literal["error", "skip"] = Field("error", description="A record without the field: error (rejected before it is stored) or skip (not held).")


class TopQuery(ModeModel):
    """``extras["sorted"] = {"mode": "top", "order": "desc"}``: the largest (``desc``) or smallest (``asc``) values."""

    mode: Literal["top"]
    order: Literal["asc", "desc"] = "desc"

    def bounds(self) -> dict[str, Any]:
        """No bounds: the whole index."""
        return {}


class RangeQuery(ModeModel):
    """``extras["sorted"] = {"mode": "range", "gte"/"gt": low, "lte"/"lt": high, "order": "asc"}``: values within bounds."""

    mode: Literal["range"]
    gte: Bound | None = None
    gt: Bound | None = None
    lte: Bound | None = None
    lt: Bound | None = None
    order: Literal["asc", "desc"] = "asc"

    @model_validator(mode="after")
    def _check(self) -> "RangeQuery":
        if self.gte is not None and self.gt is not None:
            raise ValueError("give at most one lower bound: gte or gt")
        if self.lte is not None and self.lt is not None:
            raise ValueError("give at most one upper bound: lte or lt")
        for name, bound in self.bounds().items():
            if value_type(bound) is None:
                raise ValueError(f"bound {name}={bound!r}: bounds are finite numbers or strings")
        types = {value_type(v) for v in self.bounds().values()}
        if len(types) > 1:
            raise ValueError("bounds must all be numbers or all be strings")
        return self

    def bounds(self) -> dict[str, Any]:
        """The bounds that are set, by name."""
        return {k: v for k, v in (("gte", self.gte), ("gt", self.gt), ("lte", self.lte), ("lt", self.lt)) if v is not None}


SortedQuery = Annotated[Union[TopQuery, RangeQuery], Field(discriminator="mode")]
"""The modes of ``extras["sorted"]``, told apart by ``mode`` (``"top"`` when not given)."""

_DEFAULT_MODE = {"mode": "top"}


class SortedIndex(Index):
    """Ids ordered by a metadata field (see the module docstring)."""

    format_version = 1
    requires = Requirements()
    score_range = (None, None)
    score_name = "field value (desc) or minus it (asc); strings: rank in the index"

    def __init__(self, config: SortedIndexConfig, context: IndexContext):
        super().__init__(config, context)
        self.config = config
        self.field = config.field
        self._order = OrderedIds()
        self._type: str | None = None  # "number" | "string" while the index holds anything

    @property
    def value_type(self) -> str | None:
        """``"number"``, ``"string"``, or None while the index is empty."""
        return self._type if len(self._order) else None

    # -- validation -------------------------------------------------------------------

    def validate(self, records: Sequence[Record]) -> None:
        self._values(records)

    def _values(self, records: Sequence[Record]) -> list[tuple[str, Any]]:
        """``(id, value)`` of the records that have the field, checked; the batch's type is consistent."""
        out = []
        held = self.value_type
        first: tuple[str, str] | None = None  # (type, id) of the batch's first typed value
        for record in records:
            metadata = record.metadata if isinstance(record.metadata, dict) else {}
            if self.field not in metadata:
                if self.config.missing == "error":
                    raise ValidationError(
                        f"index {self.name!r} (sorted on {self.field!r}): record {record.id!r} has no metadata field "
                        f'{self.field!r}; add it, or set missing = "skip" to leave such records out of this index'
                    )
                out.append((record.id, None))
                continue
            value = metadata[self.field]
            kind = value_type(value)
            if kind is None:
                raise ValidationError(
                    f"index {self.name!r} (sorted on {self.field!r}): record {record.id!r} has {self.field}={value!r}; values must be finite numbers or strings"
                )
            expected = held or (first[0] if first else None)
            if expected is not None and kind != expected:
                origin = "the index holds" if held or first is None else f"record {first[1]!r} in this batch has"
                raise ValidationError(
                    f"index {self.name!r} (sorted on {self.field!r}): record {record.id!r} has a {kind} value {value!r} but "
                    f"{origin} {expected} values; one sorted index orders either numbers or strings, not both"
                )
            if first is None:
                first = (kind, record.id)
            out.append((record.id, value))
        return out

    def validate_query(self, query: Query) -> None:
        self._mode(query)

    def _mode(self, query: Query) -> TopQuery | RangeQuery:
        mode: TopQuery | RangeQuery = self.mode(query, SortedQuery, defaults=_DEFAULT_MODE)
        held = self.value_type
        for name, bound in mode.bounds().items():
            if held is not None and value_type(bound) != held:
                raise ValidationError(
                    f"index {self.name!r} (sorted on {self.field!r}): bound {name}={bound!r} is a {value_type(bound)} but the index holds {held} values"
                )
        return mode

    # -- writing ----------------------------------------------------------------------

    def add(self, records: Sequence[Record]) -> None:
        if not records:
            return
        values = self._values(records)
        latest = dict(values)  # a repeated id: the last one wins
        typed = [(rid, v) for rid, v in latest.items() if v is not None]
        self._order.discard([rid for rid, v in latest.items() if v is None])  # re-added without the field
        if typed:
            self._type = value_type(typed[0][1])
            self._order.put(typed)

    def remove(self, ids: Sequence[str]) -> None:
        self._order.discard(ids)

    # -- reading ----------------------------------------------------------------------

    def search(self, query: Query, k: int, allowed: AbstractSet[str] | None = None) -> list[Hit]:
        mode = self._mode(query)
        k = validate_k(k)
        selected = self._select(mode, k, allowed)
        sign, name = (1.0 if mode.order == "desc" else -1.0), self.name
        if self._type == "number":  # score: the value (desc) or minus it (asc)
            return [Hit(rid, sign * float(value), float(value), name) for _, value, rid in selected]
        return [Hit(rid, sign * float(pos), float(pos), name) for pos, _, rid in selected]  # strings: the rank

    def _select(self, mode: TopQuery | RangeQuery, k: int, allowed: AbstractSet[str] | None) -> list[tuple[int, Any, str]]:
        if not len(self._order):
            return []
        lo, hi = self._order.bounds(**mode.bounds())
        return self._order.select(k, lo=lo, hi=hi, descending=mode.order == "desc", allowed=allowed)

    def top(self, n: int, order: Literal["asc", "desc"] = "desc", allowed: AbstractSet[str] | None = None) -> list[str]:
        """The ids of the ``n`` largest (``desc``) or smallest (``asc``) values."""
        mode = self._mode(Query(extras={self.mode_key: {"order": order}}))
        return [rid for _, _, rid in self._select(mode, validate_k(n), allowed)]

    def between(
        self,
        *,
        gte: Any = None,
        gt: Any = None,
        lte: Any = None,
        lt: Any = None,
        order: Literal["asc", "desc"] = "asc",
        limit: int | None = None,
        allowed: AbstractSet[str] | None = None,
    ) -> list[str]:
        """The ids whose values lie within the bounds (each optional), in ``order``, at most ``limit``."""
        modes = {"mode": "range", "order": order, **{k: v for k, v in (("gte", gte), ("gt", gt), ("lte", lte), ("lt", lt)) if v is not None}}
        mode = self._mode(Query(extras={self.mode_key: modes}))
        n = len(self._order) if limit is None else validate_k(limit)
        return [rid for _, _, rid in self._select(mode, n, allowed)] if n else []

    def value_of(self, rid: str) -> Any:
        """The field value a held id is ordered by; NotFoundError when absent."""
        try:
            return self._order.key_of(rid)
        except KeyError:
            raise NotFoundError(f"index {self.name!r} (sorted) does not hold {rid!r}") from None

    def __contains__(self, rid: object) -> bool:
        return rid in self._order

    def __len__(self) -> int:
        return len(self._order)

    def stats(self) -> dict[str, Any]:
        lowest, highest = self._order.select(1), self._order.select(1, descending=True)
        return {
            "size": len(self._order),
            "field": self.field,
            "missing": self.config.missing,
            "value_type": self.value_type,
            "min": lowest[0][1] if lowest else None,
            "max": highest[0][1] if highest else None,
        }

    # -- persistence ------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        entries = self._order.entries()
        atomic_write_json(
            Path(directory) / FILE,
            {
                "kind": "sorted",
                "format_version": self.format_version,
                "field": self.field,
                "value_type": self.value_type,
                "ids": [rid for _, rid in entries],
                "values": [value for value, _ in entries],
            },
        )

    def load(self, directory: Path) -> None:
        where = f"sorted index {self.name!r} in {directory}"
        doc = read_json_object(Path(directory) / FILE, where)  # kind, field, format version: checked by the core (index.json)
        try:
            order, kind = self._parse(doc)
        except (ValueError, TypeError, KeyError) as exc:
            raise CorruptError(f"{where}: malformed {FILE}: {exc}") from None
        self._order = order
        self._type = kind

    def _parse(self, doc: dict[str, Any]) -> tuple[OrderedIds, str | None]:
        ids, values, kind = doc["ids"], doc["values"], doc["value_type"]
        if not (isinstance(ids, list) and isinstance(values, list) and len(ids) == len(values)):
            raise ValueError("ids and values must be lists of the same length")
        if not all(isinstance(i, str) and i for i in ids):
            raise ValueError("ids must be non-empty strings")
        if {value_type(v) for v in values} - {kind} or (kind is None) != (not values):
            raise ValueError(f"values do not all have the saved type {kind!r}")
        order = OrderedIds()
        order.load(list(zip(values, ids)))  # ValueError unless ascending with unique ids
        return order, kind
