"""What callers may pass as records, and its validation into :class:`Record` objects."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any

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


def _vectors_fine(values: list[Any], dim: int) -> bool:
    """Every value a float32 ndarray of shape ``(dim,)`` whose norm surely passes
    :func:`memcore.model.check_finite_vectors`: one stacked float32 squared-norm test for
    the batch (the per-vector test of ``records._fine``, vectorised)."""
    if {*map(type, values)} != _ARRAY or {*map(_shape, values)} != {(dim,)} or {*map(id, map(_dtype, values))} != _F32_ID:
        return False
    matrix = np.concatenate(values).reshape(len(values), dim)
    try:
        squares = np.einsum("ij,ij->i", matrix, matrix)
    except RuntimeWarning:  # overflow, with warnings turned into errors: the per-record path decides
        return False
    return bool((squares > _FAST_LOW).all()) and bool((squares < _FAST_HIGH).all())


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
    ids = [item.get("id") for item in items]
    texts = [item.get("text") for item in items]
    if {*map(type, ids)} != _STR or {*map(type, texts)} != _STR:
        return None
    if not all(ids) or max(map(len, ids)) > MAX_ID_CHARS or len(set(ids)) != len(ids) or not _unicode_clean(ids):
        return None
    if not all(texts) or any(map(str.isspace, texts)) or max(map(len, texts)) > MAX_TEXT_CHARS or not _unicode_clean(texts):
        return None
    metadata = list(map(_metadata, [item.get("metadata") for item in items]))
    if None in metadata:
        return None
    given = [item.get("vectors") for item in items]
    by_space = _one_space(given)
    if by_space is not None:  # the common batch: every item has a vector of the same one space
        vectors = list(map(dict.copy, given))  # each record its own dict: filling vectors later never reaches the caller's
    else:
        vectors, by_space = [], {}
        for value in given:
            if value is None:
                vectors.append({})
                continue
            if type(value) is not dict:
                return None
            vectors.append(dict(value))
            for name, vector in value.items():
                column = by_space.get(name)
                if column is None:
                    column = by_space[name] = []
                column.append(vector)
    if not all(type(name) is str and name in spaces for name in by_space):
        return None
    for name, column in by_space.items():
        if not _vectors_fine(column, spaces[name].dim):
            return None
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
