"""What callers may pass as records, and its validation into :class:`Record` objects."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, cast

import numpy as np

from ..errors import DuplicateIdError, ValidationError
from ..model._checks import _FAST_HIGH, _FAST_LOW, MAX_ID_CHARS, MAX_TEXT_CHARS
from ..model._record import Record, Scope, _flat_copy
from ..embedders._embedder import Space

__all__ = ["RecordInput", "coerce_records", "coerce_ids"]

RecordInput = Record | Mapping[str, Any] | str
"""A :class:`Record`, a dict (``text`` plus optional ``id``, ``metadata``, ``vectors``,
``links``, ``scope``) or a plain string."""

_FIELDS = frozenset({"id", "text", "metadata", "vectors", "links", "scope"})
_COLUMN_FIELDS = frozenset({"id", "text", "metadata", "vectors"})
_STR = {str}
_DICT = {dict}
_SCALARS = frozenset({str, int, float, bool, type(None)})
_ARRAY = {np.ndarray}
_F32_ID = {id(np.dtype(np.float32))}  # by identity, as records.as_vector's fast path compares dtypes
_shape = attrgetter("shape")
_dtype = attrgetter("dtype")
# float32 squared norms of a batch overflow only for vectors that are refused anyway: the
# per-record path then names them (the batch check only ever accepts). Scoped to this module.
warnings.filterwarnings("ignore", message="overflow encountered in (dot|einsum)", category=RuntimeWarning, module=r"memcore\.record_input$")


def _one(item: Any, scope: Scope | None) -> Record:
    if isinstance(item, Record):
        return Record.create(item.text, id=item.id, metadata=item.metadata, vectors=item.vectors, links=item.links, scope=item.scope or scope)
    if isinstance(item, str):
        return Record.create(item, scope=scope)
    if type(item) is dict or isinstance(item, Mapping):
        if not _FIELDS.issuperset(item):
            raise ValidationError(f"unknown record fields {sorted(set(item) - _FIELDS)}")
        if "text" not in item:
            raise ValidationError("a record needs a 'text'")
        return Record.create(
            item["text"],
            id=item.get("id"),
            metadata=item.get("metadata"),
            vectors=item.get("vectors"),
            links=item.get("links") or (),
            scope=item.get("scope") or scope,
        )
    raise ValidationError(f"cannot insert a {type(item).__name__}; give Records, dicts or strings")


def _unicode_clean(values: list[str]) -> bool:
    """No value holds a lone surrogate (what :func:`memcore.model.check_unicode` refuses),
    checked on all of them joined: one C-level pass (a surrogate is refused wherever it is)."""
    joined = "".join(values)
    if joined.isascii():
        return True
    try:
        joined.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _metadata(value: Any) -> dict[str, Any] | None:
    """:func:`memcore.model._json_safe` for the common shapes (None, a flat dict); None otherwise."""
    if value is None:
        return {}
    return _flat_copy(value) if type(value) is dict else None


def _plain_column(values: list[str]) -> bool:
    """No value holds a NUL or a lone surrogate (:func:`memcore.model._record._flat_copy`'s
    rule for metadata strings), checked on all of them joined."""
    joined = "".join(values)
    return "\x00" not in joined and _unicode_clean([joined])


def scalar_kinds(column: list[Any]) -> set[type] | None:
    """The types of a metadata column's values when each is a scalar metadata may hold as it
    is (a plain string, an int in int64, a finite float, a bool, None); None otherwise (the
    per-record path then decides, with its error)."""
    kinds = {*map(type, column)}
    if not kinds <= _SCALARS:
        return None
    for kind in kinds:
        same: list[Any] = column if len(kinds) == 1 else [v for v in column if type(v) is kind]
        if kind is str and not _plain_column(same):
            return None
        if kind is int and not (-(2**63) <= min(same) and max(same) < 2**63):
            return None
        if kind is float and not all(map(math.isfinite, same)):
            return None
    return kinds


def _metadata_column(values: list[Any]) -> list[dict[str, Any]] | None:
    """:func:`_metadata` of every value of the batch, checked column by column: when every
    value is a dict with the same keys in the same order, each key is checked once and each
    column of values with one C-level pass per kind (the rules of ``_flat_copy``: strings
    without NUL or lone surrogates, 64-bit ints, finite floats, bools and None). The copies
    have their keys sorted, as ``_flat_copy`` makes them. None when the batch is of another
    shape or any value breaks a rule (the per-value path then decides)."""
    if {*map(type, values)} != _DICT:
        return None
    keys = tuple(values[0])
    if not keys or {*map(tuple, values)} != {keys}:
        return None
    if {*map(type, keys)} != _STR or not all(keys) or not _plain_column(list(keys)):
        return None
    columns: dict[str, list[Any]] = {}
    for key in keys:
        column: list[Any] = list(map(itemgetter(key), values))
        columns[key] = column
        if scalar_kinds(column) is None:
            return None
    order = tuple(sorted(keys))
    if order == keys:
        return list(map(dict.copy, values))
    return list(map(dict, map(zip, repeat(order), zip(*[columns[key] for key in order]))))


def _vector_column(values: list[Any], dim: int) -> list[np.ndarray] | None:
    """The vectors of one space for the batch when every value is a float32 array of shape
    ``(dim,)`` (a plain ndarray or a subclass, e.g. the rows of a memory-mapped ``.npy``)
    whose norm surely passes :func:`memcore.model.check_finite_vectors`: one stacked float32
    squared-norm test for the batch (the per-vector test of ``records._fine``, vectorised).
    Plain arrays are returned as given; subclass rows as plain ndarray rows of the stacked
    copy (what :func:`memcore.model.as_vector` would make of each: a plain array). None
    when any value is of another shape or kind, or any norm is near a bound or not finite."""
    types = {*map(type, values)}
    if types != _ARRAY and not all(issubclass(kind, np.ndarray) for kind in types):
        return None
    if {*map(_shape, values)} != {(dim,)} or {*map(id, map(_dtype, values))} != _F32_ID:
        return None
    matrix = np.concatenate(values).reshape(len(values), dim)
    try:
        squares = np.einsum("ij,ij->i", matrix, matrix)
    except RuntimeWarning:  # overflow, with warnings turned into errors: the per-record path decides
        return None
    if not (bool((squares > _FAST_LOW).all()) and bool((squares < _FAST_HIGH).all())):
        return None
    return values if types == _ARRAY else list(np.asarray(matrix))


def _one_space(given: list[Any]) -> dict[str, list[Any]] | None:
    """``{space: the vectors}`` when every item of ``given`` is a dict holding a vector of
    one and the same space (C-level passes, no loop per item); None otherwise."""
    if {*map(type, given)} != {dict} or {*map(len, given)} != {1}:
        return None
    names = {*map(next, map(iter, given))}
    if len(names) != 1:
        return None
    (name,) = names
    return {name: list(map(itemgetter(name), given))}


def _column(items: Sequence[Any], key: str) -> list[Any]:
    """``item.get(key)`` of every item: one C-level pass when every item has the key."""
    try:
        return list(map(itemgetter(key), items))
    except KeyError:
        return [item.get(key) for item in items]


def _column_batch(items: Any, scope: Scope | None, spaces: Mapping[str, Space]) -> list[Record] | None:
    """The common batch validated column by column: a list of dicts, each with a string
    ``id`` (unique in the batch), a ``text``, flat metadata and float32 vectors of declared
    spaces, no links and no scope of its own. Each rule of :meth:`Record.create` runs once
    over a column (C-level ``map``/``join``, one squared-norm test per space) instead of
    once per record. Returns the records exactly as the per-record path builds them, or
    None when any item is of another shape or breaks a rule: the per-record path then
    builds the batch, or raises the error that names the item."""
    if type(items) is not list and type(items) is not tuple or not items:
        return None
    if {*map(type, items)} != {dict} or not all(map(_COLUMN_FIELDS.issuperset, items)):
        return None
    ids = _column(items, "id")
    texts = _column(items, "text")
    if {*map(type, ids)} != _STR or {*map(type, texts)} != _STR:
        return None
    if not all(ids) or max(map(len, ids)) > MAX_ID_CHARS or len(set(ids)) != len(ids) or not _unicode_clean(ids):
        return None
    if not all(texts) or any(map(str.isspace, texts)) or max(map(len, texts)) > MAX_TEXT_CHARS or not _unicode_clean(texts):
        return None
    given_metadata = _column(items, "metadata")
    metadata = _metadata_column(given_metadata)
    if metadata is None:
        each = list(map(_metadata, given_metadata))
        if None in each:
            return None
        metadata = cast("list[dict[str, Any]]", each)
    given = _column(items, "vectors")
    by_space = _one_space(given)
    holders: dict[str, list[dict[str, Any]]] = {}  # per space, the records' dicts holding its vectors, in column order
    if by_space is not None:  # the common batch: every item has a vector of the same one space
        vectors = list(map(dict.copy, given))  # each record its own dict: filling vectors later never reaches the caller's
        holders = dict.fromkeys(by_space, vectors)
    else:
        vectors, by_space = [], {}
        for value in given:
            if value is None:
                vectors.append({})
                continue
            if type(value) is not dict:
                return None
            own = dict(value)
            vectors.append(own)
            for name, vector in value.items():
                column = by_space.get(name)
                if column is None:
                    column = by_space[name] = []
                    holders[name] = []
                column.append(vector)
                holders[name].append(own)
    if not all(type(name) is str and name in spaces for name in by_space):
        return None
    for name, column in by_space.items():
        checked = _vector_column(column, spaces[name].dim)
        if checked is None:
            return None
        if checked is not column:  # plain rows in place of the caller's array subclass
            for held, row in zip(holders[name], checked):
                held[name] = row
    if scope is not None and scope.is_empty():
        scope = None
    now = time.time
    stamps = [now() for _ in ids]  # created_at == updated_at, one reading per record as Record.create takes it
    return list(map(Record, ids, texts, metadata, vectors, repeat(()), repeat(scope), stamps, stamps))


def coerce_ids(ids: Any) -> list[str]:
    """One id (a string) or an iterable of string ids as a list; anything else is a ValidationError."""
    if isinstance(ids, str):
        return [ids]
    if isinstance(ids, (bytes, Mapping)) or not isinstance(ids, Iterable):
        raise ValidationError(f"give a record id or a list of ids, got {type(ids).__name__}")
    out = list(ids)
    bad = [i for i in out if not isinstance(i, str)]
    if bad:
        raise ValidationError(f"record ids are strings, got {bad[0]!r} ({type(bad[0]).__name__})")
    return out


def _same_vectors(a: Record, b: Record) -> bool:
    return a.vectors.keys() == b.vectors.keys() and all(np.array_equal(a.vectors[k], b.vectors[k]) for k in a.vectors)


def coerce_records(items: RecordInput | Sequence[RecordInput], scope: Any, spaces: Mapping[str, Space]) -> list[Record]:
    """Validate a batch into fresh Records (copies: the caller's objects are never mutated).

    Caller-given vectors must belong to declared ``spaces`` with their dimension; an id
    repeated with identical content collapses to one record, with different content it is
    a :class:`DuplicateIdError`; an empty batch is a :class:`ValidationError`.
    """
    if isinstance(items, (Record, str, Mapping)):
        items = [items]
    scope = Scope.coerce(scope)
    columns = _column_batch(items, scope, spaces)
    if columns is not None:
        return columns
    out: dict[str, Record] = {}
    for item in items:
        rec = _one(item, scope)
        for name, vec in rec.vectors.items():
            space = spaces.get(name)
            if space is None:
                raise ValidationError(f"record {rec.id!r} has a vector for undeclared space {name!r}; spaces: {sorted(spaces)}")
            if vec.shape != (space.dim,):  # the message is only formatted for a wrong vector
                space.check_vector(vec, f"vector {name!r} of record {rec.id!r}")
        prev = out.get(rec.id)
        if prev is not None and not (prev.same_content(rec) and _same_vectors(prev, rec)):
            raise DuplicateIdError(f"two different records with id {rec.id!r} in one batch")
        out[rec.id] = rec
    if not out:
        raise ValidationError("nothing to write: the batch is empty")
    return list(out.values())
