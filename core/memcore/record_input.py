"""What callers may pass as records, and its validation into :class:`Record` objects."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .errors import DuplicateIdError, ValidationError
from .records import Record, Scope
from .spaces import Space

__all__ = ["RecordInput", "coerce_records", "coerce_ids"]

RecordInput = Record | Mapping[str, Any] | str
"""A :class:`Record`, a dict (``text`` plus optional ``id``, ``metadata``, ``vectors``,
``links``, ``scope``) or a plain string."""

_FIELDS = frozenset({"id", "text", "metadata", "vectors", "links", "scope"})


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
