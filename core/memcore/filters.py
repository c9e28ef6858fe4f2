"""Metadata filters (``where``): parse once, then evaluate in Python or compile to SQL.

Operators: ``$eq $ne $gt $gte $lt $lte $in $nin`` on fields, ``$and $or`` over filters.
A bare value means ``$eq``; several fields in one dict are AND-ed.

Semantics (the same in every store):

- ``$eq``/``$in`` match only when the field exists and equals (numbers compare as numbers,
  booleans only equal booleans, strings only strings);
- ``$ne``/``$nin`` are their negation, so they also match records without the field
  (as in MongoDB);
- ``$gt $gte $lt $lte`` take a number or a string and match only fields of the same kind.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Union

from .errors import FilterError

__all__ = ["Filter", "parse_filter", "matches", "to_sql", "FIELD_PATTERN"]

FIELD_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_COMPARE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_SCALAR = (str, int, float, bool)


@dataclass(frozen=True, slots=True)
class Cond:
    """``field op value``."""

    field: str
    op: str
    value: Any


@dataclass(frozen=True, slots=True)
class BoolNode:
    """``$and`` / ``$or`` over children."""

    op: str
    children: tuple["Filter", ...]


Filter = Union[Cond, BoolNode]


def parse_filter(where: Mapping[str, Any] | None) -> Filter | None:
    """Validate a ``where`` dict and return its tree (None for no filter)."""
    if where is None:
        return None
    if not isinstance(where, Mapping):
        raise FilterError(f"where must be a dict, got {type(where).__name__}")
    nodes: list[Filter] = []
    for key, value in where.items():
        if key in ("$and", "$or"):
            if not isinstance(value, (list, tuple)) or not value:
                raise FilterError(f"{key} takes a non-empty list of filters")
            children = tuple(c for c in (parse_filter(v) for v in value) if c is not None)
            if len(children) != len(value):
                raise FilterError(f"{key} entries must be non-empty filters")
            nodes.append(BoolNode(key, children))
        elif isinstance(key, str) and key.startswith("$"):
            raise FilterError(f"unknown logical operator {key!r}; use $and or $or")
        else:
            nodes.extend(_parse_field(key, value))
    if not nodes:
        return None
    return nodes[0] if len(nodes) == 1 else BoolNode("$and", tuple(nodes))


def _parse_field(name: Any, spec: Any) -> list[Cond]:
    if not isinstance(name, str) or not FIELD_PATTERN.match(name):
        raise FilterError(f"bad field name {name!r}: use letters, digits, '_' or '-'")
    if not isinstance(spec, Mapping):
        return [_cond(name, "$eq", spec)]
    if not spec:
        raise FilterError(f"empty operator dict for field {name!r}")
    return [_cond(name, op, value) for op, value in spec.items()]


def _cond(name: str, op: str, value: Any) -> Cond:
    if op in ("$eq", "$ne"):
        if value is not None and not isinstance(value, _SCALAR):
            raise FilterError(f"{name}: {op} takes a string, number, boolean or null")
    elif op in _COMPARE:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise FilterError(f"{name}: {op} takes a number or a string")
    elif op in ("$in", "$nin"):
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, _SCALAR) for v in value):
            raise FilterError(f"{name}: {op} takes a list of strings, numbers or booleans")
        value = tuple(value)
    else:
        raise FilterError(f"unknown operator {op!r} for field {name!r}; use $eq $ne $gt $gte $lt $lte $in $nin")
    for v in value if isinstance(value, tuple) else (value,):
        if isinstance(v, float) and v != v:
            raise FilterError(f"{name}: NaN cannot be compared")
        if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:
            raise FilterError(f"{name}: integer {v} does not fit in 64 bits")
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise FilterError(f"{name}: {op} value is not valid Unicode (it contains a lone surrogate)") from None
    return Cond(name, op, value)


# -- evaluation in Python ------------------------------------------------------------------

_MISSING = object()


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "num"
    if isinstance(v, str):
        return "str"
    if v is None:
        return "null"
    return "other"


def _equal(actual: Any, expected: Any) -> bool:
    return actual is not _MISSING and _kind(actual) == _kind(expected) and actual == expected


def _eval_cond(cond: Cond, metadata: Mapping[str, Any]) -> bool:
    actual = metadata.get(cond.field, _MISSING)
    op, value = cond.op, cond.value
    if op == "$eq":
        return _equal(actual, value)
    if op == "$ne":
        return not _equal(actual, value)
    if op == "$in":
        return any(_equal(actual, v) for v in value)
    if op == "$nin":
        return not any(_equal(actual, v) for v in value)
    if actual is _MISSING or _kind(actual) != _kind(value):
        return False
    return _PY_COMPARE[op](actual, value)


_PY_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def matches(node: Filter | None, metadata: Mapping[str, Any]) -> bool:
    """Evaluate a parsed filter against one record's metadata."""
    if node is None:
        return True
    if isinstance(node, Cond):
        return _eval_cond(node, metadata)
    results = (matches(child, metadata) for child in node.children)
    return all(results) if node.op == "$and" else any(results)


# -- compilation to SQLite (JSON1) ---------------------------------------------------------

_SQL_TYPES = {"bool": "('true','false')", "num": "('integer','real')", "str": "('text')", "null": "('null')"}


def _sql_value(v: Any) -> Any:
    return int(v) if isinstance(v, bool) else v


def _sql_eq(path: str, column: str, value: Any, params: list[Any]) -> str:
    kind = _kind(value)
    if kind == "null":
        return f"(json_type({column}, {path}) = 'null')"
    params.append(_sql_value(value))
    return f"(json_type({column}, {path}) IN {_SQL_TYPES[kind]} AND json_extract({column}, {path}) = ?)"


def to_sql(node: Filter | None, column: str = "metadata") -> tuple[str, list[Any]]:
    """Compile a parsed filter to an SQLite boolean expression over a JSON ``column``."""
    params: list[Any] = []
    if node is None:
        return "1", params
    return _to_sql(node, column, params), params


def _to_sql(node: Filter, column: str, params: list[Any]) -> str:
    if isinstance(node, BoolNode):
        joiner = " AND " if node.op == "$and" else " OR "
        return "(" + joiner.join(_to_sql(c, column, params) for c in node.children) + ")"
    path = "'$.' || " + _quote_path(node.field)
    op, value = node.op, node.value
    if op in ("$eq", "$ne"):
        expr = _sql_eq(path, column, value, params)
        return expr if op == "$eq" else f"(NOT COALESCE({expr}, 0))"
    if op in ("$in", "$nin"):
        if not value:
            return "0" if op == "$in" else "1"
        expr = "(" + " OR ".join(_sql_eq(path, column, v, params) for v in value) + ")"
        return expr if op == "$in" else f"(NOT COALESCE({expr}, 0))"
    kind = _kind(value)
    params.append(value)
    return f"(json_type({column}, {path}) IN {_SQL_TYPES[kind]} AND json_extract({column}, {path}) {_COMPARE[op]} ?)"


def _quote_path(field: str) -> str:
    # FIELD_PATTERN excludes quotes; the JSON path quotes the key so '-' is allowed.
    return "'" + json.dumps(field) + "'"
